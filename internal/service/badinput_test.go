package service

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// outcome is how the server answered a call: a gRPC status code, and for calls answered per
// item the code and message of the first item.
type outcome struct {
	grpc codes.Code
	msg  string // gRPC status message, or the first item's error message
	item pb.ErrorCode
}

// badInput is one malformed request and the documented answer.
type badInput struct {
	name string
	call func(ctx context.Context, ts *testServer) outcome
	want outcome // msg: a substring the answer must contain
}

func grpcOutcome(err error) outcome {
	st := status.Convert(err)
	return outcome{grpc: st.Code(), msg: st.Message()}
}

// firstItem returns the outcome of a call answered per partition or per resource.
func firstItem(code pb.ErrorCode, msg string) outcome {
	return outcome{grpc: codes.OK, item: code, msg: msg}
}

func callInit(req *pb.InitializeShareGroupStateRequest) func(context.Context, *testServer) outcome {
	return func(ctx context.Context, ts *testServer) outcome {
		r, err := ts.state.InitializeShareGroupState(ctx, req)
		if err != nil {
			return grpcOutcome(err)
		}
		p := r.GetResults()[0].GetPartitions()[0]
		return firstItem(p.GetErrorCode(), p.GetErrorMessage())
	}
}

func callWrite(req *pb.WriteShareGroupStateRequest) func(context.Context, *testServer) outcome {
	return func(ctx context.Context, ts *testServer) outcome {
		r, err := ts.state.WriteShareGroupState(ctx, req)
		if err != nil {
			return grpcOutcome(err)
		}
		p := r.GetResults()[0].GetPartitions()[0]
		return firstItem(p.GetErrorCode(), p.GetErrorMessage())
	}
}

func callRead(req *pb.ReadShareGroupStateRequest) func(context.Context, *testServer) outcome {
	return func(ctx context.Context, ts *testServer) outcome {
		r, err := ts.state.ReadShareGroupState(ctx, req)
		if err != nil {
			return grpcOutcome(err)
		}
		p := r.GetResults()[0].GetPartitions()[0]
		return firstItem(p.GetErrorCode(), p.GetErrorMessage())
	}
}

func callDelete(req *pb.DeleteShareGroupStateRequest) func(context.Context, *testServer) outcome {
	return func(ctx context.Context, ts *testServer) outcome {
		r, err := ts.state.DeleteShareGroupState(ctx, req)
		if err != nil {
			return grpcOutcome(err)
		}
		p := r.GetResults()[0].GetPartitions()[0]
		return firstItem(p.GetErrorCode(), p.GetErrorMessage())
	}
}

func callSummary(req *pb.ReadShareGroupStateSummaryRequest) func(context.Context, *testServer) outcome {
	return func(ctx context.Context, ts *testServer) outcome {
		r, err := ts.state.ReadShareGroupStateSummary(ctx, req)
		if err != nil {
			return grpcOutcome(err)
		}
		p := r.GetResults()[0].GetPartitions()[0]
		return firstItem(p.GetErrorCode(), p.GetErrorMessage())
	}
}

func callFind(keys ...string) func(context.Context, *testServer) outcome {
	return func(ctx context.Context, ts *testServer) outcome {
		r, err := ts.state.FindCoordinator(ctx, &pb.FindCoordinatorRequest{Keys: keys})
		if err != nil {
			return grpcOutcome(err)
		}
		c := r.GetCoordinators()[len(keys)-1]
		return firstItem(c.GetErrorCode(), c.GetErrorMessage())
	}
}

func callAlter(res *pb.AlterConfigsResource) func(context.Context, *testServer) outcome {
	return func(ctx context.Context, ts *testServer) outcome {
		r, err := ts.config.IncrementalAlterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{Resources: []*pb.AlterConfigsResource{res}})
		if err != nil {
			return grpcOutcome(err)
		}
		p := r.GetResponses()[0]
		return firstItem(p.GetErrorCode(), p.GetErrorMessage())
	}
}

func callDescribe(res *pb.DescribeConfigsResource) func(context.Context, *testServer) outcome {
	return func(ctx context.Context, ts *testServer) outcome {
		r, err := ts.config.DescribeConfigs(ctx, &pb.DescribeConfigsRequest{Resources: []*pb.DescribeConfigsResource{res}})
		if err != nil {
			return grpcOutcome(err)
		}
		p := r.GetResults()[0]
		return firstItem(p.GetErrorCode(), p.GetErrorMessage())
	}
}

func callRaw(t *testing.T, method string, req proto.Message, resp proto.Message) func(context.Context, *testServer) outcome {
	wire := withBadUTF8(t, req)
	return func(_ context.Context, ts *testServer) outcome {
		return grpcOutcome(ts.conn.Invoke(ctxT(t), method, rawRequest(wire), resp, grpc.ForceCodecV2(rawCodec{})))
	}
}

