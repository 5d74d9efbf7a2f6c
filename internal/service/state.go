package service

import (
	"context"
	"fmt"
	"math"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/record"
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

// WriteStarter is implemented by a Partition that queues a write without waiting for its
// answer (*shard.Shard does): the service then queues every key of a write request from the
// handler's goroutine, and waits for their answers after, instead of running a goroutine per
// key. StartWrite must not wait for the commit; it may return an answer it has at once
// (shard.Answered).
type WriteStarter interface {
	StartWrite(ctx context.Context, r shard.WriteRequest) *shard.Pending
}

// Coordinator is who serves a state partition, as FindCoordinator answers it: a node, or an
// error code (NodeID -1) with a message.
type Coordinator struct {
	NodeID  int32
	Host    string
	Port    int32
	Code    kafkaerr.Code
	Message string
}

// StateOptions configures a StateServer.
type StateOptions struct {
	// NodeID, Host and Port are what FindCoordinator answers for every valid key of a single
	// node.
	NodeID int32
	Host   string
	Port   int32
	// Coordinators, when set, says who serves each state partition (a cluster); FindCoordinator
	// answers it instead of NodeID, Host and Port.
	Coordinators func(partition int) Coordinator
	// MaxPartitionsPerRequest bounds the partitions one state request may name (0 = no bound).
	MaxPartitionsPerRequest int
	// Metrics records the service metrics; nil records nothing.
	Metrics *Metrics
	// Logger receives the warnings of refused and stalled reads (nil: none), at most one of each
	// kind every 10 s.
	Logger *zap.Logger
	// ResponseBytes bounds the bytes of state batches that read responses hold, being built or
	// waiting to be sent (0: no bound). A read that finds no room waits briefly, then its
	// partition is answered COORDINATOR_NOT_AVAILABLE.
	ResponseBytes int64
	// SendTimeout is how long a read response may wait to be sent once it is ready (0: no limit);
	// then the connection it came on is closed through Conns (nil: it is not) and its bytes stop
	// counting.
	SendTimeout time.Duration
	// Conns closes client connections by their remote address (connlimit.Listener does).
	Conns ConnCloser
}

// ConnCloser closes the client connection whose remote address is remote, and reports whether one
// was open.
type ConnCloser interface {
	CloseConn(remote net.Addr) bool
}

// StateServer implements sharecoord.v1.ShareCoordinatorService over a fixed set of state
// partitions: key k belongs to partitions[k.PartitionOf(len(partitions))].
type StateServer struct {
	pb.UnimplementedShareCoordinatorServiceServer

	partitions []Partition
	opts       StateOptions
	budget     *responseBudget
	warn       *zap.Logger // rate-limited warnings
}

// NewStateServer returns a StateServer routing keys over partitions, which must not be empty.
func NewStateServer(partitions []Partition, opts StateOptions) *StateServer {
	if len(partitions) == 0 {
		panic("service: NewStateServer needs at least one partition")
	}
	return &StateServer{partitions: partitions, opts: opts,
		budget: newResponseBudget(opts.ResponseBytes, opts.Metrics.pendingGauge()),
		warn:   oncePer(opts.Logger, 10*time.Second)}
}

// route returns the partition that owns key.
func (s *StateServer) route(key shard.Key) Partition {
	return s.partitions[key.PartitionOf(len(s.partitions))]
}

// checkLimit rejects requests naming more partitions than allowed.
func (s *StateServer) checkLimit(n int) error {
	if limit := s.opts.MaxPartitionsPerRequest; limit > 0 && n > limit {
		return status.Errorf(codes.InvalidArgument,
			"the request names %d partitions; at most %d are allowed per request (max.partitions.per.request): split it", n, limit)
	}
	return nil
}

// invalidTopicID is the per-partition answer for a topic id that does not parse; err (from
// record.ParseTopicID) names the id and says why.
func invalidTopicID(err error) shard.Result {
	return shard.Result{Code: kafkaerr.InvalidRequest, Message: "topic_id " + err.Error()}
}

// stateTopic and statePartition are what the topic and partition entries of every state request
// have in common.
type stateTopic[P statePartition] interface {
	GetTopicId() string
	GetPartitions() []P
}

type statePartition interface{ GetPartition() int32 }

// item is one partition of a state request as a handler sees it.
type item struct {
	key shard.Key    // the routed key, valid when bad.Code == kafkaerr.None
	bad shard.Result // a per-partition error found before routing (an unparsable topic id)
}

// eachPartition runs one state request over its partitions. It rejects a request naming more
// partitions than allowed, parses each topic id once, then runs do for every partition
// concurrently and waits for all of them: keys of one request therefore queue on their partitions
// together and share group commits. out[i][j] is do's answer for topics[i].partitions[j].
func eachPartition[T stateTopic[P], P statePartition, R any](s *StateServer, groupID string, topics []T, do func(it item, p P) R) ([][]R, error) {
	n, err := countPartitions(s, topics)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	var panicked panicOnce
	out := eachItem(groupID, topics, func(it item, p P, dst *R) {
		if n == 1 { // nothing to overlap with: run on the caller's goroutine
			*dst = do(it, p)
			return
		}
		wg.Go(func() {
			defer panicked.recover()
			*dst = do(it, p)
		})
	})
	wg.Wait()
	panicked.repanic()
	return out, nil
}

// panicOnce carries the first panic of the goroutines a handler started to the handler's own
// goroutine, where the server's recovery turns it into an INTERNAL status instead of a crash.
type panicOnce struct {
	mu  sync.Mutex
	val *carriedPanic
}

// carriedPanic is a panic raised again on another goroutine, with the stack where it happened.
type carriedPanic struct {
	val   any
	stack []byte
}

func (c *carriedPanic) String() string {
	return fmt.Sprintf("%v (raised on a goroutine of one partition of the request, at:\n%s)", c.val, c.stack)
}

// recover, deferred on a started goroutine, keeps its panic.
func (p *panicOnce) recover() {
	if v := recover(); v != nil {
		p.mu.Lock()
		if p.val == nil {
			p.val = &carriedPanic{val: v, stack: debug.Stack()}
		}
		p.mu.Unlock()
	}
}

// repanic panics with the kept panic, if any, once the goroutines are done.
func (p *panicOnce) repanic() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.val != nil {
		panic(p.val)
	}
}

