package client

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// oneInFlight makes a client keep one request per lane outstanding, so that a held request
// makes every later call wait.
func oneInFlight(o *Options) { o.InFlightPerNode = 1 }

// waiting is how many calls wait in the lane for a request.
func (l *lane[Q, T, P, S, U, R]) waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// waitingCalls sums the waiting calls of every lane of c.
func waitingCalls(c *Client) int {
	c.lanesMu.Lock()
	defer c.lanesMu.Unlock()
	n := 0
	for _, l := range c.lanes {
		n += l.(interface{ waiting() int }).waiting()
	}
	return n
}

// gate holds the first state requests of a method on the fake nodes until it is opened, so that
// calls made meanwhile queue behind them.
type gate struct {
	method  string
	arrived chan struct{} // closed when the requests to hold are held
	open    chan struct{}
	once    sync.Once
	refuse  func(keys []string) error // for the requests after the held ones; nil passes them
}

// newGate holds the first request of method; newGateOf the first hold requests.
func newGate(fc *fakeCluster, method string) *gate { return newGateOf(fc, method, 1) }

func newGateOf(fc *fakeCluster, method string, hold int) *gate {
	g := &gate{method: method, arrived: make(chan struct{}), open: make(chan struct{})}
	seen := 0
	var mu sync.Mutex
	fc.setHook(func(_ int32, m string, keys []string) error {
		if m != g.method {
			return nil
		}
		mu.Lock()
		seen++
		n := seen
		refuse := g.refuse
		mu.Unlock()
		if n <= hold {
			if n == hold {
				close(g.arrived)
			}
			<-g.open
			return nil
		}
		if refuse != nil {
			return refuse(keys)
		}
		return nil
	})
	return g
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// eventually waits until cond holds, failing the test after 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// asyncWrite starts a write of the partitions of topicA and returns where its flattened answer
// (or error) will arrive.
func asyncWrite(ctx context.Context, c *Client, parts ...int32) <-chan writeOutcome {
	out := make(chan writeOutcome, 1)
	go func() {
		res, err := via((*Client).WriteShareGroupState, writeRequest)(ctx, c, []spec{{topicA, parts}})
		out <- writeOutcome{res, err}
	}()
	return out
}

type writeOutcome struct {
	res []got
	err error
}

// requestKeys returns the keys of each request of method the fake cluster served, in order.
func requestKeys(fc *fakeCluster, method string) [][]string {
	var out [][]string
	for _, c := range fc.callsTo(1, method) {
		out = append(out, slices.Sorted(slices.Values(c.keys)))
	}
	return out
}

// TestConcurrentWritesAreCoalesced holds one write on the node and checks that the writes made
// meanwhile go out as one request, each caller getting exactly its own partitions' answers (one
// of them an error the node gave).
func TestConcurrentWritesAreCoalesced(t *testing.T) {
	fc := newFakeCluster(t, 1, 4)
	fc.setFault(injectOn(Key(group, topicA, 3), pb.ErrorCode_ERROR_CODE_FENCED_STATE_EPOCH))
	g := newGate(fc, "WriteShareGroupState")
	c := newClient(t, fc, oneInFlight)
	ctx := ctxT(t, 10*time.Second)

	first := asyncWrite(ctx, c, 0)
	<-g.arrived
	var later []<-chan writeOutcome
	for _, parts := range [][]int32{{1}, {2, 3}, {4}, {5, 6, 7}} {
		later = append(later, asyncWrite(ctx, c, parts...))
	}
	eventually(t, "four calls wait", func() bool { return waitingCalls(c) == 4 })
	g.release()

	if o := <-first; o.err != nil || len(o.res) != 1 || o.res[0].partition != 0 || o.res[0].code != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("first write: %+v, %v", o.res, o.err)
	}
	want := [][]int32{{1}, {2, 3}, {4}, {5, 6, 7}}
	for i, ch := range later {
		o := <-ch
		if o.err != nil {
			t.Fatalf("write %v: %v", want[i], o.err)
		}
		var parts []int32
		for _, r := range o.res {
			parts = append(parts, r.partition)
			wantCode := pb.ErrorCode_ERROR_CODE_NONE
			if r.partition == 3 {
				wantCode = pb.ErrorCode_ERROR_CODE_FENCED_STATE_EPOCH
			}
			if r.code != wantCode || r.topic != topicA {
				t.Errorf("write %v: partition %d answered %v (topic %s), want %v", want[i], r.partition, r.code, r.topic, wantCode)
			}
		}
		if !slices.Equal(parts, want[i]) {
			t.Errorf("write %v answered partitions %v", want[i], parts)
		}
	}
	reqs := requestKeys(fc, "WriteShareGroupState")
	if len(reqs) != 2 || len(reqs[1]) != 7 {
		t.Fatalf("requests: %v; want the held one and one of the 7 partitions that waited", reqs)
	}
	if s := c.Stats(); s.Calls != 5 || s.Requests != 2 || s.Coalesced != 4 {
		t.Errorf("stats %+v: want 5 calls, 2 requests, 4 coalesced", s)
	}
	for p := int32(0); p <= 7; p++ {
		if s, ok := fc.stored(Key(group, topicA, p)); p != 3 && (!ok || s.writes != 1) {
			t.Errorf("partition %d stored %+v (%v), want one write", p, s, ok)
		}
	}
}

