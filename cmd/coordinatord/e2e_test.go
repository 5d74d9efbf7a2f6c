package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

const topicA = "P6hfZFcXRWKz_CyWP2avpg"

func initReq(group, topic string, partition, stateEpoch int32, startOffset int64) *pb.InitializeShareGroupStateRequest {
	return &pb.InitializeShareGroupStateRequest{GroupId: group, Topics: []*pb.InitializeStateTopic{{
		TopicId: topic, Partitions: []*pb.InitializeStatePartition{{Partition: partition, StateEpoch: stateEpoch, StartOffset: startOffset}},
	}}}
}

func writeReq(group, topic string, partition int32, startOffset int64, batches ...*pb.StateBatch) *pb.WriteShareGroupStateRequest {
	return &pb.WriteShareGroupStateRequest{GroupId: group, Topics: []*pb.WriteStateTopic{{
		TopicId: topic, Partitions: []*pb.WriteStatePartition{{
			Partition: partition, StateEpoch: 1, LeaderEpoch: 1, StartOffset: startOffset, StateBatches: batches,
		}},
	}}}
}

func readReq(group, topic string, partition, leaderEpoch int32) *pb.ReadShareGroupStateRequest {
	return &pb.ReadShareGroupStateRequest{GroupId: group, Topics: []*pb.ReadStateTopic{{
		TopicId: topic, Partitions: []*pb.ReadStatePartition{{Partition: partition, LeaderEpoch: leaderEpoch}},
	}}}
}

func mustOK(t *testing.T, what string, code pb.ErrorCode, msg string) {
	t.Helper()
	if code != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("%s: %v %s", what, code, msg)
	}
}

// mustInitialize initializes the share partition (group, topic, partition) at state epoch
// stateEpoch and start offset 0, and fails the test unless that succeeds.
func mustInitialize(ctx context.Context, t *testing.T, p *proc, group, topic string, partition, stateEpoch int32) {
	t.Helper()
	resp, err := p.state.InitializeShareGroupState(ctx, initReq(group, topic, partition, stateEpoch, 0))
	if err != nil {
		t.Fatal(err)
	}
	r := resp.GetResults()[0].GetPartitions()[0]
	mustOK(t, fmt.Sprintf("initialize %s:%s:%d", group, topic, partition), r.GetErrorCode(), r.GetErrorMessage())
}

