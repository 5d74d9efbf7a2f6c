package service

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// fuzzSeeds are valid requests of every type (index = position in requestTypes()).
func fuzzSeeds(t testing.TB) [][]byte {
	w := writeReq("g", topicA, 0, 1, 1, 0, batch(0, 9, 2, 1), batch(5, 7, 0, 3), batch(3, 3, 4, 2))
	w.Topics[0].Partitions[0].DeliveryCompleteCount = proto.Int32(4)
	msgs := []proto.Message{
		&pb.InitializeShareGroupStateRequest{GroupId: "g", Topics: []*pb.InitializeStateTopic{
			{TopicId: topicA, Partitions: []*pb.InitializeStatePartition{{Partition: 0, StateEpoch: 1}, {Partition: 1, StateEpoch: 2, StartOffset: -1}}}}},
		readReq("g", topicA, 0, 1),
		w,
		&pb.DeleteShareGroupStateRequest{GroupId: "g", Topics: []*pb.DeleteStateTopic{{TopicId: topicA, Partitions: []*pb.DeleteStatePartition{{Partition: 1}}}}},
		&pb.ReadShareGroupStateSummaryRequest{GroupId: "g", Topics: []*pb.ReadStateSummaryTopic{{TopicId: topicB, Partitions: []*pb.ReadStateSummaryPartition{{Partition: 0}}}}},
		&pb.FindCoordinatorRequest{Keys: []string{"g:" + topicA + ":0", "bad"}},
		&pb.IncrementalAlterConfigsRequest{Resources: []*pb.AlterConfigsResource{
			alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "g", pb.ConfigOperation_CONFIG_OPERATION_SET, snapshotOverride, proto.String("300"))}},
		&pb.DescribeConfigsRequest{Resources: []*pb.DescribeConfigsResource{{ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: "g"}}},
	}
	out := make([][]byte, len(msgs))
	for i, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

func addSeeds(f *testing.F) {
	for i, b := range fuzzSeeds(f) {
		f.Add(b, uint8(i))
	}
	bad := withBadUTF8Seed(f)
	f.Add(bad, uint8(0))
	f.Add([]byte{0x0a, 0x01, 0xff}, uint8(5))
}

// withBadUTF8Seed is an Initialize request whose group id is not UTF-8.
func withBadUTF8Seed(f *testing.F) []byte {
	b, err := proto.Marshal(initReq(marker, topicA, 0, 1, 0))
	if err != nil {
		f.Fatal(err)
	}
	return []byte(strings.ReplaceAll(string(b), marker, badUTF8))
}

// FuzzLenientUnmarshal checks the lenient decoder against protobuf on arbitrary bytes: where
// protobuf succeeds it must give the same message, where protobuf fails for any reason but UTF-8
// it must fail too, and whatever it accepts that then passes Validate must be encodable again
// (no invalid UTF-8 can reach a handler or a response).
func FuzzLenientUnmarshal(f *testing.F) {
	addSeeds(f)
	types := requestTypes()
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		typ := types[int(which)%len(types)]
		want, got := proto.Clone(typ), proto.Clone(typ)
		perr := proto.Unmarshal(b, want)
		lerr := unmarshalLenient(b, got.ProtoReflect())
		switch {
		case perr == nil:
			if lerr != nil {
				t.Fatalf("protobuf decodes, the lenient decoder fails: %v", lerr)
			}
			if !proto.Equal(want, got) {
				t.Fatalf("decodings differ:\nprotobuf %v\nlenient  %v", want, got)
			}
		case isInvalidUTF8(perr):
			// protobuf stops at the first bad string; the lenient decoder goes on and may still
			// meet malformed data after it.
			if lerr != nil {
				return
			}
		default:
			if lerr == nil {
				t.Fatalf("protobuf fails (%v), the lenient decoder accepts: %v", perr, got)
			}
			return
		}
		if got.(validated).Validate() == nil {
			if _, err := proto.Marshal(got); err != nil {
				t.Fatalf("a request that passed Validate does not encode: %v", err)
			}
		}
	})
}

// FuzzRequestValidation decodes arbitrary bytes as the server does (codec) into every request
// type and runs Validate: it must not panic, refusals are one line, and every accepted state
// request has the shape the handlers rely on.
func FuzzRequestValidation(f *testing.F) {
	addSeeds(f)
	types := requestTypes()
	c := newCodec()
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		m := proto.Clone(types[int(which)%len(types)])
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, m); err != nil {
			return
		}
		err := m.(validated).Validate()
		if err != nil {
			if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") || !utf8.ValidString(msg) {
				t.Fatalf("refusal %q is not one line of UTF-8", msg)
			}
			return
		}
		if _, err := proto.Marshal(m); err != nil {
			t.Fatalf("accepted request does not encode: %v", err)
		}
		if r, ok := m.(interface {
			GetGroupId() string
			PartitionCount() int
		}); ok {
			if g := r.GetGroupId(); g == "" || len(g) > pb.MaxGroupIDBytes {
				t.Fatalf("accepted group id of %d bytes", len(g))
			}
			if r.PartitionCount() == 0 {
				t.Fatal("accepted a state request without partitions")
			}
		}
	})
}