// TestCoalescingNeverNamesAPartitionTwice queues two writes of one partition: they go in two
// requests, and both are applied.
func TestCoalescingNeverNamesAPartitionTwice(t *testing.T) {
	fc := newFakeCluster(t, 1, 4)
	g := newGate(fc, "WriteShareGroupState")
	c := newClient(t, fc, oneInFlight)
	ctx := ctxT(t, 10*time.Second)

	first := asyncWrite(ctx, c, 0)
	<-g.arrived
	a := asyncWrite(ctx, c, 1, 2)
	eventually(t, "one call waits", func() bool { return waitingCalls(c) == 1 })
	b := asyncWrite(ctx, c, 1)
	d := asyncWrite(ctx, c, 3)
	eventually(t, "three calls wait", func() bool { return waitingCalls(c) == 3 })
	g.release()
	for _, ch := range []<-chan writeOutcome{first, a, b, d} {
		if o := <-ch; o.err != nil {
			t.Fatal(o.err)
		}
	}
	reqs := requestKeys(fc, "WriteShareGroupState")
	want := [][]string{
		{Key(group, topicA, 0)},
		{Key(group, topicA, 1), Key(group, topicA, 2), Key(group, topicA, 3)},
		{Key(group, topicA, 1)},
	}
	if !slices.EqualFunc(reqs, want, slices.Equal) {
		t.Fatalf("requests %v, want %v", reqs, want)
	}
	if s, _ := fc.stored(Key(group, topicA, 1)); s.writes != 2 {
		t.Errorf("partition 1 was written %d times, want 2", s.writes)
	}
}

// TestWaitingCallEndsWithItsContext lets a waiting call's deadline pass: it returns at its
// deadline, saying so, and its partition is never sent.
func TestWaitingCallEndsWithItsContext(t *testing.T) {
	fc := newFakeCluster(t, 1, 4)
	g := newGate(fc, "WriteShareGroupState")
	c := newClient(t, fc, oneInFlight)
	ctx := ctxT(t, 10*time.Second)

	first := asyncWrite(ctx, c, 0)
	<-g.arrived
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	o := <-asyncWrite(short, c, 1)
	if o.err != nil || len(o.res) != 1 || o.res[0].code != pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT {
		t.Fatalf("the waiting write answered %+v, %v; want REQUEST_TIMED_OUT", o.res, o.err)
	}
	if n := waitingCalls(c); n != 0 {
		t.Fatalf("%d calls still wait after their context ended", n)
	}
	g.release()
	if o := <-first; o.err != nil {
		t.Fatal(o.err)
	}
	// The lane is free again: the next write goes at once.
	if o := <-asyncWrite(ctx, c, 2); o.err != nil || o.res[0].code != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("write after: %+v, %v", o.res, o.err)
	}
	if n := fc.sent("WriteShareGroupState")[Key(group, topicA, 1)]; n != 0 {
		t.Errorf("the abandoned partition was sent %d times", n)
	}
}