func callBytes(method string, wire []byte) func(context.Context, *testServer) outcome {
	return func(ctx context.Context, ts *testServer) outcome {
		return grpcOutcome(ts.conn.Invoke(ctx, method, rawRequest(wire), &pb.WriteShareGroupStateResponse{}, grpc.ForceCodecV2(rawCodec{})))
	}
}

// The answers the cases expect.
func invalidArgument(msg string) outcome { return outcome{grpc: codes.InvalidArgument, msg: msg} }
func invalidRequest(msg string) outcome {
	return firstItem(pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, msg)
}
func invalidConfig(msg string) outcome { return firstItem(pb.ErrorCode_ERROR_CODE_INVALID_CONFIG, msg) }
func fenced(c pb.ErrorCode) outcome    { return firstItem(c, "") }

const (
	badLimitPartitions = 16
	badLimitBytes      = 64 << 10
)

func writeWith(mod func(p *pb.WriteStatePartition)) *pb.WriteShareGroupStateRequest {
	r := writeReq("g", topicA, 0, 5, 7, 0)
	mod(r.Topics[0].Partitions[0])
	return r
}

func writeBatch(b *pb.StateBatch) *pb.WriteShareGroupStateRequest {
	return writeReq("g", topicA, 0, 5, 7, 0, batch(0, 0, 2, 1), b)
}

func readWith(partition, leaderEpoch int32, topic string) *pb.ReadShareGroupStateRequest {
	return readReq("g", topic, partition, leaderEpoch)
}

func manyPartitions(n int) *pb.WriteShareGroupStateRequest {
	t := &pb.WriteStateTopic{TopicId: topicA}
	for p := range int32(n) {
		t.Partitions = append(t.Partitions, &pb.WriteStatePartition{Partition: p, StateEpoch: 5, LeaderEpoch: 7})
	}
	return &pb.WriteShareGroupStateRequest{GroupId: "g", Topics: []*pb.WriteStateTopic{t}}
}