// startEachPartition is eachPartition for work that start queues without waiting for it: every
// partition is started from the caller's goroutine, in request order, then each answer is
// waited for and handed to finish, which makes the partition's result.
func startEachPartition[T stateTopic[P], P statePartition, R any](s *StateServer, groupID string, topics []T,
	start func(it item, p P) pendingResult, finish func(it item, r shard.Result) R) ([][]R, error) {
	n, err := countPartitions(s, topics)
	if err != nil {
		return nil, err
	}
	type started struct {
		it      item
		pending pendingResult
		dst     *R
	}
	all := make([]started, 0, n)
	out := eachItem(groupID, topics, func(it item, p P, dst *R) {
		all = append(all, started{it, start(it, p), dst})
	})
	for _, st := range all {
		*st.dst = finish(st.it, st.pending.Wait())
	}
	return out, nil
}

// countPartitions counts the partitions a request names and rejects more than allowed.
func countPartitions[T stateTopic[P], P statePartition](s *StateServer, topics []T) (int, error) {
	n := 0
	for _, t := range topics {
		n += len(t.GetPartitions())
	}
	return n, s.checkLimit(n)
}

// eachItem calls fn, in request order, with every partition of topics as an item (each topic id
// parsed once) and where its result goes, and returns the results.
func eachItem[T stateTopic[P], P statePartition, R any](groupID string, topics []T, fn func(it item, p P, dst *R)) [][]R {
	out := make([][]R, len(topics))
	for ti, t := range topics {
		id, err := record.ParseTopicID(t.GetTopicId())
		parts := t.GetPartitions()
		out[ti] = make([]R, len(parts))
		for pi, p := range parts {
			it := item{key: shard.Key{GroupID: groupID, TopicID: id, Partition: p.GetPartition()}}
			if err != nil {
				it.bad = invalidTopicID(err)
			}
			fn(it, p, &out[ti][pi])
		}
	}
	return out
}

// pendingResult is a partition's answer to come.
type pendingResult interface{ Wait() shard.Result }

// goResult is the answer of a Partition's blocking call, made on a goroutine of its own; Wait
// panics with the call's panic.
type goResult struct {
	done     chan struct{}
	res      shard.Result
	panicked panicOnce
}

func (g *goResult) Wait() shard.Result {
	<-g.done
	g.panicked.repanic()
	return g.res
}