// fuzzTarget is a StateServer over real shards whose logs live in memory, built once per fuzzing
// process.
type fuzzTarget struct {
	state  *StateServer
	shards []*shard.Shard
}

func newFuzzTarget(tb testing.TB) *fuzzTarget {
	const partitions = 3
	fsys := faultfs.NewCrashFS()
	ft := &fuzzTarget{}
	parts := make([]Partition, partitions)
	for p := range partitions {
		s := shard.Open(nil, fixedLimit(200), shard.Options{Partition: p}, shard.NewLocalLog(nil, "/data/"+strconv.Itoa(p), statelog.Options{FS: fsys}))
		if err := s.WaitLoaded(context.Background()); err != nil {
			tb.Fatal(err)
		}
		ft.shards = append(ft.shards, s)
		parts[p] = s
	}
	ft.state = NewStateServer(parts, StateOptions{NodeID: 1, Host: "h", Port: 1, MaxPartitionsPerRequest: 64})
	tb.Cleanup(func() {
		for _, s := range ft.shards {
			_ = s.Close()
		}
	})
	return ft
}

// fixedLimit is a shard.Provider with one snapshot limit for every group.
type fixedLimit int

func (l fixedLimit) SnapshotUpdateRecordsPerSnapshot(string) int { return int(l) }

// documented lists the per-partition codes each state RPC may answer (as Kafka's RPCs do; the
// metadata checks are not made, so UNKNOWN_TOPIC_OR_PARTITION never appears).
func documented() map[string][]pb.ErrorCode {
	return map[string][]pb.ErrorCode{
		"initialize": {pb.ErrorCode_ERROR_CODE_NONE, pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, pb.ErrorCode_ERROR_CODE_FENCED_STATE_EPOCH},
		"read":       {pb.ErrorCode_ERROR_CODE_NONE, pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, pb.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH},
		"write": {pb.ErrorCode_ERROR_CODE_NONE, pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, pb.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH,
			pb.ErrorCode_ERROR_CODE_FENCED_STATE_EPOCH},
		"delete":  {pb.ErrorCode_ERROR_CODE_NONE, pb.ErrorCode_ERROR_CODE_INVALID_REQUEST},
		"summary": {pb.ErrorCode_ERROR_CODE_NONE, pb.ErrorCode_ERROR_CODE_INVALID_REQUEST},
	}
}