// badInputs is the table of malformed requests; each names its documented answer (README,
// sharecoord.v1 proto comments, Kafka's error codes and shard handlers). The server under test has
// the key (g, topicA, 0) initialized with state epoch 5 and leader epoch 7.
func badInputs(t *testing.T) []badInput {
	set := pb.ConfigOperation_CONFIG_OPERATION_SET
	group, broker := pb.ResourceType_RESOURCE_TYPE_GROUP, pb.ResourceType_RESOURCE_TYPE_BROKER
	str := proto.String
	return []badInput{
		// Whole-request faults: gRPC INVALID_ARGUMENT (or the transport's own codes).
		{"initialize: empty group id", callInit(initReq("", topicA, 0, 1, 0)), invalidArgument("group_id must not be empty")},
		{"read: empty group id", callRead(readReq("", topicA, 0, 1)), invalidArgument("group_id must not be empty")},
		{"write: empty group id", callWrite(writeReq("", topicA, 0, 1, 1, 0)), invalidArgument("group_id must not be empty")},
		{"delete: empty group id", callDelete(&pb.DeleteShareGroupStateRequest{Topics: []*pb.DeleteStateTopic{
			{TopicId: topicA, Partitions: []*pb.DeleteStatePartition{{Partition: 0}}}}}), invalidArgument("group_id must not be empty")},
		{"summary: empty group id", callSummary(&pb.ReadShareGroupStateSummaryRequest{Topics: []*pb.ReadStateSummaryTopic{
			{TopicId: topicA, Partitions: []*pb.ReadStateSummaryPartition{{Partition: 0}}}}}), invalidArgument("group_id must not be empty")},
		{"group id over 32767 bytes", callInit(initReq(strings.Repeat("x", pb.MaxGroupIDBytes+1), topicA, 0, 1, 0)), invalidArgument("at most 32767 bytes")},
		{"group id not UTF-8", callRaw(t, methodWrite, writeReq(marker, topicA, 0, 1, 1, 0), &pb.WriteShareGroupStateResponse{}), invalidArgument("group_id is not valid UTF-8")},
		{"topic id not UTF-8", callRaw(t, methodRead, readReq("g", marker, 0, 1), &pb.ReadShareGroupStateResponse{}), invalidArgument("topics[0].topic_id is not valid UTF-8")},
		{"initialize: no topics", callInit(&pb.InitializeShareGroupStateRequest{GroupId: "g"}), invalidArgument("topics must not be empty")},
		{"write: no topics", callWrite(&pb.WriteShareGroupStateRequest{GroupId: "g"}), invalidArgument("topics must not be empty")},
		{"topic without partitions", callDelete(&pb.DeleteShareGroupStateRequest{GroupId: "g", Topics: []*pb.DeleteStateTopic{{TopicId: topicA}}}),
			invalidArgument("has no partitions")},
		{"partition twice in one topic", callRead(&pb.ReadShareGroupStateRequest{GroupId: "g", Topics: []*pb.ReadStateTopic{
			{TopicId: topicA, Partitions: []*pb.ReadStatePartition{{Partition: 3}, {Partition: 3}}}}}), invalidArgument("appears twice")},
		{"partition twice across topic entries", callSummary(&pb.ReadShareGroupStateSummaryRequest{GroupId: "g", Topics: []*pb.ReadStateSummaryTopic{
			{TopicId: topicA, Partitions: []*pb.ReadStateSummaryPartition{{Partition: 1}}},
			{TopicId: topicA, Partitions: []*pb.ReadStateSummaryPartition{{Partition: 1}}}}}), invalidArgument("appears twice")},
		{"over the partition limit", callWrite(manyPartitions(badLimitPartitions + 1)), invalidArgument("at most 16 are allowed")},
		{"over the partition limit across topics", callInit(&pb.InitializeShareGroupStateRequest{GroupId: "g", Topics: []*pb.InitializeStateTopic{
			{TopicId: topicA, Partitions: []*pb.InitializeStatePartition{{Partition: 0}, {Partition: 1}, {Partition: 2}, {Partition: 3}, {Partition: 4}, {Partition: 5}, {Partition: 6}, {Partition: 7}, {Partition: 8}}},
			{TopicId: topicB, Partitions: []*pb.InitializeStatePartition{{Partition: 0}, {Partition: 1}, {Partition: 2}, {Partition: 3}, {Partition: 4}, {Partition: 5}, {Partition: 6}, {Partition: 7}, {Partition: 8}}}}}),
			invalidArgument("at most 16 are allowed")},
		{"over the message size limit", callInit(initReq(strings.Repeat("x", badLimitBytes), topicA, 0, 1, 0)),
			outcome{grpc: codes.ResourceExhausted, msg: "larger than max"}},
		{"find coordinator: no keys", callFind(), invalidArgument("keys must not be empty")},
		{"find coordinator: key not UTF-8", callRaw(t, methodFind, &pb.FindCoordinatorRequest{Keys: []string{marker + ":" + topicA + ":0"}}, &pb.FindCoordinatorResponse{}),
			invalidArgument("keys[0] is not valid UTF-8")},
		{"alter: resource name not UTF-8", callRaw(t, methodAlter, &pb.IncrementalAlterConfigsRequest{Resources: []*pb.AlterConfigsResource{
			alter(group, marker, set, snapshotOverride, str("300"))}}, &pb.IncrementalAlterConfigsResponse{}), invalidArgument("resources[0].resource_name is not valid UTF-8")},
		{"not a protobuf message", callBytes(methodWrite, []byte{0x0a, 0x7f, 'g'}), outcome{grpc: codes.Internal, msg: "failed to unmarshal"}},

		// Per-partition faults: INVALID_REQUEST with a message (Kafka's shard handlers; DESIGN.md
		// "Errors").
		{"topic id empty", callWrite(writeReq("g", "", 0, 5, 7, 0)), invalidRequest("not a valid topic id")},
		{"topic id too short", callWrite(writeReq("g", "P6hfZFcX", 0, 5, 7, 0)), invalidRequest("want 22 characters")},
		{"topic id 23 characters", callRead(readWith(0, 7, topicA+"A")), invalidRequest("want 22 characters")},
		{"topic id outside the base64 alphabet", callWrite(writeReq("g", "P6hfZFcXRWKz_CyWP2avp!", 0, 5, 7, 0)), invalidRequest("not a valid topic id")},
		{"topic id in standard base64", callInit(initReq("g", "P6hfZFcXRWKz+CyWP2avpg", 0, 5, 0)), invalidRequest("not a valid topic id")},
		{"topic id with non-canonical last character", callInit(initReq("g", "P6hfZFcXRWKz_CyWP2avph", 0, 5, 0)), invalidRequest("not a valid topic id")},
		{"negative partition (write)", callWrite(writeReq("g", topicA, -1, 5, 7, 0)), invalidRequest("partition id cannot be a negative")},
		{"minimum int32 partition (read)", callRead(readWith(math.MinInt32, 7, topicA)), invalidRequest("partition id cannot be a negative")},
		{"negative partition (initialize)", callInit(initReq("g", topicA, -5, 5, 0)), invalidRequest("partition id cannot be a negative")},
		{"negative partition (delete)", callDelete(&pb.DeleteShareGroupStateRequest{GroupId: "g", Topics: []*pb.DeleteStateTopic{
			{TopicId: topicA, Partitions: []*pb.DeleteStatePartition{{Partition: -2}}}}}), invalidRequest("partition id cannot be a negative")},
		{"negative partition (summary)", callSummary(&pb.ReadShareGroupStateSummaryRequest{GroupId: "g", Topics: []*pb.ReadStateSummaryTopic{
			{TopicId: topicA, Partitions: []*pb.ReadStateSummaryPartition{{Partition: -1}}}}}), invalidRequest("partition id cannot be a negative")},
		{"negative leader epoch (write)", callWrite(writeReq("g", topicA, 0, 5, -1, 0)), invalidRequest("leader epoch cannot be a negative")},
		{"minimum int32 leader epoch (read)", callRead(readWith(0, math.MinInt32, topicA)), invalidRequest("leader epoch cannot be a negative")},
		{"negative state epoch (initialize)", callInit(initReq("g", topicA, 0, -1, 0)), invalidRequest("state epoch cannot be a negative")},
		{"negative state epoch (write)", callWrite(writeReq("g", topicA, 0, math.MinInt32, 7, 0)), invalidRequest("state epoch cannot be a negative")},
		{"start offset below -1 (write)", callWrite(writeReq("g", topicA, 0, 5, 7, -2)), invalidRequest("start offset cannot be less than -1")},
		{"minimum int64 start offset (initialize)", callInit(initReq("g", topicA, 0, 5, math.MinInt64)), invalidRequest("start offset")},
		{"delivery complete count below -1", callWrite(writeWith(func(p *pb.WriteStatePartition) { p.DeliveryCompleteCount = proto.Int32(-2) })),
			invalidRequest("delivery complete count cannot be less than -1")},
		{"negative first offset", callWrite(writeBatch(batch(-1, 5, 2, 1))), invalidRequest("negative first offset")},
		{"minimum int64 first and last offset", callWrite(writeBatch(batch(math.MinInt64, math.MinInt64, 2, 1))), invalidRequest("negative first offset")},
		{"negative last offset", callWrite(writeBatch(batch(0, -1, 2, 1))), invalidRequest("greater than last offset")},
		{"first offset after last offset", callWrite(writeBatch(batch(10, 9, 2, 1))), invalidRequest("greater than last offset")},
		{"delivery state 3", callWrite(writeBatch(batch(0, 1, 3, 1))), invalidRequest("delivery state 3")},
		{"delivery state -1", callWrite(writeBatch(batch(0, 1, -1, 1))), invalidRequest("delivery state -1")},
		{"delivery state 5", callWrite(writeBatch(batch(0, 1, 5, 1))), invalidRequest("delivery state 5")},
		{"delivery state beyond int8", callWrite(writeBatch(batch(0, 1, 258, 1))), invalidRequest("State batch 1 has delivery state 258; the valid states are")},
		{"delivery count -1", callWrite(writeBatch(batch(0, 1, 2, -1))), invalidRequest("State batch 1 has delivery count -1; the valid counts are 0 to 32767.")},
		{"delivery count beyond int16", callWrite(writeBatch(batch(0, 1, 2, math.MaxInt16+1))), invalidRequest("State batch 1 has delivery count 32768; the valid counts are 0 to 32767.")},
		// A value too wide for Kafka's fields is answered after the checks that come before its
		// batch, as any other invalid batch would be.
		{"delivery state beyond int8, negative partition", callWrite(writeReq("g", topicA, -1, 5, 7, 0, batch(0, 1, 300, 1))),
			invalidRequest("partition id cannot be a negative")},
		{"delivery count beyond int16, negative leader epoch", callWrite(writeReq("g", topicA, 0, 5, -1, 0, batch(0, 1, 2, math.MaxInt32))),
			invalidRequest("leader epoch cannot be a negative")},
		{"delivery state beyond int8 after a bad batch", callWrite(writeReq("g", topicA, 0, 5, 7, 0, batch(-1, 1, 2, 1), batch(0, 1, 300, 1))),
			invalidRequest("State batch 0 has a negative first offset -1.")},
		{"delivery state beyond int8, negative first offset in the same batch", callWrite(writeReq("g", topicA, 0, 5, 7, 0, batch(-1, 1, 300, 1))),
			invalidRequest("State batch 0 has a negative first offset -1.")},
		{"delivery count beyond int16, delivery state 3 in the same batch", callWrite(writeReq("g", topicA, 0, 5, 7, 0, batch(0, 1, 3, 40000))),
			invalidRequest("State batch 0 has delivery state 3;")},
		{"delivery state beyond int8, delivery count -1 in the same batch", callWrite(writeReq("g", topicA, 0, 5, 7, 0, batch(0, 1, 300, -1))),
			invalidRequest("State batch 0 has delivery state 300;")},
		{"delivery state beyond int8, start offset below -1", callWrite(writeReq("g", topicA, 0, 5, 7, -2, batch(0, 1, 300, 1))),
			invalidRequest("start offset cannot be less than -1")},
		{"delivery count minimum int32", callWrite(writeBatch(batch(0, 1, 2, math.MinInt32))), invalidRequest("State batch 1 has delivery count -2147483648; the valid counts")},
		{"write to an uninitialized key", callWrite(writeReq("g", topicB, 0, 5, 7, 0)), invalidRequest("uninitialized share partition")},
		{"read of an uninitialized key", callRead(readWith(9, 7, topicA)), invalidRequest("uninitialized share partition")},
		{"write from an older leader", callWrite(writeReq("g", topicA, 0, 5, 6, 0)), fenced(pb.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH)},
		{"write with an older state epoch", callWrite(writeReq("g", topicA, 0, 4, 7, 0)), fenced(pb.ErrorCode_ERROR_CODE_FENCED_STATE_EPOCH)},
		{"read from an older leader", callRead(readWith(0, 6, topicA)), fenced(pb.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH)},
		{"initialize with an older state epoch", callInit(initReq("g", topicA, 0, 4, 0)), fenced(pb.ErrorCode_ERROR_CODE_FENCED_STATE_EPOCH)},
		{"find coordinator: key without partition", callFind("g:" + topicA), invalidRequest("groupId:topicId:partition")},
		{"find coordinator: key with a bad topic id", callFind("g:not-a-topic:0"), invalidRequest("\"not-a-topic\" is not a valid topic id")},
		{"find coordinator: partition overflows int32", callFind("g:" + topicA + ":2147483648"), invalidRequest("invalid partition")},
		{"find coordinator: blank group", callFind("  :" + topicA + ":0"), invalidRequest("group id must not be blank")},
		{"find coordinator: empty key", callFind(""), invalidRequest("empty")},
		{"find coordinator: negative partition", callFind("g:" + topicA + ":-1"), invalidRequest("partition id cannot be a negative")},
		{"find coordinator: minimum int32 partition", callFind("g:"+topicA+":0", "g:"+topicA+":-2147483648"),
			invalidRequest("partition id cannot be a negative")},

		// Configuration faults: per resource INVALID_CONFIG or INVALID_REQUEST with a message.
		{"unknown config name", callAlter(alter(group, "g", set, "share.no.such.config", str("1"))), invalidConfig("share.no.such.config")},
		{"broker config on a group", callAlter(alter(group, "g", set, snapshotCeiling, str("500"))), invalidConfig(snapshotCeiling)},
		{"value of the wrong type", callAlter(alter(group, "g", set, "share.delivery.count.limit", str("five"))), invalidConfig("five")},
		{"boolean that is not one", callAlter(alter(group, "g", set, "share.renew.acknowledge.enable", str("yes"))), invalidConfig("yes")},
		{"value below the floor", callAlter(alter(group, "g", set, snapshotOverride, str("199"))), invalidConfig("200")},
		{"value above the broker ceiling", callAlter(alter(group, "g", set, snapshotOverride, str("501"))), invalidConfig("501")},
		{"value beyond int32", callAlter(alter(group, "g", set, snapshotOverride, str("2147483648"))), invalidConfig("2147483648")},
		{"value outside the allowed strings", callAlter(alter(group, "g", set, "share.isolation.level", str("serializable"))), invalidConfig("serializable")},
		{"huge value", callAlter(alter(group, "g", set, "share.auto.offset.reset", str(strings.Repeat("z", 32<<10)))), invalidConfig("share.auto.offset.reset")},
		{"set without a value", callAlter(alter(group, "g", set, "share.delivery.count.limit", nil)), invalidRequest("needs a value")},
		{"unspecified operation", callAlter(alter(group, "g", pb.ConfigOperation_CONFIG_OPERATION_UNSPECIFIED, "share.delivery.count.limit", str("3"))), invalidConfig("")},
		{"append to a non-list config", callAlter(alter(group, "g", pb.ConfigOperation_CONFIG_OPERATION_APPEND, "share.delivery.count.limit", str("3"))), invalidConfig("APPEND")},
		{"unknown operation number", callAlter(alter(group, "g", pb.ConfigOperation(9), "share.delivery.count.limit", str("3"))), invalidConfig("")},
		{"static broker config altered", callAlter(alter(broker, "1", set, "share.coordinator.state.topic.num.partitions", str("3"))), invalidConfig("share.coordinator.state.topic.num.partitions")},
		{"broker ceiling out of range", callAlter(alter(broker, "", set, snapshotCeiling, str("1001"))), invalidConfig("1001")},
		{"topic resource", callAlter(alter(pb.ResourceType_RESOURCE_TYPE_TOPIC, "t", set, "retention.ms", str("1"))), invalidRequest("TOPIC")},
		{"unspecified resource type", callAlter(alter(pb.ResourceType_RESOURCE_TYPE_UNSPECIFIED, "g", set, snapshotOverride, str("300"))), invalidRequest("")},
		{"unknown resource type number", callDescribe(&pb.DescribeConfigsResource{ResourceType: pb.ResourceType(77), ResourceName: "g"}), invalidRequest("")},
		{"group resource without a name", callAlter(alter(group, "", set, snapshotOverride, str("300"))), invalidRequest("group id")},
		{"group resource name longer than a group id", callAlter(alter(group, strings.Repeat("g", 32768), set, snapshotOverride, str("300"))),
			invalidRequest("the GROUP resource name is 32768 bytes long; a group id has at most 32767 bytes")},
		{"describe: group resource name longer than a group id", callDescribe(&pb.DescribeConfigsResource{ResourceType: group, ResourceName: strings.Repeat("g", 32768)}),
			invalidRequest("at most 32767 bytes")},
		{"describe: group resource without a name", callDescribe(&pb.DescribeConfigsResource{ResourceType: group}), invalidRequest("group id")},
	}
}

