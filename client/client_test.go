package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

const group = "g1"

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newClient returns a client bootstrapped with every node of fc, retrying fast.
func newClient(t *testing.T, fc *fakeCluster, tweak func(*Options)) *Client {
	t.Helper()
	o := Options{
		Bootstrap:    fc.addrs(),
		DialOptions:  []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		Logger:       zaptest.NewLogger(t),
		RetryBackoff: Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond},
	}
	if tweak != nil {
		tweak(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

// spec names partitions of one topic entry of a request.
type spec struct {
	topic string
	parts []int32
}

func span(from, to int32) []int32 {
	var out []int32
	for p := from; p <= to; p++ {
		out = append(out, p)
	}
	return out
}

// got is one per-partition result, flattened.
type got struct {
	topic     string
	partition int32
	code      pb.ErrorCode
	msg       string
}

type messageResult interface {
	result
	GetErrorMessage() string
}

func flat[U topic[R], R messageResult](results []U) []got {
	var out []got
	for _, t := range results {
		for _, p := range t.GetPartitions() {
			out = append(out, got{t.GetTopicId(), p.GetPartition(), p.GetErrorCode(), p.GetErrorMessage()})
		}
	}
	return out
}

// topics builds the topic entries of a request from specs, with part making each partition
// entry and topic (one of the rpc descriptors') each topic entry.
func topics[T, P any](specs []spec, topic func(id string, ps []P) T, part func(p int32) P) []T {
	out := make([]T, len(specs))
	for i, s := range specs {
		ps := make([]P, len(s.parts))
		for j, p := range s.parts {
			ps[j] = part(p)
		}
		out[i] = topic(s.topic, ps)
	}
	return out
}

func initializeRequest(specs []spec) *pb.InitializeShareGroupStateRequest {
	return initializeRPC.request(group, topics(specs, initializeRPC.topic, func(p int32) *pb.InitializeStatePartition {
		return &pb.InitializeStatePartition{Partition: p, StateEpoch: 1, StartOffset: int64(p)}
	}))
}

func readRequest(specs []spec) *pb.ReadShareGroupStateRequest {
	return readRPC.request(group, topics(specs, readRPC.topic, func(p int32) *pb.ReadStatePartition {
		return &pb.ReadStatePartition{Partition: p, LeaderEpoch: 1}
	}))
}

// writeRequest writes, for each partition p, one acknowledged batch at offset p with state
// epoch 1 and leader epoch 1.
func writeRequest(specs []spec) *pb.WriteShareGroupStateRequest {
	return writeRPC.request(group, topics(specs, writeRPC.topic, func(p int32) *pb.WriteStatePartition {
		return &pb.WriteStatePartition{Partition: p, StateEpoch: 1, LeaderEpoch: 1, StartOffset: -1,
			StateBatches: []*pb.StateBatch{{FirstOffset: int64(p), LastOffset: int64(p), DeliveryState: 2, DeliveryCount: 1}}}
	}))
}

func deleteRequest(specs []spec) *pb.DeleteShareGroupStateRequest {
	return deleteRPC.request(group, topics(specs, deleteRPC.topic, func(p int32) *pb.DeleteStatePartition {
		return &pb.DeleteStatePartition{Partition: p}
	}))
}

func summaryRequest(specs []spec) *pb.ReadShareGroupStateSummaryRequest {
	return summaryRPC.request(group, topics(specs, summaryRPC.topic, func(p int32) *pb.ReadStateSummaryPartition {
		return &pb.ReadStateSummaryPartition{Partition: p}
	}))
}

// via makes a test call of a client method: it builds the request from specs and flattens the
// response.
func via[Q any, S response[U], U topic[R], R messageResult](method func(*Client, context.Context, Q) (S, error), build func([]spec) Q) func(context.Context, *Client, []spec) ([]got, error) {
	return func(ctx context.Context, c *Client, specs []spec) ([]got, error) {
		resp, err := method(c, ctx, build(specs))
		if err != nil {
			return nil, err
		}
		return flat(resp.GetResults()), nil
	}
}

// everyRPC calls each state RPC through a client with a request of the given shape.
var everyRPC = []struct {
	method string
	call   func(ctx context.Context, c *Client, specs []spec) ([]got, error)
}{
	{"InitializeShareGroupState", via((*Client).InitializeShareGroupState, initializeRequest)},
	{"ReadShareGroupState", via((*Client).ReadShareGroupState, readRequest)},
	{"WriteShareGroupState", via((*Client).WriteShareGroupState, writeRequest)},
	{"DeleteShareGroupState", via((*Client).DeleteShareGroupState, deleteRequest)},
	{"ReadShareGroupStateSummary", via((*Client).ReadShareGroupStateSummary, summaryRequest)},
}

// keysOf returns the coordinator keys of specs in request order.
func keysOf(specs []spec) []string {
	var out []string
	for _, s := range specs {
		for _, p := range s.parts {
			out = append(out, Key(group, s.topic, p))
		}
	}
	return out
}

// nodesOf returns the distinct leaders of keys.
func (fc *fakeCluster) nodesOf(keys []string) map[int32][]string {
	out := make(map[int32][]string)
	for _, k := range keys {
		n := fc.leaderOf(k)
		out[n] = append(out[n], k)
	}
	return out
}

// wantOrder is the partitions of a merged response, in order.
type wantOrder []struct {
	topic string
	parts []int32
}

func (w wantOrder) flat() []got {
	var out []got
	for _, t := range w {
		for _, p := range t.parts {
			out = append(out, got{topic: t.topic, partition: p})
		}
	}
	return out
}

// TestSplitByLeaderAndMerge sends requests whose keys several nodes lead through every state RPC:
// each node gets one request with exactly the keys it leads, and the answers come back merged
// as one node answers a whole request, one result per topic id in order of first appearance.
func TestSplitByLeaderAndMerge(t *testing.T) {
	cases := []struct {
		name  string
		specs []spec
		want  wantOrder
	}{
		{"one partition", []spec{{topicA, []int32{3}}},
			wantOrder{{topicA, []int32{3}}}},
		{"one topic on every node", []spec{{topicA, span(0, 11)}},
			wantOrder{{topicA, span(0, 11)}}},
		{"a topic named twice", []spec{{topicA, []int32{0, 1}}, {topicB, []int32{0, 1}}, {topicA, []int32{2, 3}}},
			wantOrder{{topicA, []int32{0, 1, 2, 3}}, {topicB, []int32{0, 1}}}},
		{"interleaved, unsorted", []spec{{topicB, []int32{5, 1}}, {topicA, []int32{4}}, {topicB, []int32{9, 0}}},
			wantOrder{{topicB, []int32{5, 1, 9, 0}}, {topicA, []int32{4}}}},
	}
	for _, r := range everyRPC {
		for _, tc := range cases {
			t.Run("method="+r.method+"/"+tc.name, func(t *testing.T) {
				fc := newFakeCluster(t, 3, 6)
				c := newClient(t, fc, nil)
				res, err := r.call(ctxT(t, 10*time.Second), c, tc.specs)
				if err != nil {
					t.Fatal(err)
				}
				want := tc.want.flat()
				if len(res) != len(want) {
					t.Fatalf("got %d results %v, want %v", len(res), res, want)
				}
				for i := range want {
					if res[i].topic != want[i].topic || res[i].partition != want[i].partition || res[i].code != pb.ErrorCode_ERROR_CODE_NONE {
						t.Errorf("result %d = %+v, want %s partition %d with NONE", i, res[i], want[i].topic, want[i].partition)
					}
				}
				for node, keys := range fc.nodesOf(keysOf(tc.specs)) {
					calls := fc.callsTo(node, r.method)
					if len(calls) != 1 {
						t.Fatalf("node %d got %d requests, want 1", node, len(calls))
					}
					if g := slices.Sorted(slices.Values(calls[0].keys)); !slices.Equal(g, slices.Sorted(slices.Values(keys))) {
						t.Errorf("node %d got keys %v, want the keys it leads %v", node, g, keys)
					}
				}
				if s := c.Stats(); s.Calls != 1 || s.Retries != 0 || s.Lookups != 1 {
					t.Errorf("stats %+v, want 1 call, 1 lookup, no retry", s)
				}
			})
		}
	}
}

// TestReadMergesTheNodesAnswers checks that the fields of every result, not only its code, are
// the leader's answer for that partition.
func TestReadMergesTheNodesAnswers(t *testing.T) {
	fc := newFakeCluster(t, 3, 6)
	c := newClient(t, fc, nil)
	specs := []spec{{topicA, span(0, 5)}, {topicB, span(0, 5)}}
	fc.mu.Lock()
	for i, k := range keysOf(specs) {
		fc.state[k] = &fakeState{stateEpoch: int32(i), startOffset: int64(100 * i)}
	}
	fc.mu.Unlock()
	resp, err := c.ReadShareGroupState(ctxT(t, 10*time.Second), readRequest(specs))
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for _, tr := range resp.GetResults() {
		for _, p := range tr.GetPartitions() {
			if p.GetStateEpoch() != int32(i) || p.GetStartOffset() != int64(100*i) {
				t.Errorf("%s partition %d: state epoch %d, start offset %d; want %d, %d", tr.GetTopicId(), p.GetPartition(),
					p.GetStateEpoch(), p.GetStartOffset(), i, 100*i)
			}
			i++
		}
	}
	if i != 12 {
		t.Fatalf("got %d results, want 12", i)
	}
}

// retries collects a client's OnRetry reports.
type retries struct {
	mu  sync.Mutex
	got []Retry
	// then, when set, runs after each report is recorded, with its index.
	then func(n int, r Retry)
}

func (rs *retries) record(r Retry) {
	rs.mu.Lock()
	rs.got = append(rs.got, r)
	n := len(rs.got)
	then := rs.then
	rs.mu.Unlock()
	if then != nil {
		then(n, r)
	}
}

func (rs *retries) all() []Retry {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.got)
}

// TestNotCoordinatorIsFollowed moves the leadership of one state partition while a write is on
// its way to the old leader: the client follows NOT_COORDINATOR to the new leader at once,
// resends only the refused partitions, and backs off when the leader moves again under it.
func TestNotCoordinatorIsFollowed(t *testing.T) {
	cases := []struct {
		moves       int
		wantBackoff []bool // per retry: whether it waited
	}{
		{moves: 1, wantBackoff: []bool{false}},
		{moves: 2, wantBackoff: []bool{false, true}},
		{moves: 3, wantBackoff: []bool{false, true, true}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("moves=%d", tc.moves), func(t *testing.T) {
			fc := newFakeCluster(t, 3, 6)
			var rs retries
			c := newClient(t, fc, func(o *Options) { o.OnRetry = rs.record })
			specs := []spec{{topicA, span(0, 11)}}
			ctx := ctxT(t, 10*time.Second)
			if _, err := c.WriteShareGroupState(ctx, writeRequest(specs)); err != nil { // learn the leaders
				t.Fatal(err)
			}
			keys := keysOf(specs)
			moved := fc.partitionOf(keys[0])
			old := fc.leaderOf(keys[0])
			var movedKeys []string
			stays := false // the old leader keeps other keys of the request
			for _, k := range keys {
				switch {
				case fc.partitionOf(k) == moved:
					movedKeys = append(movedKeys, k)
				case fc.leaderOf(k) == old:
					stays = true
				}
			}
			if !stays {
				t.Fatalf("the old leader %d leads no other key of the request; choose other keys", old)
			}
			left := tc.moves
			fc.setHook(func(node int32, method string, ks []string) error {
				if method != "WriteShareGroupState" || !slices.Contains(ks, movedKeys[0]) {
					return nil
				}
				fc.mu.Lock()
				defer fc.mu.Unlock()
				if left > 0 && fc.leader[moved] == node {
					left--
					fc.leader[moved] = node%3 + 1
				}
				return nil
			})
			before, sentBefore := c.Stats(), fc.sent("WriteShareGroupState")
			res, err := everyRPC[2].call(ctx, c, specs)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.code != pb.ErrorCode_ERROR_CODE_NONE {
					t.Errorf("%+v, want NONE", r)
				}
			}
			sent := fc.sent("WriteShareGroupState")
			for _, k := range keys {
				want := 1
				if slices.Contains(movedKeys, k) {
					want = 1 + tc.moves
				}
				if n := sent[k] - sentBefore[k]; n != want {
					t.Errorf("%s sent %d times, want %d: only refused keys are resent", k, n, want)
				}
			}
			final := fc.leaderOf(movedKeys[0])
			last := fc.callsTo(final, "WriteShareGroupState")
			if g := last[len(last)-1].keys; !slices.Equal(g, movedKeys) {
				t.Errorf("the new leader's last request named %v, want only the moved keys %v", g, movedKeys)
			}
			for _, k := range keys {
				if s, _ := fc.stored(k); s.writes != 2 {
					t.Errorf("%s written %d times, want 2", k, s.writes)
				}
			}
			s := c.Stats()
			if d := s.Redirects - before.Redirects; d != uint64(tc.moves*len(movedKeys)) {
				t.Errorf("redirects %d, want %d", d, tc.moves*len(movedKeys))
			}
			got := rs.all()
			if len(got) != tc.moves {
				t.Fatalf("retries %+v, want %d", got, tc.moves)
			}
			for i, r := range got {
				want := Retry{Method: "WriteShareGroupState", Attempt: i + 2, Partitions: len(movedKeys),
					Codes: map[pb.ErrorCode]int{pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR: len(movedKeys)}}
				if r.Method != want.Method || r.Attempt != want.Attempt || r.Partitions != want.Partitions || fmt.Sprint(r.Codes) != fmt.Sprint(want.Codes) {
					t.Errorf("retry %d = %+v, want %+v", i, r, want)
				}
				if (r.Backoff > 0) != tc.wantBackoff[i] {
					t.Errorf("retry %d waited %v; want a wait: %v", i, r.Backoff, tc.wantBackoff[i])
				}
			}
		})
	}
}