// TestCoalescedRequestRefusedForSizeIsSplit plays a node that accepts one partition per request:
// the coalesced request it refuses is sent again one call per request, every call succeeds, and
// the lane stays below the size that was refused.
func TestCoalescedRequestRefusedForSizeIsSplit(t *testing.T) {
	fc := newFakeCluster(t, 1, 4)
	g := newGate(fc, "WriteShareGroupState")
	g.refuse = func(keys []string) error {
		if len(keys) > 1 {
			return status.Errorf(codes.InvalidArgument, "the request names %d partitions; at most 1 are allowed per request", len(keys))
		}
		return nil
	}
	c := newClient(t, fc, oneInFlight)
	ctx := ctxT(t, 10*time.Second)

	first := asyncWrite(ctx, c, 0)
	<-g.arrived
	var later []<-chan writeOutcome
	for p := int32(1); p <= 4; p++ {
		later = append(later, asyncWrite(ctx, c, p))
	}
	eventually(t, "four calls wait", func() bool { return waitingCalls(c) == 4 })
	g.release()
	for _, ch := range append(later, first) {
		if o := <-ch; o.err != nil || o.res[0].code != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("write: %+v, %v", o.res, o.err)
		}
	}
	for _, r := range requestKeys(fc, "WriteShareGroupState") {
		if len(r) != 1 {
			t.Errorf("a request of %d partitions was served", len(r))
		}
	}
	if n := len(fc.callsTo(1, "WriteShareGroupState")); n != 5 {
		t.Errorf("%d requests served, want 5", n)
	}
	// What the refusal taught outlives the lane, which left with its last request.
	eventually(t, "the lane leaves the client", func() bool {
		c.lanesMu.Lock()
		defer c.lanesMu.Unlock()
		return len(c.lanes) == 0
	})
	l := laneOf(c, &writeRPC, laneKey{addr: fc.addrs()[0], method: "WriteShareGroupState", group: group})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.maxParts != 2 {
		t.Errorf("after a refused request of 4 partitions the lane allows %d, want 2", l.maxParts)
	}
}

// TestCallsGoAloneWithoutCoalescing checks the two ways a call's request is sent at once while
// another is held: coalescing turned off, and a context carrying outgoing metadata.
func TestCallsGoAloneWithoutCoalescing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inFlight int
		ctx      func(context.Context) context.Context
	}{
		{"coalescing off", -1, func(ctx context.Context) context.Context { return ctx }},
		{"outgoing metadata", 1, func(ctx context.Context) context.Context {
			return metadata.AppendToOutgoingContext(ctx, "trace-id", "t1")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFakeCluster(t, 1, 4)
			g := newGate(fc, "WriteShareGroupState")
			c := newClient(t, fc, func(o *Options) { o.InFlightPerNode = tc.inFlight })
			ctx := ctxT(t, 10*time.Second)
			first := asyncWrite(ctx, c, 0)
			<-g.arrived
			if o := <-asyncWrite(tc.ctx(ctx), c, 1); o.err != nil || o.res[0].code != pb.ErrorCode_ERROR_CODE_NONE {
				t.Fatalf("write while another is held: %+v, %v", o.res, o.err)
			}
			g.release()
			if o := <-first; o.err != nil {
				t.Fatal(o.err)
			}
			if s := c.Stats(); s.Requests != 2 || s.Coalesced != 0 {
				t.Errorf("stats %+v: want 2 requests, none coalesced", s)
			}
		})
	}
}

