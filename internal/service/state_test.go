package service

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/shard"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

func TestStateRoundTrip(t *testing.T) {
	ts := startServer(t, testOptions{})
	ctx := ctxT(t)

	init, err := ts.state.InitializeShareGroupState(ctx, initReq("g1", topicA, 0, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := init.GetResults()[0].GetPartitions()[0]; got.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("initialize: %v", got)
	}

	w := writeReq("g1", topicA, 0, 1, 3, 5, batch(5, 9, 2, 1), batch(10, 19, 0, 1))
	w.Topics[0].Partitions[0].DeliveryCompleteCount = proto.Int32(5)
	wr, err := ts.state.WriteShareGroupState(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if got := wr.GetResults()[0].GetPartitions()[0]; got.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("write: %v", got)
	}

	rr, err := ts.state.ReadShareGroupState(ctx, readReq("g1", topicA, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	want := &pb.ReadStatePartitionResult{
		Partition: 0, StateEpoch: 1, StartOffset: 5,
		StateBatches: []*pb.StateBatch{batch(5, 9, 2, 1), batch(10, 19, 0, 1)},
	}
	if got := rr.GetResults()[0].GetPartitions()[0]; !proto.Equal(got, want) {
		t.Fatalf("read = %v, want %v", got, want)
	}

	sr, err := ts.state.ReadShareGroupStateSummary(ctx, &pb.ReadShareGroupStateSummaryRequest{GroupId: "g1",
		Topics: []*pb.ReadStateSummaryTopic{{TopicId: topicA, Partitions: []*pb.ReadStateSummaryPartition{{Partition: 0}, {Partition: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	wantSummary := []*pb.ReadStateSummaryPartitionResult{
		// The leader epoch was claimed by the read above; the write's higher epoch is not stored.
		{Partition: 0, StateEpoch: 1, LeaderEpoch: 3, StartOffset: 5, DeliveryCompleteCount: 5},
		// Never initialized: Kafka's sentinels.
		{Partition: 1, StateEpoch: 0, LeaderEpoch: 0, StartOffset: -1, DeliveryCompleteCount: -1},
	}
	for i, got := range sr.GetResults()[0].GetPartitions() {
		if !proto.Equal(got, wantSummary[i]) {
			t.Errorf("summary[%d] = %v, want %v", i, got, wantSummary[i])
		}
	}

	dr, err := ts.state.DeleteShareGroupState(ctx, &pb.DeleteShareGroupStateRequest{GroupId: "g1",
		Topics: []*pb.DeleteStateTopic{{TopicId: topicA, Partitions: []*pb.DeleteStatePartition{{Partition: 0}, {Partition: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dr.GetResults()[0].GetPartitions() {
		if p.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Errorf("delete partition %d: %v", p.GetPartition(), p)
		}
	}
	rr, err = ts.state.ReadShareGroupState(ctx, readReq("g1", topicA, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	if got := rr.GetResults()[0].GetPartitions()[0]; got.GetErrorCode() != pb.ErrorCode_ERROR_CODE_INVALID_REQUEST ||
		!strings.Contains(got.GetErrorMessage(), "uninitialized") {
		t.Fatalf("read after delete = %v, want INVALID_REQUEST for an uninitialized share partition", got)
	}
}

func TestRequestShapeErrors(t *testing.T) {
	ts := startServer(t, testOptions{overrides: []string{"max.partitions.per.request=4"}})
	ctx := ctxT(t)
	many := &pb.WriteStateTopic{TopicId: topicA}
	for p := range int32(5) {
		many.Partitions = append(many.Partitions, &pb.WriteStatePartition{Partition: p})
	}
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"empty group", func() error {
			_, err := ts.state.InitializeShareGroupState(ctx, initReq("", topicA, 0, 0, 0))
			return err
		}, "group_id must not be empty"},
		{"no topics", func() error {
			_, err := ts.state.ReadShareGroupState(ctx, &pb.ReadShareGroupStateRequest{GroupId: "g"})
			return err
		}, "topics must not be empty"},
		{"topic without partitions", func() error {
			_, err := ts.state.DeleteShareGroupState(ctx, &pb.DeleteShareGroupStateRequest{GroupId: "g",
				Topics: []*pb.DeleteStateTopic{{TopicId: topicA}}})
			return err
		}, "has no partitions"},
		{"duplicate partition", func() error {
			_, err := ts.state.ReadShareGroupStateSummary(ctx, &pb.ReadShareGroupStateSummaryRequest{GroupId: "g",
				Topics: []*pb.ReadStateSummaryTopic{
					{TopicId: topicA, Partitions: []*pb.ReadStateSummaryPartition{{Partition: 1}}},
					{TopicId: topicA, Partitions: []*pb.ReadStateSummaryPartition{{Partition: 1}}},
				}})
			return err
		}, "appears twice"},
		{"too many partitions", func() error {
			_, err := ts.state.WriteShareGroupState(ctx, &pb.WriteShareGroupStateRequest{GroupId: "g", Topics: []*pb.WriteStateTopic{many}})
			return err
		}, "at most 4 are allowed"},
		{"group id too long", func() error {
			_, err := ts.state.InitializeShareGroupState(ctx, initReq(strings.Repeat("g", pb.MaxGroupIDBytes+1), topicA, 0, 0, 0))
			return err
		}, "at most 32767 bytes"},
		{"find coordinator without keys", func() error {
			_, err := ts.state.FindCoordinator(ctx, &pb.FindCoordinatorRequest{})
			return err
		}, "keys must not be empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.want) {
				t.Fatalf("error = %v, want InvalidArgument containing %q", err, tc.want)
			}
		})
	}
}

func TestPerPartitionErrors(t *testing.T) {
	ts := startServer(t, testOptions{})
	ctx := ctxT(t)
	if _, err := ts.state.InitializeShareGroupState(ctx, initReq("g", topicA, 0, 5, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.state.ReadShareGroupState(ctx, readReq("g", topicA, 0, 7)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		req  *pb.WriteShareGroupStateRequest
		code pb.ErrorCode
		want string
	}{
		{"bad topic id", writeReq("g", "not-a-uuid", 0, 5, 7, 0), pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "not a valid topic id"},
		{"empty topic id", writeReq("g", "", 0, 5, 7, 0), pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "not a valid topic id"},
		{"negative partition", writeReq("g", topicA, -1, 5, 7, 0), pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "partition"},
		{"negative leader epoch", writeReq("g", topicA, 0, 5, -1, 0), pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "leader epoch"},
		{"uninitialized", writeReq("g", topicB, 0, 5, 7, 0), pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "uninitialized"},
		{"fenced leader epoch", writeReq("g", topicA, 0, 5, 6, 0), pb.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH, ""},
		{"fenced state epoch", writeReq("g", topicA, 0, 4, 7, 0), pb.ErrorCode_ERROR_CODE_FENCED_STATE_EPOCH, ""},
		{"delivery state overflow", writeReq("g", topicA, 0, 5, 7, 0, batch(0, 1, 300, 1)), pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "State batch 0 has delivery state 300; the valid states are"},
		{"delivery count overflow", writeReq("g", topicA, 0, 5, 7, 0, batch(0, 1, 0, 1<<20)), pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "State batch 0 has delivery count 1048576; the valid counts are 0 to 32767."},
		{"first after last", writeReq("g", topicA, 0, 5, 7, 0, batch(9, 1, 0, 1)), pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, ""},
		{"undefined delivery state", writeReq("g", topicA, 0, 5, 7, 0, batch(0, 1, 3, 1)), pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := ts.state.WriteShareGroupState(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			got := resp.GetResults()[0].GetPartitions()[0]
			if got.GetErrorCode() != tc.code || !strings.Contains(got.GetErrorMessage(), tc.want) {
				t.Fatalf("result = %v, want %v with message containing %q", got, tc.code, tc.want)
			}
			if tc.code != pb.ErrorCode_ERROR_CODE_NONE && got.GetErrorMessage() == "" {
				t.Fatalf("error %v without a message", got.GetErrorCode())
			}
		})
	}
}

// TestResultsInRequestOrder checks that results keep the request's topic and partition order
// although keys run in parallel on different partitions.
func TestResultsInRequestOrder(t *testing.T) {
	ts := startServer(t, testOptions{partitions: 7})
	ctx := ctxT(t)
	req := &pb.InitializeShareGroupStateRequest{GroupId: "order", Topics: []*pb.InitializeStateTopic{
		{TopicId: topicB, Partitions: []*pb.InitializeStatePartition{{Partition: 9}, {Partition: 2}, {Partition: 5}}},
		{TopicId: "bogus", Partitions: []*pb.InitializeStatePartition{{Partition: 1}}},
		{TopicId: topicA, Partitions: []*pb.InitializeStatePartition{{Partition: 30}, {Partition: 0}, {Partition: 17}, {Partition: 4}}},
	}}
	resp, err := ts.state.InitializeShareGroupState(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetResults()) != len(req.Topics) {
		t.Fatalf("got %d topic results, want %d", len(resp.GetResults()), len(req.Topics))
	}
	for i, tr := range resp.GetResults() {
		if tr.GetTopicId() != req.Topics[i].TopicId {
			t.Fatalf("topic %d = %s, want %s", i, tr.GetTopicId(), req.Topics[i].TopicId)
		}
		for j, pr := range tr.GetPartitions() {
			if pr.GetPartition() != req.Topics[i].Partitions[j].Partition {
				t.Fatalf("topic %d partition %d = %d, want %d", i, j, pr.GetPartition(), req.Topics[i].Partitions[j].Partition)
			}
			wantCode := pb.ErrorCode_ERROR_CODE_NONE
			if tr.GetTopicId() == "bogus" {
				wantCode = pb.ErrorCode_ERROR_CODE_INVALID_REQUEST
			}
			if pr.GetErrorCode() != wantCode {
				t.Fatalf("topic %s partition %d: %v, want %v", tr.GetTopicId(), pr.GetPartition(), pr.GetErrorCode(), wantCode)
			}
		}
	}
}

// resultShape describes topic results as "A[3 1] B[0]" (topicA, topicB) and checks that every
// partition answered NONE.
func resultShape[P interface {
	GetPartition() int32
	GetErrorCode() pb.ErrorCode
}, T interface {
	GetTopicId() string
	GetPartitions() []P
}](t *testing.T, rpc string, results []T) string {
	t.Helper()
	var out []string
	for _, r := range results {
		name := map[string]string{topicA: "A", topicB: "B"}[r.GetTopicId()]
		var ps []int32
		for _, p := range r.GetPartitions() {
			ps = append(ps, p.GetPartition())
			if p.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
				t.Errorf("%s: %s-%d answered %v", rpc, name, p.GetPartition(), p.GetErrorCode())
			}
		}
		out = append(out, fmt.Sprint(name, ps))
	}
	return strings.Join(out, " ")
}

// TestTopicNamedInSeveralEntries: a topic named in several entries of one request gets one result,
// where it first appears, holding the partitions of all its entries in request order, as Kafka
// answers; this holds for every state RPC.
func TestTopicNamedInSeveralEntries(t *testing.T) {
	ts := startServer(t, testOptions{partitions: 7})
	ctx := ctxT(t)
	const want = "A[3 1 2 0] B[0 5 4]"
	initialize := &pb.InitializeShareGroupStateRequest{GroupId: "merge"}
	write := &pb.WriteShareGroupStateRequest{GroupId: "merge"}
	read := &pb.ReadShareGroupStateRequest{GroupId: "merge"}
	summary := &pb.ReadShareGroupStateSummaryRequest{GroupId: "merge"}
	del := &pb.DeleteShareGroupStateRequest{GroupId: "merge"}
	for _, e := range []struct {
		topic      string
		partitions []int32
	}{{topicA, []int32{3, 1}}, {topicB, []int32{0}}, {topicA, []int32{2}}, {topicB, []int32{5, 4}}, {topicA, []int32{0}}} {
		it, wt, rt := &pb.InitializeStateTopic{TopicId: e.topic}, &pb.WriteStateTopic{TopicId: e.topic}, &pb.ReadStateTopic{TopicId: e.topic}
		st, dt := &pb.ReadStateSummaryTopic{TopicId: e.topic}, &pb.DeleteStateTopic{TopicId: e.topic}
		for _, p := range e.partitions {
			it.Partitions = append(it.Partitions, &pb.InitializeStatePartition{Partition: p, StateEpoch: 1})
			wt.Partitions = append(wt.Partitions, &pb.WriteStatePartition{Partition: p, StateEpoch: 1, LeaderEpoch: 1, StartOffset: 10})
			rt.Partitions = append(rt.Partitions, &pb.ReadStatePartition{Partition: p, LeaderEpoch: 1})
			st.Partitions = append(st.Partitions, &pb.ReadStateSummaryPartition{Partition: p, LeaderEpoch: 1})
			dt.Partitions = append(dt.Partitions, &pb.DeleteStatePartition{Partition: p})
		}
		initialize.Topics, write.Topics, read.Topics = append(initialize.Topics, it), append(write.Topics, wt), append(read.Topics, rt)
		summary.Topics, del.Topics = append(summary.Topics, st), append(del.Topics, dt)
	}
	shapes := map[string]func() (string, error){
		"1 Initialize": func() (string, error) {
			r, err := ts.state.InitializeShareGroupState(ctx, initialize)
			return resultShape[*pb.PartitionResult](t, "Initialize", r.GetResults()), err
		},
		"2 Write": func() (string, error) {
			r, err := ts.state.WriteShareGroupState(ctx, write)
			return resultShape[*pb.PartitionResult](t, "Write", r.GetResults()), err
		},
		"3 Read": func() (string, error) {
			r, err := ts.state.ReadShareGroupState(ctx, read)
			for _, tr := range r.GetResults() {
				for _, p := range tr.GetPartitions() {
					if p.GetStartOffset() != 10 {
						t.Errorf("Read of partition %d: start offset %d, want the 10 written", p.GetPartition(), p.GetStartOffset())
					}
				}
			}
			return resultShape[*pb.ReadStatePartitionResult](t, "Read", r.GetResults()), err
		},
		"4 ReadSummary": func() (string, error) {
			r, err := ts.state.ReadShareGroupStateSummary(ctx, summary)
			return resultShape[*pb.ReadStateSummaryPartitionResult](t, "ReadSummary", r.GetResults()), err
		},
		"5 Delete": func() (string, error) {
			r, err := ts.state.DeleteShareGroupState(ctx, del)
			return resultShape[*pb.PartitionResult](t, "Delete", r.GetResults()), err
		},
	}
	for _, rpc := range slices.Sorted(maps.Keys(shapes)) {
		got, err := shapes[rpc]()
		if err != nil || got != want {
			t.Errorf("%s answered %q, %v; want %q", rpc, got, err, want)
		}
	}
}

func TestFindCoordinator(t *testing.T) {
	ts := startServer(t, testOptions{partitions: 50})
	ctx := ctxT(t)
	// Routing vectors with 50 partitions, plus keys that do not parse.
	keys := []string{
		"group1:AAAAAAAAAAAAAAAAAAAAAA:0",
		"group1:AAAAAAAAAAAAAAAAAAAAAQ:3",
		"my-share-group:P6hfZFcXRWKz_CyWP2avpg:7",
		"grp:with:colons:ASNFZ4mrze8BI0VniavN7w:12",
		"ünïcödé:_____________________w:1",
		"no-partition:P6hfZFcXRWKz_CyWP2avpg",
		":P6hfZFcXRWKz_CyWP2avpg:1",
		"g:not-a-topic-id:1",
		"g:P6hfZFcXRWKz_CyWP2avpg:x",
		"g:P6hfZFcXRWKz_CyWP2avpg:-1", // parses, but the state RPCs refuse a negative partition
	}
	want := []int32{44, 23, 16, 45, 40, -1, -1, -1, -1, -1}
	resp, err := ts.state.FindCoordinator(ctx, &pb.FindCoordinatorRequest{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range resp.GetCoordinators() {
		if c.GetKey() != keys[i] {
			t.Fatalf("coordinator %d key = %q, want %q", i, c.GetKey(), keys[i])
		}
		if want[i] < 0 {
			if c.GetErrorCode() != pb.ErrorCode_ERROR_CODE_INVALID_REQUEST || c.GetErrorMessage() == "" ||
				c.GetStatePartition() != -1 || c.GetNodeId() != -1 {
				t.Errorf("key %q: %v, want INVALID_REQUEST with a message and no partition or node", keys[i], c)
			}
			continue
		}
		if c.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE || c.GetStatePartition() != want[i] ||
			c.GetNodeId() != 1 || c.GetHost() != "127.0.0.1" || c.GetPort() != 7070 {
			t.Errorf("key %q: %v, want partition %d on node 1 at 127.0.0.1:7070", keys[i], c, want[i])
		}
	}
}

// In a cluster, FindCoordinator answers each key's partition leader, or the partition's error.
func TestFindCoordinatorInACluster(t *testing.T) {
	parts := make([]Partition, 50)
	srv := NewStateServer(parts, StateOptions{Coordinators: func(p int) Coordinator {
		switch {
		case p == 16:
			return Coordinator{NodeID: -1, Port: -1, Code: kafkaerr.CoordinatorNotAvailable, Message: "state partition 16 has no leader"}
		case p%2 == 0:
			return Coordinator{NodeID: 2, Host: "node-2", Port: 7070}
		}
		return Coordinator{NodeID: 3, Host: "node-3", Port: 7071}
	}})
	resp, err := srv.FindCoordinator(ctxT(t), &pb.FindCoordinatorRequest{Keys: []string{
		"group1:AAAAAAAAAAAAAAAAAAAAAA:0", "group1:AAAAAAAAAAAAAAAAAAAAAQ:3", "my-share-group:P6hfZFcXRWKz_CyWP2avpg:7",
		"my-share-group:P6hfZFcXRWKz_CyWP2avpg:-7"}})
	if err != nil {
		t.Fatal(err)
	}
	c := resp.GetCoordinators()
	if c[0].GetStatePartition() != 44 || c[0].GetNodeId() != 2 || c[0].GetHost() != "node-2" || c[0].GetPort() != 7070 {
		t.Errorf("partition 44: %v, want node 2 at node-2:7070", c[0])
	}
	if c[1].GetStatePartition() != 23 || c[1].GetNodeId() != 3 || c[1].GetHost() != "node-3" || c[1].GetPort() != 7071 {
		t.Errorf("partition 23: %v, want node 3 at node-3:7071", c[1])
	}
	if c[2].GetStatePartition() != 16 || c[2].GetErrorCode() != pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE ||
		c[2].GetErrorMessage() == "" || c[2].GetNodeId() != -1 {
		t.Errorf("partition 16: %v, want COORDINATOR_NOT_AVAILABLE", c[2])
	}
	if c[3].GetErrorCode() != pb.ErrorCode_ERROR_CODE_INVALID_REQUEST || c[3].GetStatePartition() != -1 ||
		!strings.Contains(c[3].GetErrorMessage(), "partition id cannot be a negative number") {
		t.Errorf("negative partition: %v, want INVALID_REQUEST", c[3])
	}
}

func TestStateOperationMetrics(t *testing.T) {
	ts := startServer(t, testOptions{})
	ctx := ctxT(t)
	if _, err := ts.state.WriteShareGroupState(ctx, writeReq("g", topicA, 0, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.state.InitializeShareGroupState(ctx, initReq("g", topicA, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.state.WriteShareGroupState(ctx, writeReq("g", topicA, 0, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	m := ts.metrics
	if got := testutil.ToFloat64(m.operations.WithLabelValues(opWrite, "INVALID_REQUEST")); got != 1 {
		t.Errorf("write INVALID_REQUEST count = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.operations.WithLabelValues(opWrite, "NONE")); got != 1 {
		t.Errorf("write NONE count = %v, want 1", got)
	}
	if got := testutil.CollectAndCount(m.writeLatency); got != 1 {
		t.Errorf("write latency series = %d, want 1", got)
	}
	n, err := testutil.GatherAndCount(ts.reg, "sharecoord_write_latency_seconds", "grpc_server_handled_total")
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("no sharecoord_write_latency_seconds or grpc_server_handled_total series gathered")
	}
}

func TestHealthFollowsServing(t *testing.T) {
	ts := startServer(t, testOptions{})
	ctx := ctxT(t)
	h := healthpb.NewHealthClient(ts.conn)
	for _, svc := range healthServices {
		resp, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("health %q before serving = %v, %v; want NOT_SERVING", svc, resp, err)
		}
	}
	ts.srv.SetServing(true)
	for _, svc := range healthServices {
		resp, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q after serving = %v, %v; want SERVING", svc, resp, err)
		}
	}
}

// panicking is a partition whose every operation panics.
type panicking struct{ Partition }

func (panicking) Write(context.Context, shard.WriteRequest) shard.Result {
	panic("boom: secret detail")
}

func TestPanicBecomesInternalWithoutStack(t *testing.T) {
	ts := startServer(t, testOptions{wrap: func(ps []Partition) []Partition {
		out := make([]Partition, len(ps))
		for i, p := range ps {
			out[i] = panicking{p}
		}
		return out
	}})
	// One key runs on the handler's goroutine; the keys of a larger request each on their own,
	// whose panic the handler's goroutine takes over.
	two := writeReq("g", topicA, 0, 0, 0, 0)
	two.Topics[0].Partitions = append(two.Topics[0].Partitions, writeReq("g", topicA, 1, 0, 0, 0).Topics[0].Partitions...)
	for _, req := range []*pb.WriteShareGroupStateRequest{writeReq("g", topicA, 0, 0, 0, 0), two} {
		_, err := ts.state.WriteShareGroupState(ctxT(t), req)
		st := status.Convert(err)
		if st.Code() != codes.Internal || strings.Contains(st.Message(), "boom") || strings.Contains(st.Message(), "goroutine") {
			t.Fatalf("%d keys: error = %v, want Internal without the panic value or stack", len(req.Topics[0].Partitions), err)
		}
	}
	// The server keeps serving.
	if _, err := ts.state.InitializeShareGroupState(ctxT(t), initReq("g", topicA, 0, 0, 0)); err != nil {
		t.Fatalf("after a panic: %v", err)
	}
}

// TestShutdownWithCallsInFlight drains: every call either completes or gets a gRPC status; none
// hangs and none is answered twice.
func TestShutdownWithCallsInFlight(t *testing.T) {
	ts := startServer(t, testOptions{})
	ctx := ctxT(t)
	if _, err := ts.state.InitializeShareGroupState(ctx, initReq("g", topicA, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	started := make(chan struct{}, 64)
	var mu sync.Mutex
	ok, failed := 0, 0
	for i := range 64 {
		wg.Go(func() {
			started <- struct{}{}
			resp, err := ts.state.WriteShareGroupState(ctx, writeReq("g", topicA, 0, 0, 0, int64(i), batch(int64(i), int64(i), 2, 1)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if status.Code(err) == codes.Unknown {
					t.Errorf("write during shutdown: %v (no gRPC status)", err)
				}
				failed++
				return
			}
			code := resp.GetResults()[0].GetPartitions()[0].GetErrorCode()
			if code != pb.ErrorCode_ERROR_CODE_NONE && code != pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE {
				t.Errorf("write during shutdown: %v", code)
			}
			ok++
		})
	}
	for range 64 {
		<-started
	}
	ts.stop()
	wg.Wait()
	if ok+failed != 64 {
		t.Fatalf("answered %d of 64 calls", ok+failed)
	}
}

// blocking is a partition whose writes wait until release is closed or their context ends.
type blocking struct {
	Partition
	started chan<- struct{}
	release <-chan struct{}
}

func (b blocking) Write(ctx context.Context, r shard.WriteRequest) shard.Result {
	b.started <- struct{}{}
	select {
	case <-b.release:
		return b.Partition.Write(ctx, r)
	case <-ctx.Done():
		return shard.Result{Code: kafkaerr.CoordinatorNotAvailable, Message: "cancelled"}
	}
}

// TestShutdownDrainsUnaryCallsNotWatches: a drain waits for the unary calls being handled, not
// for health watches (which never end by themselves); a unary call still running when the drain
// ends is cancelled and Shutdown reports it.
func TestShutdownDrainsUnaryCallsNotWatches(t *testing.T) {
	for _, tc := range []struct {
		name        string
		release     bool // the blocked write finishes while the drain waits
		wantDrained bool
	}{
		{"a watch alone", false, true},
		{"a write that finishes", true, true},
		{"a write that outlasts the drain", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started, release := make(chan struct{}, 1), make(chan struct{})
			ts := startServer(t, testOptions{wrap: func(ps []Partition) []Partition {
				out := make([]Partition, len(ps))
				for i, p := range ps {
					out[i] = blocking{p, started, release}
				}
				return out
			}})
			ts.srv.SetServing(true)
			ctx := ctxT(t)
			if _, err := ts.state.InitializeShareGroupState(ctx, initReq("g", topicA, 0, 0, 0)); err != nil {
				t.Fatal(err)
			}
			watch, err := healthpb.NewHealthClient(ts.conn).Watch(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := watch.Recv(); err != nil {
				t.Fatal(err)
			}
			writeErr := make(chan error, 1)
			if tc.name != "a watch alone" {
				go func() {
					_, err := ts.state.WriteShareGroupState(ctx, writeReq("g", topicA, 0, 0, 0, 0, batch(0, 0, 2, 1)))
					writeErr <- err
				}()
				<-started
			}
			if tc.release {
				time.AfterFunc(300*time.Millisecond, func() { close(release) })
			}
			timeout := time.Minute
			if !tc.wantDrained {
				timeout = 500 * time.Millisecond
			}
			drainCtx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if drained := ts.srv.Shutdown(drainCtx); drained != tc.wantDrained {
				t.Fatalf("Shutdown reported drained=%v, want %v", drained, tc.wantDrained)
			}
			if tc.wantDrained && drainCtx.Err() != nil {
				t.Fatal("the drain waited for its whole timeout")
			}
			if tc.name != "a watch alone" {
				err := <-writeErr
				if tc.release && err != nil {
					t.Fatalf("the write that finished during the drain failed: %v", err)
				}
				if !tc.release && status.Code(err) == codes.OK {
					t.Fatal("the write that outlasted the drain was not cancelled")
				}
			}
			<-ts.serveErr
			ts.serveErr <- nil // for the cleanup, which shuts down again
		})
	}
}