// TestRetriableCodesAreRetried fails one key with a retriable code, a number of times or until
// the deadline: the client retries only that key, and once the deadline comes returns it with
// the node's last answer, the others with theirs.
func TestRetriableCodesAreRetried(t *testing.T) {
	retriable := []pb.ErrorCode{
		pb.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS,
		pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE,
		pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR,
		pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT,
	}
	for _, code := range retriable {
		for _, failures := range []int{3, -1} { // -1: until the deadline
			t.Run(fmt.Sprintf("code=%s/failures=%d", code, failures), func(t *testing.T) {
				fc := newFakeCluster(t, 3, 6)
				var rs retries
				c := newClient(t, fc, func(o *Options) { o.OnRetry = rs.record })
				specs := []spec{{topicA, span(0, 5)}}
				keys := keysOf(specs)
				bad := keys[2]
				seen := 0
				fc.setFault(func(_ int32, key string) (pb.ErrorCode, string) {
					if key != bad || (failures >= 0 && seen >= failures) {
						return pb.ErrorCode_ERROR_CODE_NONE, ""
					}
					seen++
					return code, fmt.Sprintf("injected %s #%d (the write may still be applied)", code, seen)
				})
				timeout := 10 * time.Second
				if failures < 0 {
					timeout = 150 * time.Millisecond
				}
				res, err := everyRPC[2].call(ctxT(t, timeout), c, specs)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range res {
					wantCode, wantMsg := pb.ErrorCode_ERROR_CODE_NONE, ""
					if keys[i] == bad && failures < 0 {
						// The node's last answer; a request the deadline cut does not replace it.
						wantCode, wantMsg = code, fmt.Sprintf("injected %s #", code)
					}
					if r.code != wantCode || !strings.HasPrefix(r.msg, wantMsg) {
						t.Errorf("%s: %s %q, want %s %q", keys[i], r.code, r.msg, wantCode, wantMsg)
					}
				}
				for _, k := range keys {
					s, _ := fc.stored(k)
					if want := 1; k == bad && failures < 0 {
						want = 0
						if s.writes != want {
							t.Errorf("%s written %d times, want %d", k, s.writes, want)
						}
					} else if s.writes != want {
						t.Errorf("%s written %d times, want %d: only the failing key is resent", k, s.writes, want)
					}
				}
				got := rs.all()
				if failures >= 0 && len(got) != failures {
					t.Errorf("%d retries, want %d", len(got), failures)
				}
				if failures < 0 && len(got) < 2 {
					t.Errorf("%d retries before the deadline, want several", len(got))
				}
				for _, r := range got {
					if r.Partitions != 1 || r.Codes[code] != 1 {
						t.Errorf("retry %+v, want one partition with %s", r, code)
					}
				}
				wantExhausted := uint64(0)
				if failures < 0 {
					wantExhausted = 1
				}
				if s := c.Stats(); s.Exhausted != wantExhausted || s.Retries != uint64(len(got)) || s.RetriedPartitions != uint64(len(got)) {
					t.Errorf("stats %+v, want %d exhausted and %d retries", s, wantExhausted, len(got))
				}
			})
		}
	}
}