// topicResults builds, with mk, one topic result per topic id of the request, in the order the ids
// first appear, holding the partition results of every entry naming that id in request order. A
// request may name a topic in several entries; Kafka answers each topic once.
func topicResults[T interface{ GetTopicId() string }, R, TR any](topics []T, parts [][]R, mk func(topicID string, parts []R) TR) []TR {
	out := make([]TR, 0, len(topics))
	if len(topics) == 1 {
		return append(out, mk(topics[0].GetTopicId(), parts[0]))
	}
	first := make(map[string]int, len(topics)) // topic id → index of its first entry
	merged := make([][]R, len(topics))
	for i, t := range topics {
		j, seen := first[t.GetTopicId()]
		if !seen {
			first[t.GetTopicId()], j = i, i
		}
		merged[j] = append(merged[j], parts[i]...)
	}
	for i, t := range topics {
		if first[t.GetTopicId()] == i {
			out = append(out, mk(t.GetTopicId(), merged[i]))
		}
	}
	return out
}

// errorCode is c as the API's ErrorCode enum: the same number, the enum's values being Kafka's
// (kafkaerr's tests hold the two lists together).
func errorCode(c kafkaerr.Code) pb.ErrorCode { return pb.ErrorCode(c) }

func partitionResult(partition int32, r shard.Result) *pb.PartitionResult {
	return &pb.PartitionResult{Partition: partition, ErrorCode: errorCode(r.Code), ErrorMessage: r.Message}
}

// topicResult is the topic result of Initialize, Write and Delete.
func topicResult(topicID string, parts []*pb.PartitionResult) *pb.TopicResult {
	return &pb.TopicResult{TopicId: topicID, Partitions: parts}
}

// InitializeShareGroupState implements the InitializeShareGroupState RPC.
func (s *StateServer) InitializeShareGroupState(ctx context.Context, req *pb.InitializeShareGroupStateRequest) (*pb.InitializeShareGroupStateResponse, error) {
	parts, err := eachPartition(s, req.GetGroupId(), req.GetTopics(), func(it item, p *pb.InitializeStatePartition) *pb.PartitionResult {
		r := it.bad
		if r.Code == kafkaerr.None {
			r = s.route(it.key).Initialize(ctx, shard.InitializeRequest{
				Key: it.key, StateEpoch: p.GetStateEpoch(), StartOffset: p.GetStartOffset(),
			})
		}
		s.opts.Metrics.countOp(opInitialize, r.Code)
		return partitionResult(it.key.Partition, r)
	})
	if err != nil {
		return nil, err
	}
	return &pb.InitializeShareGroupStateResponse{Results: topicResults(req.GetTopics(), parts, topicResult)}, nil
}

// ReadShareGroupState implements the ReadShareGroupState RPC for callers in the process. The gRPC
// server answers the RPC with readState's reply instead, whose batches it sends as they were
// encoded.
func (s *StateServer) ReadShareGroupState(ctx context.Context, req *pb.ReadShareGroupStateRequest) (*pb.ReadShareGroupStateResponse, error) {
	r, err := s.readState(ctx, req)
	if err != nil {
		return nil, err
	}
	return r.response()
}

// readState reads every partition of req into a reply whose partition results carry their
// batches encoded (readPartition).
func (s *StateServer) readState(ctx context.Context, req *pb.ReadShareGroupStateRequest) (reply *readReply, err error) {
	var held atomic.Int64
	defer func() {
		if reply == nil { // refused, or a panic on its way to the recovery interceptor
			s.budget.release(held.Load())
		}
	}()
	parts, err := eachPartition(s, req.GetGroupId(), req.GetTopics(), func(it item, p *pb.ReadStatePartition) *pb.ReadStatePartitionResult {
		return s.readPartition(ctx, it, p, &held)
	})
	if err != nil {
		return nil, err
	}
	raw := 0
	for _, ps := range parts {
		for _, p := range ps {
			raw += len(p.ProtoReflect().GetUnknown())
		}
	}
	resp := &pb.ReadShareGroupStateResponse{Results: topicResults(req.GetTopics(), parts,
		func(id string, ps []*pb.ReadStatePartitionResult) *pb.ReadStateTopicResult {
			return &pb.ReadStateTopicResult{TopicId: id, Partitions: ps}
		})}
	return &readReply{resp: resp, budget: s.budget, held: held.Load(), raw: int64(raw),
		sendTimeout: s.opts.SendTimeout, stalled: func() { s.stalled(ctx) }}, nil
}

