package client

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// InitializeShareGroupState initializes share partitions, each on the node leading its key's
// state partition, and answers as one node holding every partition would.
func (c *Client) InitializeShareGroupState(ctx context.Context, req *pb.InitializeShareGroupStateRequest) (*pb.InitializeShareGroupStateResponse, error) {
	return do(ctx, c, &initializeRPC, req)
}

// ReadShareGroupState reads share partitions, each from the node leading its key's state
// partition, and answers as one node holding every partition would.
func (c *Client) ReadShareGroupState(ctx context.Context, req *pb.ReadShareGroupStateRequest) (*pb.ReadShareGroupStateResponse, error) {
	return do(ctx, c, &readRPC, req)
}

// WriteShareGroupState writes share partitions, each to the node leading its key's state
// partition, and answers as one node holding every partition would. A write that failed
// retriably is sent again even when its message says it may still be applied: share-state
// writes are safe to repeat and to reorder.
func (c *Client) WriteShareGroupState(ctx context.Context, req *pb.WriteShareGroupStateRequest) (*pb.WriteShareGroupStateResponse, error) {
	return do(ctx, c, &writeRPC, req)
}

// DeleteShareGroupState deletes share partitions' state, each on the node leading its key's
// state partition, and answers as one node holding every partition would.
func (c *Client) DeleteShareGroupState(ctx context.Context, req *pb.DeleteShareGroupStateRequest) (*pb.DeleteShareGroupStateResponse, error) {
	return do(ctx, c, &deleteRPC, req)
}

// ReadShareGroupStateSummary summarizes share partitions, each from the node leading its key's
// state partition, and answers as one node holding every partition would.
func (c *Client) ReadShareGroupStateSummary(ctx context.Context, req *pb.ReadShareGroupStateSummaryRequest) (*pb.ReadShareGroupStateSummaryResponse, error) {
	return do(ctx, c, &summaryRPC, req)
}

// The shapes every state RPC shares: a request is a group id and topics of partitions, a
// response topics of per-partition results.
type (
	request[T topic[P], P partition] interface {
		GetGroupId() string
		GetTopics() []T
		Validate() error
	}
	topic[P any] interface {
		GetTopicId() string
		GetPartitions() []P
	}
	partition       interface{ GetPartition() int32 }
	response[U any] interface{ GetResults() []U }
	result          interface {
		partition
		GetErrorCode() pb.ErrorCode
	}
)

// rpc describes one state RPC to do: how to call it and how to build its messages.
type rpc[Q request[T, P], T topic[P], P partition, S response[U], U topic[R], R result] struct {
	method      string
	call        func(pb.ShareCoordinatorServiceClient, context.Context, Q, ...grpc.CallOption) (S, error)
	request     func(groupID string, topics []T) Q
	topic       func(topicID string, parts []P) T
	response    func(topics []U) S
	topicResult func(topicID string, parts []R) U
	// failed is the result of a partition that carries only an error, as the server fills it.
	failed func(partition int32, code pb.ErrorCode, msg string) R
	// coalesce says whether concurrent calls' requests to one node go out together (see
	// Options.InFlightPerNode): reads and writes, the share-partition leader's steady traffic,
	// as Kafka's persister batches them.
	coalesce bool
}

var initializeRPC = rpc[*pb.InitializeShareGroupStateRequest, *pb.InitializeStateTopic, *pb.InitializeStatePartition,
	*pb.InitializeShareGroupStateResponse, *pb.TopicResult, *pb.PartitionResult]{
	method: "InitializeShareGroupState",
	call:   pb.ShareCoordinatorServiceClient.InitializeShareGroupState,
	request: func(g string, ts []*pb.InitializeStateTopic) *pb.InitializeShareGroupStateRequest {
		return &pb.InitializeShareGroupStateRequest{GroupId: g, Topics: ts}
	},
	topic: func(id string, ps []*pb.InitializeStatePartition) *pb.InitializeStateTopic {
		return &pb.InitializeStateTopic{TopicId: id, Partitions: ps}
	},
	response: func(ts []*pb.TopicResult) *pb.InitializeShareGroupStateResponse {
		return &pb.InitializeShareGroupStateResponse{Results: ts}
	},
	topicResult: topicResult,
	failed:      partitionResult,
}

