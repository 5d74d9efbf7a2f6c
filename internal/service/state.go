package service

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordinatord/coordinatord/internal/shard"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// Partition is one state partition as the service uses it. *shard.Shard implements it.
type Partition interface {
	Initialize(ctx context.Context, r shard.InitializeRequest) shard.Result
	Read(ctx context.Context, r shard.ReadRequest) shard.ReadResult
	Write(ctx context.Context, r shard.WriteRequest) shard.Result
	Delete(ctx context.Context, r shard.DeleteRequest) shard.Result
	ReadSummary(ctx context.Context, r shard.SummaryRequest) shard.SummaryResult
}

// StateOptions configures a StateServer.
type StateOptions struct {
	// NodeID, Host and Port are what FindCoordinator answers for every valid key.
	NodeID int32
	Host   string
	Port   int32
	// MaxPartitionsPerRequest bounds the partitions one state request may name (0 = no bound).
	MaxPartitionsPerRequest int
	// Metrics records the service metrics; nil records nothing.
	Metrics *Metrics
}

// StateServer implements sharecoord.v1.ShareCoordinatorService over a fixed set of state
// partitions: key k belongs to partitions[shard.PartitionFor(k.CoordinatorKey(), len(partitions))].
type StateServer struct {
	pb.UnimplementedShareCoordinatorServiceServer

	logger     *zap.Logger
	partitions []Partition
	opts       StateOptions
}

// NewStateServer returns a StateServer routing keys over partitions, which must not be empty.
func NewStateServer(logger *zap.Logger, partitions []Partition, opts StateOptions) *StateServer {
	if logger == nil {
		logger = zap.NewNop()
	}
	if len(partitions) == 0 {
		panic("service: NewStateServer needs at least one partition")
	}
	return &StateServer{logger: logger, partitions: partitions, opts: opts}
}

// route returns the partition that owns key.
func (s *StateServer) route(key shard.Key) Partition {
	return s.partitions[shard.PartitionFor(key.CoordinatorKey(), len(s.partitions))]
}

// checkLimit rejects requests naming more partitions than allowed.
func (s *StateServer) checkLimit(n int) error {
	if limit := s.opts.MaxPartitionsPerRequest; limit > 0 && n > limit {
		return status.Errorf(codes.InvalidArgument,
			"the request names %d partitions; at most %d are allowed per request (max.partitions.per.request): split it", n, limit)
	}
	return nil
}

// invalidTopicID is the per-partition answer for a topic id that does not parse.
func invalidTopicID(raw string, err error) shard.Result {
	return shard.Result{
		Code:    shard.ErrInvalidRequest,
		Message: fmt.Sprintf("topic_id %q is not a valid topic id: %v", raw, err),
	}
}

// item is one (topic, partition) of a request, flattened in request order.
type item struct {
	topic int          // index of the topic in the request
	key   shard.Key    // the routed key, valid when bad.Code == ErrNone
	bad   shard.Result // a per-partition error found before routing (an unparsable topic id)
}

// flatten parses each topic id once and lists every partition of the request in order.
func flatten[T interface {
	GetTopicId() string
	GetPartitions() []P
}, P interface{ GetPartition() int32 }](groupID string, topics []T) []item {
	n := 0
	for _, t := range topics {
		n += len(t.GetPartitions())
	}
	items := make([]item, 0, n)
	for ti, t := range topics {
		id, err := shard.ParseTopicID(t.GetTopicId())
		for _, p := range t.GetPartitions() {
			it := item{topic: ti, key: shard.Key{GroupID: groupID, TopicID: id, Partition: p.GetPartition()}}
			if err != nil {
				it.bad = invalidTopicID(t.GetTopicId(), err)
			}
			items = append(items, it)
		}
	}
	return items
}

// fanOut runs do(i) for every i in [0, n) concurrently and waits for all of them. Keys of one
// request therefore queue on their partitions together and share group commits.
func fanOut(n int, do func(i int)) {
	if n == 1 {
		do(0)
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { do(i) })
	}
	wg.Wait()
}