func setGroupConfig(t *testing.T, p *proc, group, key, value string) {
	t.Helper()
	resp, err := p.config.IncrementalAlterConfigs(ctxT(t), &pb.IncrementalAlterConfigsRequest{Resources: []*pb.AlterConfigsResource{{
		ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: group,
		Configs: []*pb.AlterableConfig{{Name: key, ConfigOperation: pb.ConfigOperation_CONFIG_OPERATION_SET, Value: proto.String(value)}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	r := resp.GetResponses()[0]
	mustOK(t, "alter "+group+" "+key, r.GetErrorCode(), r.GetErrorMessage())
}

// TestSeedSnapshotCadence is the snapshot-frequency proposal's integration test: two share groups
// on the same state partition, group A with an override of 200, group B inheriting a broker
// ceiling of 1000; after 2000 writes each, the log holds exactly 1 + ⌊2000/201⌋ snapshots of A and
// 1 + ⌊2000/1001⌋ of B (the initialize snapshot included), as dump-log shows.
func TestSeedSnapshotCadence(t *testing.T) {
	dir := t.TempDir()
	p := startProc(t, dir,
		"--override", "share.coordinator.snapshot.update.records.per.snapshot=1000",
		"--override", "share.coordinator.cold.partition.snapshot.interval.ms=3600000")
	groupA := "group-a"
	groupB := groupOn("group-b-", statePartitionOf(groupA, 50), 50) // same state partition as A
	setGroupConfig(t, p, groupA, "share.snapshot.update.records.per.snapshot", "200")

	const writes = 2000
	ctx := ctxT(t)
	for _, g := range []string{groupA, groupB} {
		mustInitialize(ctx, t, p, g, topicA, 0, 1)
	}
	var eg errgroup.Group
	eg.SetLimit(16)
	for i := range writes {
		for _, g := range []string{groupA, groupB} {
			eg.Go(func() error {
				off := int64(i)
				resp, err := p.state.WriteShareGroupState(ctx, writeReq(g, topicA, 0, -1,
					&pb.StateBatch{FirstOffset: off, LastOffset: off, DeliveryState: 2, DeliveryCount: 1}))
				if err != nil {
					return err
				}
				if r := resp.GetResults()[0].GetPartitions()[0]; r.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
					return fmt.Errorf("write %s %d: %v %s", g, i, r.GetErrorCode(), r.GetErrorMessage())
				}
				return nil
			})
		}
	}
	if err := eg.Wait(); err != nil {
		t.Fatal(err)
	}
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d after SIGTERM\n%s", code, p.log())
	}

	out, stderr, code := runTool(t, "dump-log", dir)
	if code != 0 {
		t.Fatalf("dump-log exit %d: %s", code, stderr)
	}
	counts := map[string]map[string]int{groupA: {}, groupB: {}}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			Type  string `json:"type"`
			Group string `json:"group"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("dump-log line %q: %v", sc.Text(), err)
		}
		if c, ok := counts[rec.Group]; ok {
			c[rec.Type]++
		}
	}
	want := map[string]map[string]int{
		groupA: {"snapshot": 1 + writes/201, "update": writes - writes/201},
		groupB: {"snapshot": 1 + writes/1001, "update": writes - writes/1001},
	}
	for g, w := range want {
		for typ, n := range w {
			if counts[g][typ] != n {
				t.Errorf("%s: %d %s records, want %d (all: %v)", g, counts[g][typ], typ, n, counts[g])
			}
		}
	}
}

// snapshotOf reads every key's state and summary, for comparing before and after a restart.
func snapshotOf(t *testing.T, p *proc, keys []keyT) []proto.Message {
	t.Helper()
	ctx := ctxT(t)
	var out []proto.Message
	for _, k := range keys {
		rr, err := p.state.ReadShareGroupState(ctx, readReq(k.group, k.topic, k.partition, 3))
		if err != nil {
			t.Fatal(err)
		}
		sr, err := p.state.ReadShareGroupStateSummary(ctx, &pb.ReadShareGroupStateSummaryRequest{GroupId: k.group,
			Topics: []*pb.ReadStateSummaryTopic{{TopicId: k.topic, Partitions: []*pb.ReadStateSummaryPartition{{Partition: k.partition}}}}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rr, sr)
	}
	return out
}

type keyT struct {
	group     string
	topic     string
	partition int32
}

// TestRestartKeepsEverything: after a graceful stop and after a kill -9, every Read and summary
// returns exactly what it returned before, and configuration changes are still in force.
func TestRestartKeepsEverything(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			p := startProc(t, dir, "--override", "share.coordinator.state.topic.num.partitions=7")
			ctx := ctxT(t)
			var keys []keyT
			for g := range 4 {
				for part := range int32(5) {
					k := keyT{"restart-" + strconv.Itoa(g), topicA, part}
					keys = append(keys, k)
					mustInitialize(ctx, t, p, k.group, k.topic, k.partition, 1)
					for w := range int64(30) {
						resp, err := p.state.WriteShareGroupState(ctx, writeReq(k.group, k.topic, k.partition, w/3,
							&pb.StateBatch{FirstOffset: w, LastOffset: w + 5, DeliveryState: int32(w % 3), DeliveryCount: int32(w % 4)}))
						if err != nil {
							t.Fatal(err)
						}
						r := resp.GetResults()[0].GetPartitions()[0]
						mustOK(t, "write", r.GetErrorCode(), r.GetErrorMessage())
					}
				}
			}
			// One key deleted: it must stay deleted.
			if _, err := p.state.DeleteShareGroupState(ctx, &pb.DeleteShareGroupStateRequest{GroupId: keys[0].group,
				Topics: []*pb.DeleteStateTopic{{TopicId: topicA, Partitions: []*pb.DeleteStatePartition{{Partition: keys[0].partition}}}}}); err != nil {
				t.Fatal(err)
			}
			setGroupConfig(t, p, "restart-1", "share.delivery.count.limit", "7")
			before := snapshotOf(t, p, keys)

			if code := p.stop(sig); sig == syscall.SIGTERM && code != 0 {
				t.Fatalf("exit status %d after SIGTERM\n%s", code, p.log())
			}
			p = startProc(t, dir, "--override", "share.coordinator.state.topic.num.partitions=7")
			after := snapshotOf(t, p, keys)
			for i := range before {
				if !proto.Equal(before[i], after[i]) {
					t.Errorf("key %v after restart:\n got %v\nwant %v", keys[i/2], after[i], before[i])
				}
			}
			desc, err := p.config.DescribeConfigs(ctx, &pb.DescribeConfigsRequest{Resources: []*pb.DescribeConfigsResource{{
				ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: "restart-1", ConfigurationKeys: []string{"share.delivery.count.limit"}}}})
			if err != nil {
				t.Fatal(err)
			}
			if c := desc.GetResults()[0].GetConfigs(); len(c) != 1 || c[0].GetValue() != "7" || c[0].GetConfigSource() != pb.ConfigSource_CONFIG_SOURCE_GROUP_CONFIG {
				t.Errorf("group config after restart = %v", c)
			}
		})
	}
}

// TestDataDirInUse: a second server on a data directory that a running one uses is refused at
// start-up, before it touches the config store or a state log, and the first keeps its
// configuration changes.
func TestDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	p := startProc(t, dir)
	setGroupConfig(t, p, "first", "share.delivery.count.limit", "7")

	_, stderr, code := runBinary(t, nil, serverArgs(dir)...)
	if code != exitFailure || !strings.Contains(stderr, "--data-dir "+dir) || !strings.Contains(stderr, "is in use: another process holds its lock") {
		t.Fatalf("second server on the same data directory: exit status %d, want a refusal naming the directory\n%s", code, stderr)
	}

	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d after SIGTERM\n%s", code, p.log())
	}
	p = startProc(t, dir)
	desc, err := p.config.DescribeConfigs(ctxT(t), &pb.DescribeConfigsRequest{Resources: []*pb.DescribeConfigsResource{{
		ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: "first", ConfigurationKeys: []string{"share.delivery.count.limit"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if c := desc.GetResults()[0].GetConfigs(); len(c) != 1 || c[0].GetValue() != "7" {
		t.Errorf("group config after the refused second start and a restart = %v, want 7", c)
	}
}

// TestConnectionLimit: with grpc.max.connections=2, a connection beyond the limit is closed as
// soon as it is accepted, counted and warned of, so that idle connections use up no descriptors;
// once one closes, a new connection is served.
func TestConnectionLimit(t *testing.T) {
	p := startProc(t, t.TempDir(), "--override", "grpc.max.connections=2")
	// p's own client holds one connection; one idle raw connection takes the other slot.
	setGroupConfig(t, p, "before", "share.delivery.count.limit", "7")
	idle, err := net.Dial("tcp", p.grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	for metricValue(t, p.metricsAddr, "sharecoord_connections_open", map[string]string{"listener": "grpc"}) < 2 {
		time.Sleep(5 * time.Millisecond) // the server accepts the idle connection on its own time
	}

	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	if _, err := health.Check(ctxT(t), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("a third connection was served while two were open: %v", err)
	}
	refused := map[string]string{"listener": "grpc", "reason": "max_connections"}
	if got := metricValue(t, p.metricsAddr, "sharecoord_connections_refused_total", refused); got < 1 {
		t.Fatalf("sharecoord_connections_refused_total%v = %v, want at least 1", refused, got)
	}
	waitForLog(t, p, regexp.MustCompile(`grpc port: refused a connection: the port holds grpc.max.connections connections`))
	if err := idle.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := health.Check(ctxT(t), &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("a new connection was not served once a slot freed: %v", err)
	}
}

// TestWatchDoesNotHoldShutdown: a health Watch stream, which never ends by itself, does not hold
// a graceful shutdown for its whole drain timeout (here ten minutes): once no unary call runs,
// the watch is closed and the process exits 0.
func TestWatchDoesNotHoldShutdown(t *testing.T) {
	p := startProc(t, t.TempDir(), "--override", "shutdown.drain.timeout.ms=600000")
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	watch, err := healthpb.NewHealthClient(conn).Watch(ctxT(t), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d\n%s", code, p.log())
	}
	if took := time.Since(began); took > 30*time.Second {
		t.Fatalf("shutdown with a health watch open took %v", took)
	}
	if strings.Contains(p.log(), "the drain ended before every call finished") {
		t.Fatalf("the watch counted as a call the drain cut short\n%s", p.log())
	}
}

// TestHangupWithoutTLS: without TLS there is nothing for SIGHUP to reload; the server logs it and
// keeps serving instead of dying without a drain.
func TestHangupWithoutTLS(t *testing.T) {
	p := startProc(t, t.TempDir())
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, p, regexp.MustCompile(`SIGHUP received: nothing to reload, TLS is off`))
	setGroupConfig(t, p, "after-hup", "share.delivery.count.limit", "7") // still serving
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d after SIGHUP then SIGTERM\n%s", code, p.log())
	}
}

// TestShutdownDrainsCallsInFlight: SIGTERM while writes are in flight. Every call gets an answer
// (success, a retriable per-partition error, or a gRPC status); the process exits 0; after a
// restart every acknowledged write is there.
func TestShutdownDrainsCallsInFlight(t *testing.T) {
	dir := t.TempDir()
	p := startProc(t, dir)
	ctx := ctxT(t)
	const keys = 16
	for k := range int32(keys) {
		mustInitialize(ctx, t, p, "drain", topicA, k, 1)
	}
	var mu sync.Mutex
	acked := map[int32]int64{} // key partition → highest acknowledged offset
	var wg sync.WaitGroup
	started := make(chan struct{})
	var once sync.Once
	for k := range int32(keys) {
		wg.Go(func() {
			for off := int64(0); ; off++ {
				resp, err := p.state.WriteShareGroupState(ctx, writeReq("drain", topicA, k, -1,
					&pb.StateBatch{FirstOffset: off, LastOffset: off, DeliveryState: 2, DeliveryCount: 1}))
				once.Do(func() { close(started) })
				if err != nil {
					return // the server stopped accepting calls
				}
				r := resp.GetResults()[0].GetPartitions()[0]
				if r.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
					if r.GetErrorCode() != pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE {
						t.Errorf("write during shutdown: %v %s", r.GetErrorCode(), r.GetErrorMessage())
					}
					return
				}
				mu.Lock()
				acked[k] = off
				mu.Unlock()
			}
		})
	}
	<-started
	conn := p.conn
	p.conn = nil // keep the client connection open while the server drains
	code := p.stop(syscall.SIGTERM)
	wg.Wait()
	_ = conn.Close()
	if code != 0 {
		t.Fatalf("exit status %d after SIGTERM\n%s", code, p.log())
	}

	p = startProc(t, dir)
	for k, off := range acked {
		rr, err := p.state.ReadShareGroupState(ctxT(t), readReq("drain", topicA, k, 1))
		if err != nil {
			t.Fatal(err)
		}
		got := rr.GetResults()[0].GetPartitions()[0]
		covered := false
		for _, b := range got.GetStateBatches() {
			if b.GetFirstOffset() <= off && off <= b.GetLastOffset() && b.GetDeliveryState() == 2 {
				covered = true
			}
		}
		if !covered {
			t.Errorf("key %d: acknowledged offset %d missing after restart: %v", k, off, got.GetStateBatches())
		}
	}
}