var readRPC = rpc[*pb.ReadShareGroupStateRequest, *pb.ReadStateTopic, *pb.ReadStatePartition,
	*pb.ReadShareGroupStateResponse, *pb.ReadStateTopicResult, *pb.ReadStatePartitionResult]{
	method:   "ReadShareGroupState",
	call:     pb.ShareCoordinatorServiceClient.ReadShareGroupState,
	coalesce: true,
	request: func(g string, ts []*pb.ReadStateTopic) *pb.ReadShareGroupStateRequest {
		return &pb.ReadShareGroupStateRequest{GroupId: g, Topics: ts}
	},
	topic: func(id string, ps []*pb.ReadStatePartition) *pb.ReadStateTopic {
		return &pb.ReadStateTopic{TopicId: id, Partitions: ps}
	},
	response: func(ts []*pb.ReadStateTopicResult) *pb.ReadShareGroupStateResponse {
		return &pb.ReadShareGroupStateResponse{Results: ts}
	},
	topicResult: func(id string, ps []*pb.ReadStatePartitionResult) *pb.ReadStateTopicResult {
		return &pb.ReadStateTopicResult{TopicId: id, Partitions: ps}
	},
	failed: func(p int32, code pb.ErrorCode, msg string) *pb.ReadStatePartitionResult {
		return &pb.ReadStatePartitionResult{Partition: p, ErrorCode: code, ErrorMessage: msg, StartOffset: -1}
	},
}

var writeRPC = rpc[*pb.WriteShareGroupStateRequest, *pb.WriteStateTopic, *pb.WriteStatePartition,
	*pb.WriteShareGroupStateResponse, *pb.TopicResult, *pb.PartitionResult]{
	method:   "WriteShareGroupState",
	call:     pb.ShareCoordinatorServiceClient.WriteShareGroupState,
	coalesce: true,
	request: func(g string, ts []*pb.WriteStateTopic) *pb.WriteShareGroupStateRequest {
		return &pb.WriteShareGroupStateRequest{GroupId: g, Topics: ts}
	},
	topic: func(id string, ps []*pb.WriteStatePartition) *pb.WriteStateTopic {
		return &pb.WriteStateTopic{TopicId: id, Partitions: ps}
	},
	response: func(ts []*pb.TopicResult) *pb.WriteShareGroupStateResponse {
		return &pb.WriteShareGroupStateResponse{Results: ts}
	},
	topicResult: topicResult,
	failed:      partitionResult,
}

var deleteRPC = rpc[*pb.DeleteShareGroupStateRequest, *pb.DeleteStateTopic, *pb.DeleteStatePartition,
	*pb.DeleteShareGroupStateResponse, *pb.TopicResult, *pb.PartitionResult]{
	method: "DeleteShareGroupState",
	call:   pb.ShareCoordinatorServiceClient.DeleteShareGroupState,
	request: func(g string, ts []*pb.DeleteStateTopic) *pb.DeleteShareGroupStateRequest {
		return &pb.DeleteShareGroupStateRequest{GroupId: g, Topics: ts}
	},
	topic: func(id string, ps []*pb.DeleteStatePartition) *pb.DeleteStateTopic {
		return &pb.DeleteStateTopic{TopicId: id, Partitions: ps}
	},
	response: func(ts []*pb.TopicResult) *pb.DeleteShareGroupStateResponse {
		return &pb.DeleteShareGroupStateResponse{Results: ts}
	},
	topicResult: topicResult,
	failed:      partitionResult,
}

var summaryRPC = rpc[*pb.ReadShareGroupStateSummaryRequest, *pb.ReadStateSummaryTopic, *pb.ReadStateSummaryPartition,
	*pb.ReadShareGroupStateSummaryResponse, *pb.ReadStateSummaryTopicResult, *pb.ReadStateSummaryPartitionResult]{
	method: "ReadShareGroupStateSummary",
	call:   pb.ShareCoordinatorServiceClient.ReadShareGroupStateSummary,
	request: func(g string, ts []*pb.ReadStateSummaryTopic) *pb.ReadShareGroupStateSummaryRequest {
		return &pb.ReadShareGroupStateSummaryRequest{GroupId: g, Topics: ts}
	},
	topic: func(id string, ps []*pb.ReadStateSummaryPartition) *pb.ReadStateSummaryTopic {
		return &pb.ReadStateSummaryTopic{TopicId: id, Partitions: ps}
	},
	response: func(ts []*pb.ReadStateSummaryTopicResult) *pb.ReadShareGroupStateSummaryResponse {
		return &pb.ReadShareGroupStateSummaryResponse{Results: ts}
	},
	topicResult: func(id string, ps []*pb.ReadStateSummaryPartitionResult) *pb.ReadStateSummaryTopicResult {
		return &pb.ReadStateSummaryTopicResult{TopicId: id, Partitions: ps}
	},
	failed: func(p int32, code pb.ErrorCode, msg string) *pb.ReadStateSummaryPartitionResult {
		return &pb.ReadStateSummaryPartitionResult{Partition: p, ErrorCode: code, ErrorMessage: msg, StartOffset: -1, DeliveryCompleteCount: -1}
	},
}