// stalled handles a read response that was not sent within the send timeout: its client does
// not read it. The connection it came on is closed, which frees what it holds.
func (s *StateServer) stalled(ctx context.Context) {
	s.opts.Metrics.countStalled()
	closed := false
	if p, ok := peer.FromContext(ctx); ok && s.opts.Conns != nil {
		closed = s.opts.Conns.CloseConn(p.Addr)
	}
	s.warn.Warn("a read response was not sent within connections.send.timeout.ms: its client does not read it (further ones within 10 s are not logged; sharecoord_stalled_responses_total counts them)",
		zap.Duration("connections.send.timeout.ms", s.opts.SendTimeout), zap.String("peer.address", peerAddr(ctx)), zap.Bool("connection_closed", closed))
}

// WriteShareGroupState implements the WriteShareGroupState RPC.
func (s *StateServer) WriteShareGroupState(ctx context.Context, req *pb.WriteShareGroupStateRequest) (*pb.WriteShareGroupStateResponse, error) {
	start := time.Now()
	defer func() { s.opts.Metrics.observeWrite(time.Since(start)) }()
	startKey := func(it item, p *pb.WriteStatePartition) pendingResult {
		if it.bad.Code != kafkaerr.None {
			return shard.Answered(it.bad)
		}
		return s.startWrite(ctx, it.key, p)
	}
	parts, err := startEachPartition(s, req.GetGroupId(), req.GetTopics(), startKey, func(it item, r shard.Result) *pb.PartitionResult {
		s.opts.Metrics.countOp(opWrite, r.Code)
		return partitionResult(it.key.Partition, r)
	})
	if err != nil {
		return nil, err
	}
	return &pb.WriteShareGroupStateResponse{Results: topicResults(req.GetTopics(), parts, topicResult)}, nil
}

// startWrite converts one partition of a write request and hands it to the key's partition,
// queued there if the partition is a WriteStarter, else on a goroutine of its own. Values that do
// not fit Kafka's field widths are rejected here, since converting them would change them, but
// only after the checks the partition makes before it would reach that batch, so that the answer
// is the one the partition gives any other invalid write.
func (s *StateServer) startWrite(ctx context.Context, key shard.Key, p *pb.WriteStatePartition) pendingResult {
	batches, bad := fromProtoBatches(p.GetStateBatches())
	dcc := int32(-1)
	if p.DeliveryCompleteCount != nil {
		dcc = p.GetDeliveryCompleteCount()
	}
	r := shard.WriteRequest{
		Key:                   key,
		StateEpoch:            p.GetStateEpoch(),
		LeaderEpoch:           p.GetLeaderEpoch(),
		StartOffset:           p.GetStartOffset(),
		DeliveryCompleteCount: dcc,
		StateBatches:          batches,
	}
	if bad != "" {
		if res := shard.CheckWrite(&r); res.Code != kafkaerr.None {
			return shard.Answered(res)
		}
		return shard.Answered(shard.Result{Code: kafkaerr.InvalidRequest, Message: bad})
	}
	part := s.route(key)
	if w, ok := part.(WriteStarter); ok {
		return w.StartWrite(ctx, r)
	}
	g := &goResult{done: make(chan struct{})}
	go func() {
		defer close(g.done)
		defer g.panicked.recover()
		g.res = part.Write(ctx, r)
	}()
	return g
}

// DeleteShareGroupState implements the DeleteShareGroupState RPC.
func (s *StateServer) DeleteShareGroupState(ctx context.Context, req *pb.DeleteShareGroupStateRequest) (*pb.DeleteShareGroupStateResponse, error) {
	parts, err := eachPartition(s, req.GetGroupId(), req.GetTopics(), func(it item, _ *pb.DeleteStatePartition) *pb.PartitionResult {
		r := it.bad
		if r.Code == kafkaerr.None {
			r = s.route(it.key).Delete(ctx, shard.DeleteRequest{Key: it.key})
		}
		s.opts.Metrics.countOp(opDelete, r.Code)
		return partitionResult(it.key.Partition, r)
	})
	if err != nil {
		return nil, err
	}
	return &pb.DeleteShareGroupStateResponse{Results: topicResults(req.GetTopics(), parts, topicResult)}, nil
}