// TestNoLeaderYet leaves a state partition without a leader: FindCoordinator answers
// COORDINATOR_NOT_AVAILABLE for its keys, which are retried without being sent anywhere, and
// are served once a leader is elected.
func TestNoLeaderYet(t *testing.T) {
	for _, elected := range []bool{false, true} {
		t.Run(fmt.Sprintf("elected=%v", elected), func(t *testing.T) {
			fc := newFakeCluster(t, 3, 6)
			specs := []spec{{topicA, span(0, 5)}}
			keys := keysOf(specs)
			orphan := fc.partitionOf(keys[0])
			leader := fc.leaderOf(keys[0])
			fc.setLeader(orphan, 0)
			rs := retries{then: func(n int, _ Retry) {
				if elected && n == 2 {
					fc.setLeader(orphan, leader)
				}
			}}
			c := newClient(t, fc, func(o *Options) { o.OnRetry = rs.record })
			timeout := 10 * time.Second
			if !elected {
				timeout = 100 * time.Millisecond
			}
			res, err := everyRPC[1].call(ctxT(t, timeout), c, specs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				want := pb.ErrorCode_ERROR_CODE_NONE
				if !elected && fc.partitionOf(keys[i]) == orphan {
					want = pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE
					if r.msg != "no leader yet" {
						t.Errorf("%s: message %q, want FindCoordinator's", keys[i], r.msg)
					}
				}
				if r.code != want {
					t.Errorf("%s: %s, want %s", keys[i], r.code, want)
				}
			}
			sent := fc.sent("ReadShareGroupState")
			for _, k := range keys {
				want := 1
				if !elected && fc.partitionOf(k) == orphan {
					want = 0
				}
				if sent[k] != want {
					t.Errorf("%s sent %d times, want %d", k, sent[k], want)
				}
			}
		})
	}
}

