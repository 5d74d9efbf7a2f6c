package client

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/coordinatord/coordinatord/internal/record"
	"github.com/coordinatord/coordinatord/internal/shard"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Kafka Uuid text forms (API.md's example and another).
const (
	topicA = "P6hfZFcXRWKz_CyWP2avpg"
	topicB = "ASNFZ4mrze8BI0VniavN7w"
)

// fakeCluster is a set of in-process coordinator nodes over one shared share-state store, as if
// every state partition were replicated to all of them. A scripted table says which node leads
// each state partition; tests change it at any time. Only the leader serves a key: the others
// answer NOT_COORDINATOR, and a partition without a leader COORDINATOR_NOT_AVAILABLE.
type fakeCluster struct {
	t          *testing.T
	partitions int // state partitions, keys routed as the server routes them

	mu     sync.Mutex
	nodes  map[int32]*fakeNode
	leader map[int32]int32 // state partition → leading node id; absent = no leader
	state  map[string]*fakeState
	calls  []fakeCall
	// fault, when set, answers a key on a node before anything else: a code other than NONE is
	// returned for it with msg. It is called with mu held.
	fault func(node int32, key string) (code pb.ErrorCode, msg string)
	// hook, when set, runs at the start of every RPC on every node with the keys it names,
	// without mu: it may block, change the cluster, or fail the RPC by returning an error.
	hook func(node int32, method string, keys []string) error
	// unaware are nodes that know no leader, as a node cut off from the others: their
	// FindCoordinator answers COORDINATOR_NOT_AVAILABLE for every key.
	unaware map[int32]bool
}

// fakeCall is one state request a node received.
type fakeCall struct {
	node   int32
	method string
	keys   []string // in request order
}

// fakeState is the stored state of one share partition.
type fakeState struct {
	stateEpoch, leaderEpoch int32
	startOffset             int64
	deliveryComplete        int32
	batches                 []*pb.StateBatch
	writes                  int
}

// newFakeCluster starts nodes 1..n over the given number of state partitions, partition p led
// by node p%n+1.
func newFakeCluster(t *testing.T, n, partitions int) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{t: t, partitions: partitions, nodes: make(map[int32]*fakeNode),
		leader: make(map[int32]int32), state: make(map[string]*fakeState)}
	for id := int32(1); id <= int32(n); id++ {
		fc.start(id)
	}
	for p := range partitions {
		fc.leader[int32(p)] = int32(p%n + 1)
	}
	return fc
}

// fakeNode is one node of a fakeCluster, listening on 127.0.0.1.
type fakeNode struct {
	pb.UnimplementedShareCoordinatorServiceServer
	id      int32
	fc      *fakeCluster
	addr    string
	srv     *grpc.Server
	stopped chan struct{}
}

// start starts node id on a fresh loopback port.
func (fc *fakeCluster) start(id int32) *fakeNode {
	fc.t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fc.t.Fatal(err)
	}
	n := &fakeNode{id: id, fc: fc, addr: lis.Addr().String(), srv: grpc.NewServer(), stopped: make(chan struct{})}
	pb.RegisterShareCoordinatorServiceServer(n.srv, n)
	go func() {
		defer close(n.stopped)
		_ = n.srv.Serve(lis)
	}()
	fc.mu.Lock()
	fc.nodes[id] = n
	fc.mu.Unlock()
	fc.t.Cleanup(n.stop)
	return n
}

// stop stops the node at once, failing its calls in flight; safe to call twice.
func (n *fakeNode) stop() {
	n.srv.Stop()
	<-n.stopped
}

// addrs returns the nodes' addresses, by node id.
func (fc *fakeCluster) addrs() []string {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	ids := make([]int32, 0, len(fc.nodes))
	for id := range fc.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = fc.nodes[id].addr
	}
	return out
}

// partitionOf is the state partition of a key, computed as the server computes it.
func (fc *fakeCluster) partitionOf(key string) int32 {
	k, err := shard.ParseCoordinatorKey(key)
	if err != nil {
		fc.t.Fatalf("bad key %q: %v", key, err)
	}
	return int32(shard.PartitionFor(k.CoordinatorKey(), fc.partitions))
}

// setLeader makes node lead state partition p; node 0 leaves it without a leader.
func (fc *fakeCluster) setLeader(p, node int32) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if node == 0 {
		delete(fc.leader, p)
		return
	}
	fc.leader[p] = node
}