// TestBadInput sends every malformed request of badInputs and checks the documented answer; the
// server keeps serving throughout.
func TestBadInput(t *testing.T) {
	ts := startBadInputServer(t)
	ctx := ctxT(t)
	cases := badInputs(t)
	if len(cases) < 50 {
		t.Fatalf("only %d malformed requests", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.call(ctx, ts)
			if got.grpc != tc.want.grpc || got.item != tc.want.item || !strings.Contains(got.msg, tc.want.msg) {
				t.Fatalf("answer %+v, want %+v", got, tc.want)
			}
			if (got.grpc != codes.OK || got.item != pb.ErrorCode_ERROR_CODE_NONE) && got.msg == "" {
				t.Fatalf("refusal %v/%v without a message", got.grpc, got.item)
			}
		})
	}
	t.Logf("bad input: %d distinct malformed requests, each answered as documented", len(cases))
	checkServing(t, ts)
}

// startBadInputServer starts a server with small limits and the key (g, topicA, 0) at state epoch
// 5 and leader epoch 7.
func startBadInputServer(t *testing.T) *testServer {
	t.Helper()
	ts := startServer(t, testOptions{overrides: []string{
		"max.partitions.per.request=16", "grpc.max.recv.message.bytes=65536",
	}})
	ctx := ctxT(t)
	if r, err := ts.state.InitializeShareGroupState(ctx, initReq("g", topicA, 0, 5, 0)); err != nil ||
		r.GetResults()[0].GetPartitions()[0].GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("initialize: %v %v", r, err)
	}
	if r, err := ts.state.ReadShareGroupState(ctx, readReq("g", topicA, 0, 7)); err != nil ||
		r.GetResults()[0].GetPartitions()[0].GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("claim leader epoch 7: %v %v", r, err)
	}
	return ts
}