func code(c shard.ErrorCode) pb.ErrorCode { return pb.ErrorCode(c) }

func partitionResult(partition int32, r shard.Result) *pb.PartitionResult {
	return &pb.PartitionResult{Partition: partition, ErrorCode: code(r.Code), ErrorMessage: r.Message}
}

// byTopic groups per-partition results by topic, keeping request order: parts[i] are the results
// of topics[i]'s partitions.
func byTopic[T any, R any](topics []T, items []item, results []R) [][]R {
	parts := make([][]R, len(topics))
	for i, it := range items {
		parts[it.topic] = append(parts[it.topic], results[i])
	}
	return parts
}

// topicResults builds the topic results of Initialize, Write and Delete.
func topicResults[T interface{ GetTopicId() string }](topics []T, items []item, results []*pb.PartitionResult) []*pb.TopicResult {
	out := make([]*pb.TopicResult, len(topics))
	for i, parts := range byTopic(topics, items, results) {
		out[i] = &pb.TopicResult{TopicId: topics[i].GetTopicId(), Partitions: parts}
	}
	return out
}

// InitializeShareGroupState implements the InitializeShareGroupState RPC.
func (s *StateServer) InitializeShareGroupState(ctx context.Context, req *pb.InitializeShareGroupStateRequest) (*pb.InitializeShareGroupStateResponse, error) {
	if err := s.checkLimit(req.PartitionCount()); err != nil {
		return nil, err
	}
	items := flatten(req.GetGroupId(), req.GetTopics())
	parts := partitionsOf(req.GetTopics())
	results := make([]*pb.PartitionResult, len(items))
	fanOut(len(items), func(i int) {
		it, p := items[i], parts[i]
		r := it.bad
		if r.Code == shard.ErrNone {
			r = s.route(it.key).Initialize(ctx, shard.InitializeRequest{
				Key: it.key, StateEpoch: p.GetStateEpoch(), StartOffset: p.GetStartOffset(),
			})
		}
		s.opts.Metrics.countOp(opInitialize, r.Code)
		results[i] = partitionResult(it.key.Partition, r)
	})
	return &pb.InitializeShareGroupStateResponse{Results: topicResults(req.GetTopics(), items, results)}, nil
}

// ReadShareGroupState implements the ReadShareGroupState RPC.
func (s *StateServer) ReadShareGroupState(ctx context.Context, req *pb.ReadShareGroupStateRequest) (*pb.ReadShareGroupStateResponse, error) {
	if err := s.checkLimit(req.PartitionCount()); err != nil {
		return nil, err
	}
	items := flatten(req.GetGroupId(), req.GetTopics())
	parts := partitionsOf(req.GetTopics())
	results := make([]*pb.ReadStatePartitionResult, len(items))
	fanOut(len(items), func(i int) {
		it, p := items[i], parts[i]
		r := shard.ReadResult{Result: it.bad, StartOffset: -1}
		if it.bad.Code == shard.ErrNone {
			r = s.route(it.key).Read(ctx, shard.ReadRequest{Key: it.key, LeaderEpoch: p.GetLeaderEpoch()})
		}
		s.opts.Metrics.countOp(opRead, r.Code)
		results[i] = &pb.ReadStatePartitionResult{
			Partition:    it.key.Partition,
			ErrorCode:    code(r.Code),
			ErrorMessage: r.Message,
			StateEpoch:   r.StateEpoch,
			StartOffset:  r.StartOffset,
			StateBatches: toProtoBatches(r.StateBatches),
		}
	})
	out := make([]*pb.ReadStateTopicResult, len(req.GetTopics()))
	for i, parts := range byTopic(req.GetTopics(), items, results) {
		out[i] = &pb.ReadStateTopicResult{TopicId: req.GetTopics()[i].GetTopicId(), Partitions: parts}
	}
	return &pb.ReadShareGroupStateResponse{Results: out}, nil
}