// TestCoalescedReads checks that reads coalesce too, each caller getting its own partitions'
// state, while initializations (not coalesced, as in Kafka) go at once.
func TestCoalescedReads(t *testing.T) {
	fc := newFakeCluster(t, 1, 4)
	c := newClient(t, fc, oneInFlight)
	ctx := ctxT(t, 10*time.Second)
	if _, err := via((*Client).WriteShareGroupState, writeRequest)(ctx, c, []spec{{topicA, span(0, 5)}}); err != nil {
		t.Fatal(err)
	}
	g := newGate(fc, "ReadShareGroupState")
	read := func(parts ...int32) <-chan *pb.ReadShareGroupStateResponse {
		out := make(chan *pb.ReadShareGroupStateResponse, 1)
		go func() {
			resp, err := c.ReadShareGroupState(ctx, readRequest([]spec{{topicA, parts}}))
			if err != nil {
				t.Error(err)
			}
			out <- resp
		}()
		return out
	}
	first := read(0)
	<-g.arrived
	a, b := read(1, 2), read(5)
	eventually(t, "two reads wait", func() bool { return waitingCalls(c) == 2 })
	if _, err := via((*Client).InitializeShareGroupState, initializeRequest)(ctx, c, []spec{{topicB, []int32{0}}}); err != nil {
		t.Fatalf("initialize while a read is held: %v", err)
	}
	g.release()
	<-first
	for _, tc := range []struct {
		ch    <-chan *pb.ReadShareGroupStateResponse
		parts []int32
	}{{a, []int32{1, 2}}, {b, []int32{5}}} {
		resp := <-tc.ch
		if len(resp.GetResults()) != 1 {
			t.Fatalf("read %v: %v", tc.parts, resp)
		}
		var parts []int32
		for _, p := range resp.GetResults()[0].GetPartitions() {
			parts = append(parts, p.GetPartition())
			if len(p.GetStateBatches()) != 1 || p.GetStateBatches()[0].GetFirstOffset() != int64(p.GetPartition()) {
				t.Errorf("read %v: partition %d holds %v", tc.parts, p.GetPartition(), p.GetStateBatches())
			}
		}
		if !slices.Equal(parts, tc.parts) {
			t.Errorf("read %v answered %v", tc.parts, parts)
		}
	}
	if n := len(fc.callsTo(1, "ReadShareGroupState")); n != 2 {
		t.Errorf("%d read requests, want 2", n)
	}
}

// TestInFlightBound holds two requests of a client allowed two (the second goes once the first
// stalled): a third call waits, and goes once one of them returns. A client's default bound is
// DefaultInFlightPerNode.
func TestInFlightBound(t *testing.T) {
	fc := newFakeCluster(t, 1, 4)
	g := newGateOf(fc, "WriteShareGroupState", 2)
	c := newClient(t, fc, func(o *Options) { o.InFlightPerNode = 2 })
	ctx := ctxT(t, 10*time.Second)
	a, b := asyncWrite(ctx, c, 0), asyncWrite(ctx, c, 1)
	<-g.arrived
	third := asyncWrite(ctx, c, 2)
	eventually(t, "the third call waits", func() bool { return waitingCalls(c) == 1 })
	g.release()
	for _, ch := range []<-chan writeOutcome{a, b, third} {
		if o := <-ch; o.err != nil || o.res[0].code != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("write: %+v, %v", o.res, o.err)
		}
	}
	if n := len(fc.callsTo(1, "WriteShareGroupState")); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	if d := newClient(t, fc, nil); d.opts.InFlightPerNode != DefaultInFlightPerNode {
		t.Errorf("default bound %d, want %d", d.opts.InFlightPerNode, DefaultInFlightPerNode)
	}
}

