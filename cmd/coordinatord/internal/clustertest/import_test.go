package clustertest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/coordinatord/coordinatord/client"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// importKeys and importWrites size the single node's data: writes of 40 state batches (about
// 850-byte records) make its partitions' logs pass a 1 MiB segment, so that the first segments
// are pruned and the logs start past offset 0.
const (
	importKeys   = 8
	importWrites = 1000
	importGroup  = "imported"
)

// TestImportSingleNode moves a single node's data into a new cluster with `cluster import`, from a
// node killed with writes in its journal only: every replica's log then dumps as the source's
// does once its journal is replayed (offsets, log-start offsets and all), the
// cluster reads every key back as the single node did, the group override is set on every node,
// importing again changes nothing, and a cluster written to since is refused.
func TestImportSingleNode(t *testing.T) {
	const partitions = 3
	src := &node{t: t, id: 1, host: loopbackHosts(1)[0], dataDir: filepath.Join(t.TempDir(), "single")}
	src.args = []string{"--listen", src.grpcAddr(), "--metrics-listen", src.metricsAddr(), "--data-dir", src.dataDir,
		"--override", fmt.Sprintf("share.coordinator.state.topic.num.partitions=%d", partitions),
		"--override", "share.coordinator.state.topic.segment.bytes=1048576",
		"--override", "share.coordinator.state.topic.prune.interval.ms=200"}
	t.Cleanup(src.cleanup)
	src.start()
	src.waitReady(readyTimeout)
	topic := newTopicID()
	single := importClient(t, src.grpcAddr())
	alterGroup(t, src, importGroup, "share.snapshot.update.records.per.snapshot", "200")
	writeImportData(t, single, topic)
	// A log's start moves only up to what its journal checkpoint (every 10 s) synced: wait for one
	// and the prune after it, write more, then kill the node, so that the last writes are in its
	// journal only and the import must replay it.
	time.Sleep(11 * time.Second)
	for k := range importKeys {
		writeKey(t, single, topic, k, int64(importWrites)*100)
	}
	want := readImportKeys(t, single, topic)
	src.kill()
	c := newCluster(t, clusterOptions{nodes: 3, partitions: partitions})
	c.start()
	server := "--server=" + c.node(2).grpcAddr() // not every partition's leader: import follows them
	out, code := runCLI(t, "cluster", "import", server, "--from", src.dataDir)
	if code != 0 {
		t.Fatalf("cluster import: exit %d\n%s", code, out)
	}
	wantDump := dumpLog(t, src.dataDir) // its logs, with the journal replayed into them
	if !regexp.MustCompile(`"state_partition":\d+,"offset":[1-9]`).MatchString(firstLines(wantDump)) {
		t.Fatalf("no log of the single node was pruned (every one starts at offset 0): the test needs logs that start later\n%s\n%d lines; %s", firstLines(wantDump), strings.Count(wantDump, "\n"), wantDump[len(wantDump)-600:])
	}

	t.Logf("cluster import:\n%s", out)
	if !strings.Contains(out, "the overrides of 1 groups") {
		t.Fatalf("cluster import did not report the group override:\n%s", out)
	}
	for _, n := range c.nodes {
		if got := dumpLog(t, n.dataDir); got != wantDump {
			t.Fatalf("%v holds other records than the single node:\n%s", n, diffLines(wantDump, got))
		}
	}
	got := readImportKeys(t, c.newClient(nil), topic)
	for k := range want {
		if !proto.Equal(got[k], want[k]) {
			t.Fatalf("key %d reads %v from the cluster, %v from the single node", k, got[k], want[k])
		}
	}
	for _, n := range c.nodes {
		if v := describeGroup(t, n, importGroup, "share.snapshot.update.records.per.snapshot"); v != "200" {
			t.Fatalf("%v: the imported group override reads %q, want 200", n, v)
		}
	}

	// Again: nothing to do.
	out, code = runCLI(t, "cluster", "import", server, "--from", src.dataDir)
	if code != 0 || !strings.Contains(out, " 0 records imported") || strings.Contains(out, "records imported, 0 already there") {
		t.Fatalf("cluster import again: exit %d, want every record reported there already\n%s", code, out)
	}
	// A write in the cluster: the source no longer describes it.
	writeKey(t, c.newClient(nil), topic, 0, 1_000_000)
	out, code = runCLI(t, "cluster", "import", server, "--from", src.dataDir)
	if code == 0 || !strings.Contains(out, "holds records the source does not") {
		t.Fatalf("cluster import into a cluster written to since: exit %d, want a refusal\n%s", code, out)
	}
}