// TestLookupSkipsANodeThatKnowsNoLeader makes the first bootstrap node know no leader, as a node
// cut off from the others does, while the others know it: the client must not keep asking that
// node, which answers (so it would stay the node that last answered), but find the leader from
// another and be served.
func TestLookupSkipsANodeThatKnowsNoLeader(t *testing.T) {
	fc := newFakeCluster(t, 3, 6)
	specs := []spec{{topicA, span(0, 5)}}
	keys := keysOf(specs)
	fc.mu.Lock()
	fc.unaware = map[int32]bool{1: true}
	fc.mu.Unlock()
	fc.setFault(func(node int32, key string) (pb.ErrorCode, string) {
		if node == 1 {
			return pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, "no leader known here"
		}
		return pb.ErrorCode_ERROR_CODE_NONE, ""
	})
	for p := range int32(6) {
		fc.setLeader(p, 2+p%2) // nodes 2 and 3 lead everything
	}
	c := newClient(t, fc, nil)
	for round := range 3 {
		res, err := everyRPC[1].call(ctxT(t, 2*time.Second), c, specs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.code != pb.ErrorCode_ERROR_CODE_NONE {
				t.Errorf("round %d: %s: %s %q, want it served by node %d", round, keys[i], r.code, r.msg, fc.leaderOf(keys[i]))
			}
		}
	}
	if n := len(fc.callsTo(1, "")); n != 0 {
		t.Errorf("node 1, which leads nothing, got %d state requests", n)
	}
}