// FuzzStateHandlers runs arbitrary requests through validation and the state handlers over real
// shards (in-memory logs): nothing panics, every partition of an accepted request gets one result
// in request order with a documented code (and a message unless NONE), a state that Read returns
// is well formed, and every response encodes.
func FuzzStateHandlers(f *testing.F) {
	addSeeds(f)
	ft := newFuzzTarget(f)
	c := newCodec()
	codesOf := documented()
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		ctx := context.Background()
		var (
			resp  proto.Message
			err   error
			codes []pb.ErrorCode
			msgs  []string
			want  []int32
			op    string
		)
		decode := func(m proto.Message) bool {
			if c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, m) != nil {
				return false
			}
			return m.(validated).Validate() == nil
		}
		switch which % 6 {
		case 0:
			req := &pb.InitializeShareGroupStateRequest{}
			if !decode(req) {
				return
			}
			op, want = "initialize", partitionsIn(req.GetTopics())
			var r *pb.InitializeShareGroupStateResponse
			if r, err = ft.state.InitializeShareGroupState(ctx, req); err == nil {
				resp, codes, msgs = r, topicCodes(r.GetResults()), topicMessages(r.GetResults())
			}
		case 1:
			req := &pb.ReadShareGroupStateRequest{}
			if !decode(req) {
				return
			}
			op, want = "read", partitionsIn(req.GetTopics())
			var r *pb.ReadShareGroupStateResponse
			if r, err = ft.state.ReadShareGroupState(ctx, req); err == nil {
				resp = r
				for _, tr := range r.GetResults() {
					for _, p := range tr.GetPartitions() {
						codes, msgs = append(codes, p.GetErrorCode()), append(msgs, p.GetErrorMessage())
						if p.GetErrorCode() == pb.ErrorCode_ERROR_CODE_NONE {
							checkBatches(t, p.GetStateBatches())
						}
					}
				}
			}
		case 2:
			req := &pb.WriteShareGroupStateRequest{}
			if !decode(req) {
				return
			}
			op, want = "write", partitionsIn(req.GetTopics())
			var r *pb.WriteShareGroupStateResponse
			if r, err = ft.state.WriteShareGroupState(ctx, req); err == nil {
				resp, codes, msgs = r, topicCodes(r.GetResults()), topicMessages(r.GetResults())
			}
		case 3:
			req := &pb.DeleteShareGroupStateRequest{}
			if !decode(req) {
				return
			}
			op, want = "delete", partitionsIn(req.GetTopics())
			var r *pb.DeleteShareGroupStateResponse
			if r, err = ft.state.DeleteShareGroupState(ctx, req); err == nil {
				resp, codes, msgs = r, topicCodes(r.GetResults()), topicMessages(r.GetResults())
			}
		case 4:
			req := &pb.ReadShareGroupStateSummaryRequest{}
			if !decode(req) {
				return
			}
			op, want = "summary", partitionsIn(req.GetTopics())
			var r *pb.ReadShareGroupStateSummaryResponse
			if r, err = ft.state.ReadShareGroupStateSummary(ctx, req); err == nil {
				resp = r
				for _, tr := range r.GetResults() {
					for _, p := range tr.GetPartitions() {
						codes, msgs = append(codes, p.GetErrorCode()), append(msgs, p.GetErrorMessage())
					}
				}
			}
		case 5:
			req := &pb.FindCoordinatorRequest{}
			if !decode(req) {
				return
			}
			r, ferr := ft.state.FindCoordinator(ctx, req)
			if ferr != nil || len(r.GetCoordinators()) != len(req.GetKeys()) {
				t.Fatalf("FindCoordinator: %d answers for %d keys, %v", len(r.GetCoordinators()), len(req.GetKeys()), ferr)
			}
			if _, err := proto.Marshal(r); err != nil {
				t.Fatalf("response does not encode: %v", err)
			}
			return
		}
		if err != nil {
			// Only the partition limit refuses a validated request as a whole.
			if len(want) <= 64 {
				t.Fatalf("%s with %d partitions refused: %v", op, len(want), err)
			}
			return
		}
		if len(codes) != len(want) {
			t.Fatalf("%s: %d results for %d partitions", op, len(codes), len(want))
		}
		for i, code := range codes {
			if !slices.Contains(codesOf[op], code) {
				t.Fatalf("%s partition %d: undocumented code %v (%s)", op, want[i], code, msgs[i])
			}
			if code != pb.ErrorCode_ERROR_CODE_NONE && msgs[i] == "" {
				t.Fatalf("%s partition %d: %v without a message", op, want[i], code)
			}
			if want[i] < 0 && code != pb.ErrorCode_ERROR_CODE_INVALID_REQUEST {
				t.Fatalf("%s partition %d answered %v, want INVALID_REQUEST", op, want[i], code)
			}
		}
		if _, err := proto.Marshal(resp); err != nil {
			t.Fatalf("%s response does not encode: %v", op, err)
		}
	})
}

// partitionsIn lists the partitions of a request in the order of its results: by topic id, in
// the order the ids first appear, and in request order within a topic.
func partitionsIn[T interface {
	GetTopicId() string
	GetPartitions() []P
}, P interface{ GetPartition() int32 }](topics []T) []int32 {
	var out []int32
	done := map[string]bool{}
	for i, t := range topics {
		if done[t.GetTopicId()] {
			continue
		}
		done[t.GetTopicId()] = true
		for _, same := range topics[i:] {
			if same.GetTopicId() == t.GetTopicId() {
				for _, p := range same.GetPartitions() {
					out = append(out, p.GetPartition())
				}
			}
		}
	}
	return out
}

func topicCodes(results []*pb.TopicResult) []pb.ErrorCode {
	var out []pb.ErrorCode
	for _, tr := range results {
		for _, p := range tr.GetPartitions() {
			out = append(out, p.GetErrorCode())
		}
	}
	return out
}

func topicMessages(results []*pb.TopicResult) []string {
	var out []string
	for _, tr := range results {
		for _, p := range tr.GetPartitions() {
			out = append(out, p.GetErrorMessage())
		}
	}
	return out
}

// checkBatches fails unless batches are sorted, disjoint and hold valid states and counts.
func checkBatches(t *testing.T, batches []*pb.StateBatch) {
	t.Helper()
	for i, b := range batches {
		if b.GetFirstOffset() < 0 || b.GetFirstOffset() > b.GetLastOffset() ||
			!slices.Contains([]int32{0, 1, 2, 4}, b.GetDeliveryState()) || b.GetDeliveryCount() < 0 {
			t.Fatalf("stored batch %v is malformed", b)
		}
		if i > 0 && batches[i-1].GetLastOffset() >= b.GetFirstOffset() {
			t.Fatalf("stored batches %v and %v overlap or are unsorted", batches[i-1], b)
		}
	}
}