func importClient(t *testing.T, addrs ...string) *client.Client {
	t.Helper()
	cl, err := client.New(client.Options{Bootstrap: addrs,
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// writeImportData initializes the keys and writes each importWrites times, concurrently.
func writeImportData(t *testing.T, cl *client.Client, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var parts []*pb.InitializeStatePartition
	for k := range importKeys {
		parts = append(parts, &pb.InitializeStatePartition{Partition: int32(k), StateEpoch: 1})
	}
	if _, err := cl.InitializeShareGroupState(ctx, &pb.InitializeShareGroupStateRequest{GroupId: importGroup,
		Topics: []*pb.InitializeStateTopic{{TopicId: topic, Partitions: parts}}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for k := range importKeys {
		wg.Go(func() {
			for i := range importWrites {
				writeKey(t, cl, topic, k, int64(i)*100)
			}
		})
	}
	wg.Wait()
}

// writeKey writes 40 state batches from offset base to key k.
func writeKey(t *testing.T, cl *client.Client, topic string, k int, base int64) {
	var batches []*pb.StateBatch
	for b := range int64(40) {
		batches = append(batches, &pb.StateBatch{FirstOffset: base + 2*b, LastOffset: base + 2*b, DeliveryState: int32(2 + 2*(b%2)), DeliveryCount: 1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := cl.WriteShareGroupState(ctx, &pb.WriteShareGroupStateRequest{GroupId: importGroup, Topics: []*pb.WriteStateTopic{{TopicId: topic,
		Partitions: []*pb.WriteStatePartition{{Partition: int32(k), StateEpoch: 1, StartOffset: base, StateBatches: batches}}}}})
	if err != nil {
		t.Errorf("write key %d at %d: %v", k, base, err)
		return
	}
	for _, r := range resp.GetResults() {
		for _, p := range r.GetPartitions() {
			if p.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
				t.Errorf("write key %d at %d: %v %s", k, base, p.GetErrorCode(), p.GetErrorMessage())
			}
		}
	}
}

// readImportKeys reads every key's state.
func readImportKeys(t *testing.T, cl *client.Client, topic string) []*pb.ReadStatePartitionResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := make([]*pb.ReadStatePartitionResult, importKeys)
	for k := range importKeys {
		resp, err := cl.ReadShareGroupState(ctx, &pb.ReadShareGroupStateRequest{GroupId: importGroup,
			Topics: []*pb.ReadStateTopic{{TopicId: topic, Partitions: []*pb.ReadStatePartition{{Partition: int32(k)}}}}})
		if err != nil {
			t.Fatalf("read key %d: %v", k, err)
		}
		p := resp.GetResults()[0].GetPartitions()[0]
		if p.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE || len(p.GetStateBatches()) == 0 {
			t.Fatalf("read key %d: %v %s, %d state batches", k, p.GetErrorCode(), p.GetErrorMessage(), len(p.GetStateBatches()))
		}
		out[k] = p
	}
	return out
}

// alterGroup sets one override of group on n.
func alterGroup(t *testing.T, n *node, group, key, value string) {
	t.Helper()
	resp, err := configClient(t, n).IncrementalAlterConfigs(t.Context(), &pb.IncrementalAlterConfigsRequest{Resources: []*pb.AlterConfigsResource{{
		ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: group,
		Configs: []*pb.AlterableConfig{{Name: key, ConfigOperation: pb.ConfigOperation_CONFIG_OPERATION_SET, Value: &value}}}}})
	if err != nil || resp.GetResponses()[0].GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("set %s=%s on group %s: %v %v", key, value, group, err, resp)
	}
}

// describeGroup returns the value of key for group as n describes it.
func describeGroup(t *testing.T, n *node, group, key string) string {
	t.Helper()
	resp, err := configClient(t, n).DescribeConfigs(t.Context(), &pb.DescribeConfigsRequest{Resources: []*pb.DescribeConfigsResource{{
		ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: group, ConfigurationKeys: []string{key}}}})
	if err != nil || len(resp.GetResults()) != 1 || len(resp.GetResults()[0].GetConfigs()) != 1 {
		t.Fatalf("describe %s of group %s on %v: %v %v", key, group, n, err, resp)
	}
	return resp.GetResults()[0].GetConfigs()[0].GetValue()
}

func configClient(t *testing.T, n *node) pb.ConfigServiceClient {
	t.Helper()
	return pb.NewConfigServiceClient(dialConn(t, n))
}

// dumpLog returns `coordinatord dump-log` of a data directory.
func dumpLog(t *testing.T, dataDir string) string {
	t.Helper()
	out, err := exec.Command(binPath, "dump-log", dataDir).Output()
	if err != nil {
		t.Fatalf("dump-log %s: %v", dataDir, err)
	}
	return string(out)
}

// firstLines returns the first record of each state partition in a dump.
func firstLines(dump string) string {
	var out []string
	seen := map[string]bool{}
	for l := range strings.SplitSeq(dump, "\n") {
		if i := strings.Index(l, `,"offset"`); i > 0 && !seen[l[:i]] {
			seen[l[:i]] = true
			out = append(out, l[:min(len(l), 80)])
		}
	}
	return strings.Join(out, "\n")
}

// diffLines describes the first difference of two dumps.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d of %d/%d:\nwant %.200s\ngot  %.200s", i+1, len(w), len(g), a, b)
		}
	}
	return "equal"
}