func topicResult(id string, ps []*pb.PartitionResult) *pb.TopicResult {
	return &pb.TopicResult{TopicId: id, Partitions: ps}
}

func partitionResult(p int32, code pb.ErrorCode, msg string) *pb.PartitionResult {
	return &pb.PartitionResult{Partition: p, ErrorCode: code, ErrorMessage: msg}
}

// do runs one state RPC through the client: it checks the request's shape as the server does
// (a malformed request is INVALID_ARGUMENT, sent nowhere), splits it by leader, and merges the
// per-partition answers into the response one node would give for the whole request.
func do[Q request[T, P], T topic[P], P partition, S response[U], U topic[R], R result](ctx context.Context, c *Client, r *rpc[Q, T, P, S, U, R], req Q) (S, error) {
	var zero S
	if err := req.Validate(); err != nil {
		return zero, status.Error(codes.InvalidArgument, err.Error())
	}
	b := &rpcBatch[Q, T, P, S, U, R]{c: c, rpc: r, groupID: req.GetGroupId()}
	var keys []string
	for _, t := range req.GetTopics() {
		for _, p := range t.GetPartitions() {
			b.topics = append(b.topics, t.GetTopicId())
			b.parts = append(b.parts, p)
			keys = append(keys, Key(b.groupID, t.GetTopicId(), p.GetPartition()))
		}
	}
	b.out = make([]R, len(keys))
	if err := c.run(ctx, r.method, keys, b); err != nil {
		return zero, err
	}
	ids, groups := byTopic(b.topics, allItems(len(keys)), func(i int) R { return b.out[i] })
	results := make([]U, len(ids))
	for j, id := range ids {
		results[j] = r.topicResult(id, groups[j])
	}
	return r.response(results), nil
}

// rpcBatch is one call of an rpc as a batch: item i is partition parts[i] of topic topics[i].
type rpcBatch[Q request[T, P], T topic[P], P partition, S response[U], U topic[R], R result] struct {
	c       *Client
	rpc     *rpc[Q, T, P, S, U, R]
	groupID string
	topics  []string
	parts   []P
	out     []R // each item's latest answer
}

func (b *rpcBatch[Q, T, P, S, U, R]) send(ctx context.Context, addr string, stub pb.ShareCoordinatorServiceClient, idx []int) ([]pb.ErrorCode, error) {
	topics := make([]string, len(idx))
	parts := make([]P, len(idx))
	for j, i := range idx {
		topics[j], parts[j] = b.topics[i], b.parts[i]
	}
	var got []R
	var err error
	if b.rpc.coalesce && b.c.opts.InFlightPerNode > 0 && len(idx) <= maxCoalescedPartitions && coalescible(ctx) {
		got, err = coalesce(ctx, b.c, b.rpc, laneKey{addr: addr, method: b.rpc.method, group: b.groupID}, stub, topics, parts)
	} else {
		b.c.stats.requests.Add(1)
		got, err = b.rpc.exchange(ctx, stub, b.groupID, topics, parts)
	}
	if err != nil {
		return nil, err
	}
	codes := make([]pb.ErrorCode, len(idx))
	for j, i := range idx {
		b.out[i], codes[j] = got[j], got[j].GetErrorCode()
	}
	return codes, nil
}

func (b *rpcBatch[Q, T, P, S, U, R]) fail(i int, code pb.ErrorCode, msg string) {
	b.out[i] = b.rpc.failed(b.parts[i].GetPartition(), code, msg)
}

// byTopic groups the items idx by their topic id (topics[i] for item i), the ids in order of
// first appearance and each group in the order of idx, as the server answers a request that
// names a topic in several entries: one result per topic id.
func byTopic[X any](topics []string, idx []int, value func(int) X) ([]string, [][]X) {
	var ids []string
	var groups [][]X
	at := make(map[string]int)
	for _, i := range idx {
		j, ok := at[topics[i]]
		if !ok {
			j = len(ids)
			at[topics[i]] = j
			ids = append(ids, topics[i])
			groups = append(groups, nil)
		}
		groups[j] = append(groups[j], value(i))
	}
	return ids, groups
}

// allItems returns 0..n-1.
func allItems(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}