// checkServing fails unless the server answers health checks and valid calls.
func checkServing(t *testing.T, ts *testServer) {
	t.Helper()
	ctx := ctxT(t)
	ts.srv.SetServing(true)
	if h, err := healthpb.NewHealthClient(ts.conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health after bad input: %v %v", h, err)
	}
	r, err := ts.state.WriteShareGroupState(ctx, writeReq("g", topicA, 0, 5, 7, 0, batch(0, 3, 2, 1)))
	if err != nil || r.GetResults()[0].GetPartitions()[0].GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("valid write after bad input: %v %v", r, err)
	}
}

// TestBadInputFloodMemoryBounded sends the whole table many times from concurrent clients and
// checks that the server's heap and goroutines come back to where they were: refused requests
// leave nothing behind.
func TestBadInputFloodMemoryBounded(t *testing.T) {
	ts := startBadInputServer(t)
	ctx := ctxT(t)
	cases := badInputs(t)
	flood := func(rounds int) {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for r := range rounds {
					for i := range cases {
						cases[(i+w+r)%len(cases)].call(ctx, ts)
					}
				}
			})
		}
		wg.Wait()
	}
	flood(1) // warm up: connections, pools, lazily built tables
	before := heapInUse()
	goroutines := runtime.NumGoroutine()
	const rounds = 10
	flood(rounds)
	after := heapInUse()
	const bound = 16 << 20
	t.Logf("flood: %d malformed requests; heap %d KiB before, %d KiB after", 8*rounds*len(cases), before>>10, after>>10)
	if after > before+bound {
		t.Fatalf("heap grew from %d to %d bytes after %d malformed requests (bound %d)", before, after, 8*rounds*len(cases), bound)
	}
	if n := runtime.NumGoroutine(); n > goroutines+16 {
		t.Fatalf("goroutines grew from %d to %d", goroutines, n)
	}
	checkServing(t, ts)
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestOverlappingBatchesMerged checks that overlapping, duplicated and unsorted state batches in
// one write are accepted and merged as Kafka's PersisterStateBatchCombiner merges them: per offset
// the highest delivery count wins, then the highest state; gaps are kept, equal neighbours
// coalesced, and the result is pruned at the start offset.
func TestOverlappingBatchesMerged(t *testing.T) {
	ts := startServer(t, testOptions{})
	ctx := ctxT(t)
	const maxOff = math.MaxInt64
	type write struct {
		start   int64
		batches []*pb.StateBatch
	}
	cases := []struct {
		name   string
		writes []write
		want   []*pb.StateBatch
		start  int64
	}{
		{"duplicates", []write{{0, []*pb.StateBatch{batch(0, 9, 2, 1), batch(0, 9, 2, 1), batch(0, 9, 2, 1)}}},
			[]*pb.StateBatch{batch(0, 9, 2, 1)}, 0},
		{"unsorted and disjoint", []write{{0, []*pb.StateBatch{batch(20, 29, 4, 2), batch(10, 19, 0, 1), batch(0, 9, 2, 1)}}},
			[]*pb.StateBatch{batch(0, 9, 2, 1), batch(10, 19, 0, 1), batch(20, 29, 4, 2)}, 0},
		{"higher count wins an overlap", []write{{0, []*pb.StateBatch{batch(0, 9, 2, 1), batch(5, 14, 0, 2)}}},
			[]*pb.StateBatch{batch(0, 4, 2, 1), batch(5, 14, 0, 2)}, 0},
		{"same count: higher state wins", []write{{0, []*pb.StateBatch{batch(0, 9, 0, 1), batch(3, 5, 4, 1)}}},
			[]*pb.StateBatch{batch(0, 2, 0, 1), batch(3, 5, 4, 1), batch(6, 9, 0, 1)}, 0},
		{"contained batch with lower priority vanishes", []write{{0, []*pb.StateBatch{batch(3, 5, 1, 1), batch(0, 9, 2, 1)}}},
			[]*pb.StateBatch{batch(0, 9, 2, 1)}, 0},
		{"adjacent equal batches coalesce", []write{{0, []*pb.StateBatch{batch(5, 9, 1, 1), batch(0, 4, 1, 1)}}},
			[]*pb.StateBatch{batch(0, 9, 1, 1)}, 0},
		{"gaps are kept", []write{{0, []*pb.StateBatch{batch(5, 6, 2, 1), batch(0, 2, 2, 1)}}},
			[]*pb.StateBatch{batch(0, 2, 2, 1), batch(5, 6, 2, 1)}, 0},
		{"pruned at the start offset", []write{{5, []*pb.StateBatch{batch(7, 12, 0, 1), batch(0, 9, 2, 1), batch(1, 3, 4, 3)}}},
			[]*pb.StateBatch{batch(5, 9, 2, 1), batch(10, 12, 0, 1)}, 5},
		{"a later write cannot downgrade", []write{{0, []*pb.StateBatch{batch(0, 9, 2, 3)}}, {-1, []*pb.StateBatch{batch(0, 9, 0, 1), batch(4, 4, 4, 2)}}},
			[]*pb.StateBatch{batch(0, 9, 2, 3)}, 0},
		{"combiner worked example", []write{
			{100, []*pb.StateBatch{batch(100, 109, 1, 1), batch(110, 119, 1, 2), batch(120, 129, 1, 0)}},
			{-1, []*pb.StateBatch{batch(100, 109, 2, 1)}},
			{110, []*pb.StateBatch{batch(120, 129, 2, 1)}},
		}, []*pb.StateBatch{batch(110, 119, 1, 2), batch(120, 129, 2, 1)}, 110},
		{"offsets up to the largest int64", []write{{0, []*pb.StateBatch{batch(maxOff, maxOff, 4, 1), batch(maxOff-5, maxOff, 2, 1), batch(maxOff-9, maxOff-3, 2, 1)}}},
			[]*pb.StateBatch{batch(maxOff-9, maxOff-1, 2, 1), batch(maxOff, maxOff, 4, 1)}, 0},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			part := int32(i)
			if r, err := ts.state.InitializeShareGroupState(ctx, initReq("merge", topicA, part, 1, 0)); err != nil ||
				r.GetResults()[0].GetPartitions()[0].GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
				t.Fatalf("initialize: %v %v", r, err)
			}
			for _, w := range tc.writes {
				r, err := ts.state.WriteShareGroupState(ctx, writeReq("merge", topicA, part, 1, 1, w.start, w.batches...))
				if err != nil || r.GetResults()[0].GetPartitions()[0].GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
					t.Fatalf("write %v: %v %v", w.batches, r, err)
				}
			}
			rr, err := ts.state.ReadShareGroupState(ctx, readReq("merge", topicA, part, 1))
			if err != nil {
				t.Fatal(err)
			}
			got := rr.GetResults()[0].GetPartitions()[0]
			if got.GetStartOffset() != tc.start || !batchesEqual(got.GetStateBatches(), tc.want) {
				t.Fatalf("state = start %d %v, want start %d %v", got.GetStartOffset(), got.GetStateBatches(), tc.start, tc.want)
			}
		})
	}
}