// leaderOf returns the node leading the state partition of key (0 for none).
func (fc *fakeCluster) leaderOf(key string) int32 {
	p := fc.partitionOf(key)
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.leader[p]
}

// callsTo returns the state requests node received, for method ("" = any).
func (fc *fakeCluster) callsTo(node int32, method string) []fakeCall {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var out []fakeCall
	for _, c := range fc.calls {
		if c.node == node && (method == "" || c.method == method) {
			out = append(out, c)
		}
	}
	return out
}

// sent counts, per key, the state requests for method that named it and passed the hook.
func (fc *fakeCluster) sent(method string) map[string]int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	out := make(map[string]int)
	for _, c := range fc.calls {
		if c.method == method {
			for _, k := range c.keys {
				out[k]++
			}
		}
	}
	return out
}

// stored returns a copy of the stored state of key, if any.
func (fc *fakeCluster) stored(key string) (fakeState, bool) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	s, ok := fc.state[key]
	if !ok {
		return fakeState{}, false
	}
	return *s, true
}

// setHook replaces the hook.
func (fc *fakeCluster) setHook(hook func(node int32, method string, keys []string) error) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.hook = hook
}

// setFault replaces the fault.
func (fc *fakeCluster) setFault(fault func(node int32, key string) (pb.ErrorCode, string)) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.fault = fault
}

// runHook runs the test's hook for an RPC naming keys.
func (n *fakeNode) runHook(method string, keys []string) error {
	n.fc.mu.Lock()
	hook := n.fc.hook
	n.fc.mu.Unlock()
	if hook == nil {
		return nil
	}
	return hook(n.id, method, keys)
}