func TestLookupOrderAsksANodeThatKnewNoLeaderLast(t *testing.T) {
	r := newRoutes(10)
	boot := []string{"a:1", "b:1", "c:1"}
	for _, step := range []struct {
		addr   string
		named  bool
		prefer string
		want   []string
	}{
		{"a:1", false, "", []string{"b:1", "c:1", "a:1"}},
		{"b:1", true, "", []string{"b:1", "c:1", "a:1"}},
		{"", false, "a:1", []string{"a:1", "b:1", "c:1"}}, // a node that just refused a key comes first
		{"a:1", true, "", []string{"a:1", "b:1", "c:1"}},
		{"b:1", false, "", []string{"a:1", "c:1", "b:1"}},
		{"a:1", false, "", []string{"b:1", "c:1", "a:1"}}, // an election: the latest to name none goes last
	} {
		if step.addr != "" {
			r.answered(step.addr, step.named)
		}
		if got := r.lookupOrder(step.prefer, boot); !slices.Equal(got, step.want) {
			t.Errorf("after %s answered (leaders named: %v), prefer %q: order %v, want %v", step.addr, step.named, step.prefer, got, step.want)
		}
	}
}

// TestNonRetriableCodesAreReturnedAsTheyAre fails keys with codes that no retry can fix: they
// come back exactly as the node (or FindCoordinator) gave them, after one attempt.
func TestNonRetriableCodesAreReturnedAsTheyAre(t *testing.T) {
	cases := []struct {
		name     string
		prepare  func(fc *fakeCluster, key string)
		topic    string
		wantCode pb.ErrorCode
		wantMsg  string
	}{
		{"fenced state epoch", func(fc *fakeCluster, key string) { fc.state[key] = &fakeState{stateEpoch: 5} },
			topicA, pb.ErrorCode_ERROR_CODE_FENCED_STATE_EPOCH, "state epoch 1 is older than 5"},
		{"fenced leader epoch", func(fc *fakeCluster, key string) { fc.state[key] = &fakeState{leaderEpoch: 9} },
			topicA, pb.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH, "leader epoch 1 is older than 9"},
		{"unknown server error", func(fc *fakeCluster, key string) {
			fc.fault = injectOn(key, pb.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR)
		},
			topicA, pb.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR, "injected"},
		{"group authorization failed", func(fc *fakeCluster, key string) {
			fc.fault = injectOn(key, pb.ErrorCode_ERROR_CODE_GROUP_AUTHORIZATION_FAILED)
		},
			topicA, pb.ErrorCode_ERROR_CODE_GROUP_AUTHORIZATION_FAILED, "injected"},
		{"invalid request from the node", func(fc *fakeCluster, key string) { fc.fault = injectOn(key, pb.ErrorCode_ERROR_CODE_INVALID_REQUEST) },
			topicA, pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "injected"},
		{"a topic id FindCoordinator refuses", func(*fakeCluster, string) {},
			"not-a-topic-id", pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, `"not-a-topic-id" is not a valid topic id`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFakeCluster(t, 3, 6)
			c := newClient(t, fc, nil)
			specs := []spec{{topicB, span(0, 5)}, {tc.topic, []int32{7}}}
			bad := Key(group, tc.topic, 7)
			fc.mu.Lock()
			tc.prepare(fc, bad)
			fc.mu.Unlock()
			res, err := everyRPC[2].call(ctxT(t, 10*time.Second), c, specs)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.topic == tc.topic {
					if r.code != tc.wantCode || !strings.Contains(r.msg, tc.wantMsg) {
						t.Errorf("%s %q, want %s with %q", r.code, r.msg, tc.wantCode, tc.wantMsg)
					}
				} else if r.code != pb.ErrorCode_ERROR_CODE_NONE {
					t.Errorf("%+v, want NONE", r)
				}
			}
			if s := c.Stats(); s.Retries != 0 || s.Requests > 3 {
				t.Errorf("stats %+v, want one attempt", s)
			}
		})
	}
}