// TestRandomOverlapsMatchReference writes random overlapping, unsorted batches and compares the
// stored result with a per-offset reference of Kafka's PersisterStateBatchCombiner.
func TestRandomOverlapsMatchReference(t *testing.T) {
	ts := startServer(t, testOptions{})
	ctx := ctxT(t)
	rng := rand.New(rand.NewPCG(8, 11))
	states := []int32{0, 1, 2, 4}
	for part := range int32(20) {
		if _, err := ts.state.InitializeShareGroupState(ctx, initReq("ref", topicA, part, 1, 0)); err != nil {
			t.Fatal(err)
		}
		ref := newOffsetModel()
		start := int64(0)
		for range 5 {
			var bs []*pb.StateBatch
			for range 1 + rng.IntN(12) {
				first := start + rng.Int64N(200)
				bs = append(bs, batch(first, first+rng.Int64N(30), states[rng.IntN(4)], int32(rng.IntN(4))))
			}
			newStart := int64(-1)
			if rng.IntN(3) == 0 {
				newStart = start + rng.Int64N(20)
			}
			r, err := ts.state.WriteShareGroupState(ctx, writeReq("ref", topicA, part, 1, 1, newStart, bs...))
			if err != nil || r.GetResults()[0].GetPartitions()[0].GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
				t.Fatalf("write: %v %v", r, err)
			}
			start = max(start, newStart)
			ref.merge(bs, start)
		}
		rr, err := ts.state.ReadShareGroupState(ctx, readReq("ref", topicA, part, 1))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := rr.GetResults()[0].GetPartitions()[0].GetStateBatches(), ref.batches(); !batchesEqual(got, want) {
			t.Fatalf("partition %d: stored %v\nreference %v", part, got, want)
		}
	}
}