// ReadShareGroupStateSummary implements the ReadShareGroupStateSummary RPC.
func (s *StateServer) ReadShareGroupStateSummary(ctx context.Context, req *pb.ReadShareGroupStateSummaryRequest) (*pb.ReadShareGroupStateSummaryResponse, error) {
	parts, err := eachPartition(s, req.GetGroupId(), req.GetTopics(), func(it item, p *pb.ReadStateSummaryPartition) *pb.ReadStateSummaryPartitionResult {
		r := shard.SummaryResult{Result: it.bad}
		if it.bad.Code == kafkaerr.None {
			r = s.route(it.key).ReadSummary(ctx, shard.SummaryRequest{Key: it.key, LeaderEpoch: p.GetLeaderEpoch()})
		}
		if r.Code != kafkaerr.None {
			// Nothing known but the error: the sentinels of a key without state.
			r = shard.SummaryResult{Result: r.Result, StartOffset: -1, DeliveryCompleteCount: -1}
		}
		s.opts.Metrics.countOp(opReadSummary, r.Code)
		return &pb.ReadStateSummaryPartitionResult{
			Partition:             it.key.Partition,
			ErrorCode:             errorCode(r.Code),
			ErrorMessage:          r.Message,
			StateEpoch:            r.StateEpoch,
			LeaderEpoch:           r.LeaderEpoch,
			StartOffset:           r.StartOffset,
			DeliveryCompleteCount: r.DeliveryCompleteCount,
		}
	})
	if err != nil {
		return nil, err
	}
	return &pb.ReadShareGroupStateSummaryResponse{Results: topicResults(req.GetTopics(), parts,
		func(id string, ps []*pb.ReadStateSummaryPartitionResult) *pb.ReadStateSummaryTopicResult {
			return &pb.ReadStateSummaryTopicResult{TopicId: id, Partitions: ps}
		})}, nil
}

// FindCoordinator implements the FindCoordinator RPC: this node owns every state partition, or,
// in a cluster, the leader of each key's partition does.
func (s *StateServer) FindCoordinator(_ context.Context, req *pb.FindCoordinatorRequest) (*pb.FindCoordinatorResponse, error) {
	out := make([]*pb.Coordinator, len(req.GetKeys()))
	for i, raw := range req.GetKeys() {
		c := &pb.Coordinator{Key: raw, NodeId: -1, StatePartition: -1, Port: -1}
		key, err := shard.ParseCoordinatorKey(raw)
		switch {
		case err != nil:
			c.ErrorCode = errorCode(kafkaerr.InvalidRequest)
			c.ErrorMessage = fmt.Sprintf("key %q is not a share coordinator key \"groupId:topicId:partition\": %v", raw, err)
		case key.Partition < 0:
			// The state RPCs refuse a negative partition; a key naming one has no coordinator either.
			c.ErrorCode = errorCode(kafkaerr.InvalidRequest)
			c.ErrorMessage = fmt.Sprintf("key %q names partition %d: the partition id cannot be a negative number", raw, key.Partition)
		default:
			p := key.PartitionOf(len(s.partitions))
			c.StatePartition = int32(p)
			if s.opts.Coordinators == nil {
				c.NodeId, c.Host, c.Port = s.opts.NodeID, s.opts.Host, s.opts.Port
			} else if co := s.opts.Coordinators(p); co.Code != kafkaerr.None {
				c.ErrorCode, c.ErrorMessage = errorCode(co.Code), co.Message
			} else {
				c.NodeId, c.Host, c.Port = co.NodeID, co.Host, co.Port
			}
		}
		out[i] = c
	}
	return &pb.FindCoordinatorResponse{Coordinators: out}, nil
}

// fromProtoBatches converts state batches. A delivery state or count that does not fit Kafka's
// int8 / int16 fields is refused with the message to answer; the batches returned then end with
// that one, holding its offsets and, in place of the value that does not fit and of those checked
// after it, valid ones (0), so that the checks the shard makes before it can be made first.
func fromProtoBatches(in []*pb.StateBatch) ([]shard.StateBatch, string) {
	if len(in) == 0 {
		return nil, ""
	}
	out := make([]shard.StateBatch, len(in))
	for i, b := range in {
		out[i] = shard.StateBatch{FirstOffset: b.GetFirstOffset(), LastOffset: b.GetLastOffset()}
		if st := b.GetDeliveryState(); st < math.MinInt8 || st > math.MaxInt8 {
			return out[:i+1], fmt.Sprintf(shard.MsgBadDeliveryState, i, st)
		}
		out[i].DeliveryState = int8(b.GetDeliveryState())
		if c := b.GetDeliveryCount(); c < math.MinInt16 || c > math.MaxInt16 {
			return out[:i+1], fmt.Sprintf(shard.MsgBadDeliveryCount, i, c)
		}
		out[i].DeliveryCount = int16(b.GetDeliveryCount())
	}
	return out, ""
}

// oncePer returns l logging each message at most once per period (nil l: a no-op logger).
func oncePer(l *zap.Logger, period time.Duration) *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	return l.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, period, 1, 0)
	}))
}