func injectOn(key string, code pb.ErrorCode) func(int32, string) (pb.ErrorCode, string) {
	return func(_ int32, k string) (pb.ErrorCode, string) {
		if k == key {
			return code, "injected"
		}
		return pb.ErrorCode_ERROR_CODE_NONE, ""
	}
}

// TestNodeDown stops one node: the others serve their keys; the stopped node's keys fail
// retriably until the deadline, or succeed once their leadership moves to a live node. The
// stopped node is the first bootstrap address, so lookups must also go elsewhere.
func TestNodeDown(t *testing.T) {
	for _, moved := range []bool{false, true} {
		t.Run(fmt.Sprintf("leadership_moves=%v", moved), func(t *testing.T) {
			fc := newFakeCluster(t, 3, 6)
			specs := []spec{{topicA, span(0, 11)}}
			keys := keysOf(specs)
			rs := retries{then: func(n int, _ Retry) {
				if moved && n == 1 {
					fc.mu.Lock()
					for p, node := range fc.leader {
						if node == 1 {
							fc.leader[p] = 3
						}
					}
					fc.mu.Unlock()
				}
			}}
			c := newClient(t, fc, func(o *Options) { o.OnRetry = rs.record })
			down := fc.nodesOf(keys)[1]
			if len(down) == 0 {
				t.Fatal("node 1 leads no key of the request")
			}
			fc.nodes[1].stop()
			timeout := 10 * time.Second
			if !moved {
				timeout = 150 * time.Millisecond
			}
			resp, err := c.ReadShareGroupState(ctxT(t, timeout), readRequest(specs))
			if err != nil {
				t.Fatal(err)
			}
			i := 0
			for _, tr := range resp.GetResults() {
				for _, p := range tr.GetPartitions() {
					if !moved && slices.Contains(down, keys[i]) {
						if p.GetErrorCode() != pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE || !strings.Contains(p.GetErrorMessage(), "could not be reached") ||
							p.GetStartOffset() != -1 || p.GetStateEpoch() != 0 || len(p.GetStateBatches()) != 0 {
							t.Errorf("%s: %v, want COORDINATOR_NOT_AVAILABLE naming the unreachable node, with no state", keys[i], p)
						}
					} else if p.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
						t.Errorf("%s: %v, want NONE", keys[i], p)
					}
					i++
				}
			}
			if i != len(keys) {
				t.Fatalf("%d results, want %d", i, len(keys))
			}
		})
	}
}

// TestWholeCallErrors covers the failures that are Go errors rather than per-partition codes.
func TestWholeCallErrors(t *testing.T) {
	denied := status.Error(codes.PermissionDenied, "principal User:CN=x may not call WriteShareGroupState")
	cases := []struct {
		name     string
		prepare  func(t *testing.T, fc *fakeCluster, c *Client) context.Context
		specs    []spec
		wantCode codes.Code
		wantMsg  string
		wantErr  error
	}{
		{"no node reachable", func(t *testing.T, fc *fakeCluster, _ *Client) context.Context {
			for _, n := range fc.nodes {
				n.stop()
			}
			return ctxT(t, 100*time.Millisecond)
		}, []spec{{topicA, span(0, 3)}}, codes.Unavailable, "no coordinatord node answered", nil},
		{"cancelled before anything was sent", func(*testing.T, *fakeCluster, *Client) context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, []spec{{topicA, span(0, 3)}}, codes.Canceled, "", nil},
		{"a state request denied", func(t *testing.T, fc *fakeCluster, _ *Client) context.Context {
			fc.setHook(func(_ int32, method string, _ []string) error {
				if method == "WriteShareGroupState" {
					return denied
				}
				return nil
			})
			return ctxT(t, 10*time.Second)
		}, []spec{{topicA, span(0, 3)}}, codes.PermissionDenied, "principal User:CN=x may not call WriteShareGroupState", nil},
		{"the lookup unauthenticated", func(t *testing.T, fc *fakeCluster, _ *Client) context.Context {
			fc.setHook(func(int32, string, []string) error {
				return status.Error(codes.Unauthenticated, "no client certificate")
			})
			return ctxT(t, 10*time.Second)
		}, []spec{{topicA, span(0, 3)}}, codes.Unauthenticated, "no client certificate", nil},
		{"a partition named twice", func(t *testing.T, _ *fakeCluster, _ *Client) context.Context {
			return ctxT(t, 10*time.Second)
		}, []spec{{topicA, []int32{1, 1}}}, codes.InvalidArgument, "appears twice", nil},
		{"closed client", func(t *testing.T, _ *fakeCluster, c *Client) context.Context {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			return ctxT(t, 10*time.Second)
		}, []spec{{topicA, span(0, 3)}}, codes.Unknown, "", ErrClosed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFakeCluster(t, 3, 6)
			c := newClient(t, fc, nil)
			ctx := tc.prepare(t, fc, c)
			res, err := everyRPC[2].call(ctx, c, tc.specs)
			if err == nil {
				t.Fatalf("no error; results %v", res)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if st := status.Convert(err); tc.wantErr == nil && (st.Code() != tc.wantCode || !strings.Contains(st.Message(), tc.wantMsg)) {
				t.Fatalf("error %v, want %s with %q", err, tc.wantCode, tc.wantMsg)
			}
			if sent := fc.sent("WriteShareGroupState"); len(sent) != 0 {
				t.Errorf("writes served: %v", sent)
			}
		})
	}
}