func batchesEqual(a, b []*pb.StateBatch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestErrorResultsCarryNoState: a Read or summary result with an error carries nothing but the
// error (state epoch 0, start offset -1, no batches; for a summary also leader epoch 0 and
// delivery complete count -1), whichever check refused it, even when the key has state.
func TestErrorResultsCarryNoState(t *testing.T) {
	ts := startBadInputServer(t)
	ctx := ctxT(t)
	w, err := ts.state.WriteShareGroupState(ctx, writeReq("g", topicA, 0, 5, 7, 3, batch(3, 9, 1, 1)))
	if err != nil || w.GetResults()[0].GetPartitions()[0].GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("write: %v %v", w, err)
	}
	topics := []struct {
		id    string
		parts []int32
	}{{topicA, []int32{0, -2, 1}}, {"not-a-topic-id", []int32{0}}}

	readReq := &pb.ReadShareGroupStateRequest{GroupId: "g"}
	sumReq := &pb.ReadShareGroupStateSummaryRequest{GroupId: "g"}
	for _, tp := range topics {
		rt, st := &pb.ReadStateTopic{TopicId: tp.id}, &pb.ReadStateSummaryTopic{TopicId: tp.id}
		for _, p := range tp.parts {
			// Leader epoch 6 is below the 7 claimed: the key with state is fenced.
			rt.Partitions = append(rt.Partitions, &pb.ReadStatePartition{Partition: p, LeaderEpoch: 6})
			st.Partitions = append(st.Partitions, &pb.ReadStateSummaryPartition{Partition: p})
		}
		readReq.Topics, sumReq.Topics = append(readReq.Topics, rt), append(sumReq.Topics, st)
	}

	rr, err := ts.state.ReadShareGroupState(ctx, readReq)
	if err != nil {
		t.Fatal(err)
	}
	var readCodes []pb.ErrorCode
	for _, tr := range rr.GetResults() {
		for _, p := range tr.GetPartitions() {
			readCodes = append(readCodes, p.GetErrorCode())
			if p.GetStateEpoch() != 0 || p.GetStartOffset() != -1 || len(p.GetStateBatches()) != 0 {
				t.Errorf("read %s/%d answered %v with state: %v", tr.GetTopicId(), p.GetPartition(), p.GetErrorCode(), p)
			}
		}
	}
	wantRead := []pb.ErrorCode{pb.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH, pb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
		pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, pb.ErrorCode_ERROR_CODE_INVALID_REQUEST}
	if !slices.Equal(readCodes, wantRead) {
		t.Fatalf("read codes %v, want %v", readCodes, wantRead)
	}

	sr, err := ts.state.ReadShareGroupStateSummary(ctx, sumReq)
	if err != nil {
		t.Fatal(err)
	}
	errors := 0
	for _, tr := range sr.GetResults() {
		for _, p := range tr.GetPartitions() {
			if p.GetErrorCode() == pb.ErrorCode_ERROR_CODE_NONE {
				continue
			}
			errors++
			if p.GetStateEpoch() != 0 || p.GetLeaderEpoch() != 0 || p.GetStartOffset() != -1 || p.GetDeliveryCompleteCount() != -1 {
				t.Errorf("summary %s/%d answered %v with state: %v", tr.GetTopicId(), p.GetPartition(), p.GetErrorCode(), p)
			}
		}
	}
	if errors != 2 { // the negative partition and the bad topic id
		t.Fatalf("summary errors %d, want 2: %v", errors, sr)
	}
}