// FindCoordinator answers each key's state partition and leader from the scripted table.
func (n *fakeNode) FindCoordinator(_ context.Context, req *pb.FindCoordinatorRequest) (*pb.FindCoordinatorResponse, error) {
	if err := n.runHook("FindCoordinator", req.GetKeys()); err != nil {
		return nil, err
	}
	fc := n.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	resp := &pb.FindCoordinatorResponse{}
	for _, raw := range req.GetKeys() {
		co := &pb.Coordinator{Key: raw, StatePartition: -1, NodeId: -1, Port: -1}
		k, err := shard.ParseCoordinatorKey(raw)
		switch {
		case err != nil:
			co.ErrorCode, co.ErrorMessage = pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, err.Error()
		default:
			co.StatePartition = int32(shard.PartitionFor(k.CoordinatorKey(), fc.partitions))
			leader, ok := fc.nodes[fc.leader[co.StatePartition]]
			if !ok || fc.unaware[n.id] {
				co.ErrorCode, co.ErrorMessage = pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, "no leader yet"
				break
			}
			host, port, _ := net.SplitHostPort(leader.addr)
			p, _ := strconv.Atoi(port)
			co.NodeId, co.Host, co.Port = leader.id, host, int32(p)
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	return resp, nil
}

// admit decides whether this node serves key now: the test's fault first, then a valid topic
// id, then leadership. It is called with mu held; NONE means serve.
func (n *fakeNode) admit(group, topicID string, partition int32) (pb.ErrorCode, string) {
	fc := n.fc
	key := Key(group, topicID, partition)
	if fc.fault != nil {
		if code, msg := fc.fault(n.id, key); code != pb.ErrorCode_ERROR_CODE_NONE {
			return code, msg
		}
	}
	if _, err := record.ParseTopicID(topicID); err != nil {
		return pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "topic_id " + err.Error()
	}
	p := int32(shard.PartitionFor(key, fc.partitions))
	switch leader, ok := fc.leader[p]; {
	case !ok:
		return pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, fmt.Sprintf("state partition %d has no leader", p)
	case leader != n.id:
		return pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, fmt.Sprintf("state partition %d is led by node %d", p, leader)
	}
	return pb.ErrorCode_ERROR_CODE_NONE, ""
}

// serve runs one state request on the node: for every partition, in request order, admit it and,
// if admitted, apply it with do. It records the request's keys.
func (n *fakeNode) serve(method, group string, topics []string, parts [][]int32, do func(ti, pi int, key string) (pb.ErrorCode, string)) ([][]pb.ErrorCode, [][]string, error) {
	call := fakeCall{node: n.id, method: method}
	for ti, id := range topics {
		for _, p := range parts[ti] {
			call.keys = append(call.keys, Key(group, id, p))
		}
	}
	if err := n.runHook(method, call.keys); err != nil {
		return nil, nil, err
	}
	fc := n.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	codes := make([][]pb.ErrorCode, len(topics))
	msgs := make([][]string, len(topics))
	for ti, id := range topics {
		codes[ti] = make([]pb.ErrorCode, len(parts[ti]))
		msgs[ti] = make([]string, len(parts[ti]))
		for pi, p := range parts[ti] {
			code, msg := n.admit(group, id, p)
			if code == pb.ErrorCode_ERROR_CODE_NONE {
				code, msg = do(ti, pi, Key(group, id, p))
			}
			codes[ti][pi], msgs[ti][pi] = code, msg
		}
	}
	fc.calls = append(fc.calls, call)
	return codes, msgs, nil
}

// shape returns the topic ids and partition indexes of a state request.
func shape[T topic[P], P partition](topics []T) ([]string, [][]int32) {
	ids := make([]string, len(topics))
	parts := make([][]int32, len(topics))
	for i, t := range topics {
		ids[i] = t.GetTopicId()
		for _, p := range t.GetPartitions() {
			parts[i] = append(parts[i], p.GetPartition())
		}
	}
	return ids, parts
}

// results builds a response's topic results, one per request entry, with part making the
// result of partition pi of entry ti and topic (one of the client's rpc descriptors') the entry.
func results[U, R any](ids []string, parts [][]int32, part func(ti, pi int, p int32) R, topic func(id string, rs []R) U) []U {
	out := make([]U, len(ids))
	for ti, id := range ids {
		rs := make([]R, len(parts[ti]))
		for pi, p := range parts[ti] {
			rs[pi] = part(ti, pi, p)
		}
		out[ti] = topic(id, rs)
	}
	return out
}

// simpleResults are the results of Initialize, Write and Delete.
func simpleResults(ids []string, parts [][]int32, codes [][]pb.ErrorCode, msgs [][]string) []*pb.TopicResult {
	return results(ids, parts, func(ti, pi int, p int32) *pb.PartitionResult {
		return partitionResult(p, codes[ti][pi], msgs[ti][pi])
	}, topicResult)
}

func (n *fakeNode) InitializeShareGroupState(_ context.Context, req *pb.InitializeShareGroupStateRequest) (*pb.InitializeShareGroupStateResponse, error) {
	ids, parts := shape(req.GetTopics())
	codes, msgs, err := n.serve("InitializeShareGroupState", req.GetGroupId(), ids, parts, func(ti, pi int, key string) (pb.ErrorCode, string) {
		p := req.GetTopics()[ti].GetPartitions()[pi]
		if s, ok := n.fc.state[key]; ok && p.GetStateEpoch() < s.stateEpoch {
			return pb.ErrorCode_ERROR_CODE_FENCED_STATE_EPOCH, fmt.Sprintf("state epoch %d is older than %d", p.GetStateEpoch(), s.stateEpoch)
		}
		n.fc.state[key] = &fakeState{stateEpoch: p.GetStateEpoch(), startOffset: p.GetStartOffset(), deliveryComplete: -1}
		return pb.ErrorCode_ERROR_CODE_NONE, ""
	})
	if err != nil {
		return nil, err
	}
	return &pb.InitializeShareGroupStateResponse{Results: simpleResults(ids, parts, codes, msgs)}, nil
}

func (n *fakeNode) ReadShareGroupState(_ context.Context, req *pb.ReadShareGroupStateRequest) (*pb.ReadShareGroupStateResponse, error) {
	ids, parts := shape(req.GetTopics())
	read := make(map[string]fakeState)
	codes, msgs, err := n.serve("ReadShareGroupState", req.GetGroupId(), ids, parts, func(ti, pi int, key string) (pb.ErrorCode, string) {
		s, ok := n.fc.state[key]
		if !ok {
			read[key] = fakeState{startOffset: -1}
			return pb.ErrorCode_ERROR_CODE_NONE, ""
		}
		epoch := req.GetTopics()[ti].GetPartitions()[pi].GetLeaderEpoch()
		if epoch < s.leaderEpoch {
			return pb.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH, fmt.Sprintf("leader epoch %d is older than %d", epoch, s.leaderEpoch)
		}
		s.leaderEpoch = epoch
		read[key] = *s
		return pb.ErrorCode_ERROR_CODE_NONE, ""
	})
	if err != nil {
		return nil, err
	}
	return &pb.ReadShareGroupStateResponse{Results: results(ids, parts, func(ti, pi int, p int32) *pb.ReadStatePartitionResult {
		r := readRPC.failed(p, codes[ti][pi], msgs[ti][pi])
		if s, ok := read[Key(req.GetGroupId(), ids[ti], p)]; ok && r.ErrorCode == pb.ErrorCode_ERROR_CODE_NONE {
			r.StateEpoch, r.StartOffset, r.StateBatches = s.stateEpoch, s.startOffset, s.batches
		}
		return r
	}, readRPC.topicResult)}, nil
}

func (n *fakeNode) WriteShareGroupState(_ context.Context, req *pb.WriteShareGroupStateRequest) (*pb.WriteShareGroupStateResponse, error) {
	ids, parts := shape(req.GetTopics())
	codes, msgs, err := n.serve("WriteShareGroupState", req.GetGroupId(), ids, parts, func(ti, pi int, key string) (pb.ErrorCode, string) {
		p := req.GetTopics()[ti].GetPartitions()[pi]
		s, ok := n.fc.state[key]
		switch {
		case !ok:
			s = &fakeState{startOffset: -1}
			n.fc.state[key] = s
		case p.GetStateEpoch() < s.stateEpoch:
			return pb.ErrorCode_ERROR_CODE_FENCED_STATE_EPOCH, fmt.Sprintf("state epoch %d is older than %d", p.GetStateEpoch(), s.stateEpoch)
		case p.GetLeaderEpoch() < s.leaderEpoch:
			return pb.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH, fmt.Sprintf("leader epoch %d is older than %d", p.GetLeaderEpoch(), s.leaderEpoch)
		}
		s.leaderEpoch = p.GetLeaderEpoch()
		if p.GetStartOffset() > s.startOffset {
			s.startOffset = p.GetStartOffset()
		}
		if p.DeliveryCompleteCount != nil {
			s.deliveryComplete = p.GetDeliveryCompleteCount()
		}
		s.batches = append(s.batches, p.GetStateBatches()...)
		s.writes++
		return pb.ErrorCode_ERROR_CODE_NONE, ""
	})
	if err != nil {
		return nil, err
	}
	return &pb.WriteShareGroupStateResponse{Results: simpleResults(ids, parts, codes, msgs)}, nil
}

func (n *fakeNode) DeleteShareGroupState(_ context.Context, req *pb.DeleteShareGroupStateRequest) (*pb.DeleteShareGroupStateResponse, error) {
	ids, parts := shape(req.GetTopics())
	codes, msgs, err := n.serve("DeleteShareGroupState", req.GetGroupId(), ids, parts, func(_, _ int, key string) (pb.ErrorCode, string) {
		delete(n.fc.state, key)
		return pb.ErrorCode_ERROR_CODE_NONE, ""
	})
	if err != nil {
		return nil, err
	}
	return &pb.DeleteShareGroupStateResponse{Results: simpleResults(ids, parts, codes, msgs)}, nil
}

func (n *fakeNode) ReadShareGroupStateSummary(_ context.Context, req *pb.ReadShareGroupStateSummaryRequest) (*pb.ReadShareGroupStateSummaryResponse, error) {
	ids, parts := shape(req.GetTopics())
	read := make(map[string]fakeState)
	codes, msgs, err := n.serve("ReadShareGroupStateSummary", req.GetGroupId(), ids, parts, func(_, _ int, key string) (pb.ErrorCode, string) {
		if s, ok := n.fc.state[key]; ok {
			read[key] = *s
		}
		return pb.ErrorCode_ERROR_CODE_NONE, ""
	})
	if err != nil {
		return nil, err
	}
	return &pb.ReadShareGroupStateSummaryResponse{Results: results(ids, parts, func(ti, pi int, p int32) *pb.ReadStateSummaryPartitionResult {
		r := summaryRPC.failed(p, codes[ti][pi], msgs[ti][pi])
		if s, ok := read[Key(req.GetGroupId(), ids[ti], p)]; ok {
			r.StateEpoch, r.LeaderEpoch, r.StartOffset, r.DeliveryCompleteCount = s.stateEpoch, s.leaderEpoch, s.startOffset, s.deliveryComplete
		}
		return r
	}, summaryRPC.topicResult)}, nil
}