// TestCacheIsBounded uses more keys than the cache holds: it keeps the most recently used ones,
// and a forgotten key costs one more lookup.
func TestCacheIsBounded(t *testing.T) {
	fc := newFakeCluster(t, 3, 6)
	c := newClient(t, fc, func(o *Options) { o.CacheSize = 4 })
	ctx := ctxT(t, 10*time.Second)
	read := func(p int32) {
		t.Helper()
		res, err := everyRPC[1].call(ctx, c, []spec{{topicA, []int32{p}}})
		if err != nil || res[0].code != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("read partition %d: %v %v", p, res, err)
		}
	}
	for p := range int32(10) {
		read(p)
	}
	if n := c.routes.cachedKeys(); n != 4 {
		t.Errorf("%d keys cached, want 4", n)
	}
	steps := []struct {
		partition   int32
		wantLookups uint64
	}{
		{9, 0}, // among the last four: 9 8 7 6, most recent first
		{6, 0}, // 6 9 8 7
		{0, 1}, // forgotten; 7 goes: 0 6 9 8
		{7, 1}, // 8 goes: 7 0 6 9
		{9, 0}, // 9 7 0 6
		{8, 1}, // 6 goes: 8 9 7 0
		{0, 0},
	}
	for _, s := range steps {
		before := c.Stats().Lookups
		read(s.partition)
		if d := c.Stats().Lookups - before; d != s.wantLookups {
			t.Errorf("read of partition %d made %d lookups, want %d", s.partition, d, s.wantLookups)
		}
	}
}

// TestConcurrentCallsWhileLeadersMove runs many calls at once through one client while every
// seventh state request moves the leadership of a state partition: every call still gets every
// partition answered NONE, in request order.
func TestConcurrentCallsWhileLeadersMove(t *testing.T) {
	fc := newFakeCluster(t, 3, 6)
	c := newClient(t, fc, nil)
	var requests atomic.Int64
	fc.setHook(func(node int32, method string, _ []string) error {
		if method == "FindCoordinator" {
			return nil
		}
		if n := requests.Add(1); n%7 == 0 {
			p := int32(n/7) % 6
			fc.mu.Lock()
			fc.leader[p] = fc.leader[p]%3 + 1
			fc.mu.Unlock()
		}
		return nil
	})
	ctx := ctxT(t, 30*time.Second)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			specs := []spec{{topicA, span(int32(g), int32(g)+4)}, {topicB, []int32{int32(g)}}}
			for i := range 30 {
				res, err := everyRPC[(g+i)%len(everyRPC)].call(ctx, c, specs)
				if err != nil {
					t.Errorf("goroutine %d call %d: %v", g, i, err)
					return
				}
				want := wantOrder{{topicA, span(int32(g), int32(g)+4)}, {topicB, []int32{int32(g)}}}.flat()
				for j, r := range res {
					if r.topic != want[j].topic || r.partition != want[j].partition || r.code != pb.ErrorCode_ERROR_CODE_NONE {
						t.Errorf("goroutine %d call %d result %d: %+v, want %s %d NONE", g, i, j, r, want[j].topic, want[j].partition)
					}
				}
			}
		})
	}
	wg.Wait()
	if s := c.Stats(); s.Calls != 16*30 || s.Redirects == 0 {
		t.Errorf("stats %+v, want %d calls and some redirects", s, 16*30)
	}
}