// Before a finished request's place goes to the waiters, the lane lets the calls it answered
// join: it yields as long as waiters keep joining, at most regatherYields times.
func TestFinishedRequestLetsItsCallersJoin(t *testing.T) {
	fc := newFakeCluster(t, 1, 4)
	c := newClient(t, fc, oneInFlight)
	l := laneOf(c, &writeRPC, laneKey{addr: fc.addrs()[0], method: "WriteShareGroupState", group: group})
	join := func() {
		l.mu.Lock()
		l.pending = append(l.pending, &waiter[*pb.WriteStatePartition, *pb.PartitionResult]{})
		l.mu.Unlock()
	}
	yields := 0
	l.regather(func() {
		yields++
		if yields <= 2 { // two callers come back, then nothing more
			join()
		}
	})
	if yields != 3 {
		t.Errorf("the lane yielded %d times, want 3 (until a yield brought no waiter)", yields)
	}
	yields = 0
	l.regather(func() { yields++; join() })
	if yields != regatherYields {
		t.Errorf("with waiters always joining the lane yielded %d times, want %d", yields, regatherYields)
	}
}

// outstanding is how many requests the lane has out.
func (l *lane[Q, T, P, S, U, R]) outstanding() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight
}

// A lane keeps one request out while it answers in its usual time: a second call waits for it,
// even below the bound, and goes in a request of its own only once the first has been out for
// stallFactor times the lane's round trip.
func TestStalledRequestLetsTheWaitingCallsGo(t *testing.T) {
	fc := newFakeCluster(t, 1, 4)
	g := newGateOf(fc, "WriteShareGroupState", 2)
	c := newClient(t, fc, func(o *Options) { o.InFlightPerNode = 4 })
	l := laneOf(c, &writeRPC, laneKey{addr: fc.addrs()[0], method: "WriteShareGroupState", group: group})
	const rtt = 50 * time.Millisecond
	l.mu.Lock()
	l.rtt = rtt
	l.mu.Unlock()
	ctx := ctxT(t, 10*time.Second)
	began := time.Now()
	a := asyncWrite(ctx, c, 0)
	eventually(t, "the first request is out", func() bool { return l.outstanding() == 1 })
	b := asyncWrite(ctx, c, 1)
	eventually(t, "the second call waits for the first request", func() bool { return waitingCalls(c) == 1 })
	<-g.arrived
	if waited := time.Since(began); waited < stallFactor*rtt {
		t.Errorf("the second request went out %v after the first, before it stalled (%v)", waited, stallFactor*rtt)
	}
	if n := l.outstanding(); n != 2 {
		t.Errorf("%d requests out, want 2", n)
	}
	g.release()
	for _, ch := range []<-chan writeOutcome{a, b} {
		if o := <-ch; o.err != nil || o.res[0].code != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("write: %+v, %v", o.res, o.err)
		}
	}
	if got := requestKeys(fc, "WriteShareGroupState"); len(got) != 2 {
		t.Errorf("requests %v, want one per call", got)
	}
}

// The lane's round trip is smoothed over answered requests; a failed one, which may have waited
// out a whole attempt timeout, does not raise the point at which the lane calls a request
// stalled.
func TestLaneRoundTrip(t *testing.T) {
	fc := newFakeCluster(t, 1, 4)
	c := newClient(t, fc, nil)
	l := laneOf(c, &writeRPC, laneKey{addr: fc.addrs()[0], method: "WriteShareGroupState", group: group})
	l.mu.Lock()
	defer l.mu.Unlock()
	if got := l.stallAfter(); got != minStall {
		t.Errorf("stall after %v with no round trip measured, want %v", got, minStall)
	}
	l.observeLocked(8 * time.Millisecond)
	l.observeLocked(0) // failed
	if l.rtt != 8*time.Millisecond {
		t.Errorf("round trip %v after one answer of 8ms and a failure, want 8ms", l.rtt)
	}
	l.observeLocked(16 * time.Millisecond)
	if l.rtt != 9*time.Millisecond {
		t.Errorf("round trip %v after 8ms then 16ms, want 9ms (weight 1/8)", l.rtt)
	}
	if got := l.stallAfter(); got != stallFactor*9*time.Millisecond {
		t.Errorf("stall after %v, want %v", got, stallFactor*9*time.Millisecond)
	}
}