// WriteShareGroupState implements the WriteShareGroupState RPC.
func (s *StateServer) WriteShareGroupState(ctx context.Context, req *pb.WriteShareGroupStateRequest) (*pb.WriteShareGroupStateResponse, error) {
	start := time.Now()
	defer func() { s.opts.Metrics.observeWrite(time.Since(start)) }()
	if err := s.checkLimit(req.PartitionCount()); err != nil {
		return nil, err
	}
	items := flatten(req.GetGroupId(), req.GetTopics())
	parts := partitionsOf(req.GetTopics())
	results := make([]*pb.PartitionResult, len(items))
	fanOut(len(items), func(i int) {
		it, p := items[i], parts[i]
		r := it.bad
		if r.Code == shard.ErrNone {
			r = s.write(ctx, it.key, p)
		}
		s.opts.Metrics.countOp(opWrite, r.Code)
		results[i] = partitionResult(it.key.Partition, r)
	})
	return &pb.WriteShareGroupStateResponse{Results: topicResults(req.GetTopics(), items, results)}, nil
}

// write converts one partition of a write request and hands it to the key's partition. Values
// that do not fit Kafka's field widths are rejected here, since converting them would change them.
func (s *StateServer) write(ctx context.Context, key shard.Key, p *pb.WriteStatePartition) shard.Result {
	batches, err := fromProtoBatches(p.GetStateBatches())
	if err != nil {
		return shard.Result{Code: shard.ErrInvalidRequest, Message: err.Error()}
	}
	dcc := int32(-1)
	if p.DeliveryCompleteCount != nil {
		dcc = p.GetDeliveryCompleteCount()
	}
	return s.route(key).Write(ctx, shard.WriteRequest{
		Key:                   key,
		StateEpoch:            p.GetStateEpoch(),
		LeaderEpoch:           p.GetLeaderEpoch(),
		StartOffset:           p.GetStartOffset(),
		DeliveryCompleteCount: dcc,
		StateBatches:          batches,
	})
}

// DeleteShareGroupState implements the DeleteShareGroupState RPC.
func (s *StateServer) DeleteShareGroupState(ctx context.Context, req *pb.DeleteShareGroupStateRequest) (*pb.DeleteShareGroupStateResponse, error) {
	if err := s.checkLimit(req.PartitionCount()); err != nil {
		return nil, err
	}
	items := flatten(req.GetGroupId(), req.GetTopics())
	results := make([]*pb.PartitionResult, len(items))
	fanOut(len(items), func(i int) {
		it := items[i]
		r := it.bad
		if r.Code == shard.ErrNone {
			r = s.route(it.key).Delete(ctx, shard.DeleteRequest{Key: it.key})
		}
		s.opts.Metrics.countOp(opDelete, r.Code)
		results[i] = partitionResult(it.key.Partition, r)
	})
	return &pb.DeleteShareGroupStateResponse{Results: topicResults(req.GetTopics(), items, results)}, nil
}

// ReadShareGroupStateSummary implements the ReadShareGroupStateSummary RPC.
func (s *StateServer) ReadShareGroupStateSummary(ctx context.Context, req *pb.ReadShareGroupStateSummaryRequest) (*pb.ReadShareGroupStateSummaryResponse, error) {
	if err := s.checkLimit(req.PartitionCount()); err != nil {
		return nil, err
	}
	items := flatten(req.GetGroupId(), req.GetTopics())
	parts := partitionsOf(req.GetTopics())
	results := make([]*pb.ReadStateSummaryPartitionResult, len(items))
	fanOut(len(items), func(i int) {
		it, p := items[i], parts[i]
		r := shard.SummaryResult{Result: it.bad, StartOffset: -1, DeliveryCompleteCount: -1}
		if it.bad.Code == shard.ErrNone {
			r = s.route(it.key).ReadSummary(ctx, shard.SummaryRequest{Key: it.key, LeaderEpoch: p.GetLeaderEpoch()})
		}
		s.opts.Metrics.countOp(opReadSummary, r.Code)
		results[i] = &pb.ReadStateSummaryPartitionResult{
			Partition:             it.key.Partition,
			ErrorCode:             code(r.Code),
			ErrorMessage:          r.Message,
			StateEpoch:            r.StateEpoch,
			LeaderEpoch:           r.LeaderEpoch,
			StartOffset:           r.StartOffset,
			DeliveryCompleteCount: r.DeliveryCompleteCount,
		}
	})
	out := make([]*pb.ReadStateSummaryTopicResult, len(req.GetTopics()))
	for i, parts := range byTopic(req.GetTopics(), items, results) {
		out[i] = &pb.ReadStateSummaryTopicResult{TopicId: req.GetTopics()[i].GetTopicId(), Partitions: parts}
	}
	return &pb.ReadShareGroupStateSummaryResponse{Results: out}, nil
}