// TestOwnerAndFindCoordinator checks Owner and FindCoordinator against the scripted leaders.
func TestOwnerAndFindCoordinator(t *testing.T) {
	fc := newFakeCluster(t, 3, 6)
	c := newClient(t, fc, nil)
	ctx := ctxT(t, 10*time.Second)
	key := Key(group, topicA, 4)
	o, err := c.Owner(ctx, group, topicA, 4)
	if err != nil {
		t.Fatal(err)
	}
	leader := fc.leaderOf(key)
	if want := (Owner{Key: key, StatePartition: fc.partitionOf(key), NodeID: leader, Address: fc.nodes[leader].addr}); o != want {
		t.Errorf("owner %+v, want %+v", o, want)
	}
	if _, err := c.Owner(ctx, group, topicA, 4); err != nil || c.Stats().Lookups != 1 {
		t.Errorf("a second Owner: %v, %d lookups; want the cache's answer", err, c.Stats().Lookups)
	}

	fc.setLeader(fc.partitionOf(key), 0)
	var le *LookupError
	other := int32(0)
	for fc.partitionOf(Key(group, topicB, other)) != fc.partitionOf(key) {
		other++
	}
	if _, err := c.Owner(ctx, group, topicB, other); !errors.As(err, &le) || le.Code != pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE {
		t.Errorf("owner of a key without a leader: %v, want a COORDINATOR_NOT_AVAILABLE LookupError", err)
	}

	resp, err := c.FindCoordinator(ctx, []string{key, "g1:nope:0"})
	if err != nil {
		t.Fatal(err)
	}
	cos := resp.GetCoordinators()
	if len(cos) != 2 || cos[0].GetErrorCode() != pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE || cos[1].GetErrorCode() != pb.ErrorCode_ERROR_CODE_INVALID_REQUEST {
		t.Errorf("FindCoordinator answered %v, want the node's answers as they are", cos)
	}
}

// TestNewChecksOptions rejects options that cannot work.
func TestNewChecksOptions(t *testing.T) {
	creds := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"no bootstrap", Options{DialOptions: creds}, "Bootstrap must name"},
		{"not host:port", Options{Bootstrap: []string{"localhost"}, DialOptions: creds}, "not host:port"},
		{"no port", Options{Bootstrap: []string{"localhost:"}, DialOptions: creds}, "not host:port"},
		{"max below initial", Options{Bootstrap: []string{"localhost:7070"}, DialOptions: creds,
			RetryBackoff: Backoff{Initial: time.Second, Max: time.Millisecond}}, "below RetryBackoff.Initial"},
		{"negative", Options{Bootstrap: []string{"localhost:7070"}, DialOptions: creds, CallTimeout: -1}, "must not be negative"},
		{"no transport credentials", Options{Bootstrap: []string{"localhost:7070"}}, "transport"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.opts)
			if err == nil {
				_ = c.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
		})
	}
	c, err := New(Options{Bootstrap: []string{"localhost:7070"}, DialOptions: creds})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if o := c.opts; o.CallTimeout != DefaultCallTimeout || o.CacheSize != DefaultCacheSize ||
		o.RetryBackoff != (Backoff{DefaultInitialBackoff, DefaultMaxBackoff}) {
		t.Errorf("defaults %+v", o)
	}
}

// TestBackoffStaysInItsBounds draws many waits for each retry number.
func TestBackoffStaysInItsBounds(t *testing.T) {
	b := Backoff{Initial: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	cases := []struct {
		retry    int
		min, max time.Duration
	}{
		{1, 5 * time.Millisecond, 10 * time.Millisecond},
		{2, 10 * time.Millisecond, 20 * time.Millisecond},
		{3, 20 * time.Millisecond, 40 * time.Millisecond},
		{4, 40 * time.Millisecond, 80 * time.Millisecond},
		{5, 40 * time.Millisecond, 80 * time.Millisecond},
		{100, 40 * time.Millisecond, 80 * time.Millisecond},
	}
	for _, tc := range cases {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := b.wait(tc.retry)
			if d < tc.min || d > tc.max {
				t.Fatalf("retry %d waited %v, want [%v, %v]", tc.retry, d, tc.min, tc.max)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("retry %d always waited the same: no jitter", tc.retry)
		}
	}
}

// TestRoutesForgetOnlyTheStaleLeader checks that a refusal from an old leader does not undo a
// newer answer.
func TestRoutesForgetOnlyTheStaleLeader(t *testing.T) {
	r := newRoutes(2)
	r.learn("k", 3, node{id: 2, addr: "b:1"})
	r.forget(3, "a:1") // a refusal from a node that no longer leads, arriving late
	if n, ok := r.leader(3); !ok || n.addr != "b:1" {
		t.Fatalf("leader %v %v, want b:1 kept", n, ok)
	}
	r.forget(3, "b:1")
	if _, ok := r.leader(3); ok {
		t.Fatal("leader kept after its own refusal")
	}
	if p, ok := r.partition("k"); !ok || p != 3 {
		t.Fatalf("partition %d %v, want 3: a key's partition never changes", p, ok)
	}
}