// FindCoordinator implements the FindCoordinator RPC: this node owns every state partition.
func (s *StateServer) FindCoordinator(_ context.Context, req *pb.FindCoordinatorRequest) (*pb.FindCoordinatorResponse, error) {
	out := make([]*pb.Coordinator, len(req.GetKeys()))
	for i, raw := range req.GetKeys() {
		c := &pb.Coordinator{Key: raw, NodeId: -1, StatePartition: -1, Port: -1}
		key, err := shard.ParseCoordinatorKey(raw)
		if err != nil {
			c.ErrorCode = pb.ErrorCode_ERROR_CODE_INVALID_REQUEST
			c.ErrorMessage = fmt.Sprintf("key %q is not a share coordinator key \"groupId:topicId:partition\": %v", raw, err)
		} else {
			c.StatePartition = int32(shard.PartitionFor(key.CoordinatorKey(), len(s.partitions)))
			c.NodeId, c.Host, c.Port = s.opts.NodeID, s.opts.Host, s.opts.Port
		}
		out[i] = c
	}
	return &pb.FindCoordinatorResponse{Coordinators: out}, nil
}

// partitionsOf lists every partition entry of a request in request order (parallel to flatten).
func partitionsOf[T interface{ GetPartitions() []P }, P any](topics []T) []P {
	var out []P
	for _, t := range topics {
		out = append(out, t.GetPartitions()...)
	}
	return out
}

func toProtoBatches(in []shard.StateBatch) []*pb.StateBatch {
	if len(in) == 0 {
		return nil
	}
	out := make([]*pb.StateBatch, len(in))
	for i, b := range in {
		out[i] = &pb.StateBatch{
			FirstOffset:   b.FirstOffset,
			LastOffset:    b.LastOffset,
			DeliveryState: int32(b.DeliveryState),
			DeliveryCount: int32(b.DeliveryCount),
		}
	}
	return out
}

// fromProtoBatches converts state batches, rejecting a delivery state or count that does not fit
// Kafka's int8 / int16 fields (the shard checks the values that do fit).
func fromProtoBatches(in []*pb.StateBatch) ([]shard.StateBatch, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]shard.StateBatch, len(in))
	for i, b := range in {
		if st := b.GetDeliveryState(); st < math.MinInt8 || st > math.MaxInt8 {
			return nil, fmt.Errorf("state_batches[%d].delivery_state %d is not a delivery state: allowed 0 (available), 1 (acquired), 2 (acknowledged), 4 (archived)", i, st)
		}
		if c := b.GetDeliveryCount(); c < math.MinInt16 || c > math.MaxInt16 {
			return nil, fmt.Errorf("state_batches[%d].delivery_count %d is out of range: allowed 0 to %d", i, c, math.MaxInt16)
		}
		out[i] = shard.StateBatch{
			FirstOffset:   b.GetFirstOffset(),
			LastOffset:    b.GetLastOffset(),
			DeliveryState: int8(b.GetDeliveryState()),
			DeliveryCount: int16(b.GetDeliveryCount()),
		}
	}
	return out, nil
}
