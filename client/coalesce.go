package client

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// Coalescing, as Kafka's share persister does it: the requests of one method that concurrent
// calls send to one node for one group go through a lane. A lane keeps one request outstanding;
// a call that finds it out waits, and when it comes back, everything that waited meanwhile goes
// out as one request. At one call in flight nothing ever waits; under load, a request carries
// the work of many calls, and the per-request cost on both ends (the RPC, its frames, its
// syscalls) is paid once for all of them. A request that stalls (a lossy link, a node busy
// with a sync) must not hold back every call of its group, so while the newest request has been
// out longer than stallFactor times the lane's usual round trip, the waiting calls go out in
// another one, up to Options.InFlightPerNode outstanding.

// maxCoalescedPartitions bounds the partitions one coalesced request names, far below the
// server's default max.partitions.per.request (5000) and the default 4 MiB message limit for
// the share-state shapes. A lower limit configured on the server is learned from its refusals.
const maxCoalescedPartitions = 500

// A lane's request is stalled once it has been out for stallFactor times the lane's smoothed
// round trip, and never before minStall (the first requests, with no round trip measured yet,
// wait that long).
const (
	stallFactor = 2
	minStall    = time.Millisecond
)

// laneKey names a lane: requests of one method to one node for one group.
type laneKey struct {
	addr, method, group string
}

// partLimitKey names what a refused request taught: the partitions a node takes in one request
// of a method, whatever the group.
type partLimitKey struct {
	addr, method string
}

// lane coalesces the requests of one laneKey.
type lane[Q request[T, P], T topic[P], P partition, S response[U], U topic[R], R result] struct {
	c   *Client
	rpc *rpc[Q, T, P, S, U, R]
	key laneKey

	mu       sync.Mutex
	inFlight int             // requests outstanding
	pending  []*waiter[P, R] // calls waiting for a request, in arrival order
	maxParts int             // partitions one coalesced request may name
	sentAt   time.Time       // when the newest request went out
	rtt      time.Duration   // the smoothed round trip of the lane's requests; zero: none yet
	// stall sends what waits once the newest request stalled; armed while it is set to.
	stall *time.Timer
	armed bool
	// gone: the lane went idle and left the client's map (a client talking to many groups
	// keeps lanes only for those with requests out); a call that got it first takes a new one.
	gone bool
}

// waiter is one call's part of a request: its partitions, and their answers once they came.
type waiter[P partition, R result] struct {
	stub     pb.ShareCoordinatorServiceClient
	topics   []string // topics[i] is the topic of parts[i]
	parts    []P
	deadline time.Time // the call's attempt deadline; zero for none
	taken    bool      // in a request already (guarded by lane.mu)
	alone    bool      // joined with a request to spare: its caller sends it

	done chan struct{} // closed once out or err is set
	out  []R
	err  error
}

// coalescible reports whether a call's request may go out together with other calls': a context
// carrying outgoing metadata (a trace, a token) must reach the server with its own request.
func coalescible(ctx context.Context) bool {
	md, ok := metadata.FromOutgoingContext(ctx)
	return !ok || md.Len() == 0
}

// laneOf returns the lane of key, creating it on first use.
func laneOf[Q request[T, P], T topic[P], P partition, S response[U], U topic[R], R result](c *Client, r *rpc[Q, T, P, S, U, R], key laneKey) *lane[Q, T, P, S, U, R] {
	c.lanesMu.Lock()
	defer c.lanesMu.Unlock()
	if l, ok := c.lanes[key]; ok {
		return l.(*lane[Q, T, P, S, U, R])
	}
	l := &lane[Q, T, P, S, U, R]{c: c, rpc: r, key: key, maxParts: maxCoalescedPartitions}
	if n, ok := c.partLimits[partLimitKey{key.addr, key.method}]; ok {
		l.maxParts = n
	}
	c.lanes[key] = l
	return l
}

// coalesce sends one call's partitions (parts[i] of topic topics[i]) through the lane of key and
// returns their answers in the order of parts, or the error of the request that carried them.
func coalesce[Q request[T, P], T topic[P], P partition, S response[U], U topic[R], R result](ctx context.Context, c *Client, r *rpc[Q, T, P, S, U, R],
	key laneKey, stub pb.ShareCoordinatorServiceClient, topics []string, parts []P) ([]R, error) {
	w := &waiter[P, R]{stub: stub, topics: topics, parts: parts, done: make(chan struct{})}
	w.deadline, _ = ctx.Deadline()
	for {
		if l := laneOf(c, r, key); l.join(w) {
			return l.wait(ctx, w)
		}
	}
}

// join adds w to the lane and reports true, unless the lane left the client (then the caller
// takes the client's current one). It sends w at once, in a request of its own, when the lane
// has no request out, or only stalled ones and a request to spare with nothing waiting;
// otherwise w waits for the next coalesced request.
func (l *lane[Q, T, P, S, U, R]) join(w *waiter[P, R]) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone {
		return false
	}
	now := time.Now()
	if l.inFlight == 0 || (len(l.pending) == 0 && l.spareLocked(now)) {
		// Nothing waits: a finished request takes what waited, and so does a stall.
		l.inFlight++
		l.sentAt = now
		w.taken = true
		w.alone = true
		return true
	}
	l.pending = append(l.pending, w)
	l.armLocked(now)
	return true
}

// stallAfter is how long the newest request may be out before the lane sends another. l.mu must
// be held.
func (l *lane[Q, T, P, S, U, R]) stallAfter() time.Duration {
	return max(stallFactor*l.rtt, minStall)
}

// spareLocked reports whether the lane may send another request now: its newest stalled, and it
// has fewer than Options.InFlightPerNode out. l.mu must be held.
func (l *lane[Q, T, P, S, U, R]) spareLocked(now time.Time) bool {
	return l.inFlight < l.c.opts.InFlightPerNode && now.Sub(l.sentAt) >= l.stallAfter()
}

// armLocked sets the stall timer for the calls waiting, if the lane may send another request
// once its newest stalls and the timer is not set already. l.mu must be held.
func (l *lane[Q, T, P, S, U, R]) armLocked(now time.Time) {
	if l.armed || len(l.pending) == 0 || l.inFlight >= l.c.opts.InFlightPerNode {
		return
	}
	l.armed = true
	d := l.sentAt.Add(l.stallAfter()).Sub(now)
	if l.stall == nil {
		l.stall = time.AfterFunc(d, l.stalled)
		return
	}
	l.stall.Reset(d)
}

// stalled runs when the stall timer fires: if the newest request stalled and calls wait, they go
// out as another request (on the timer's goroutine); if a newer request went out since the
// timer was set, it is set again for that one.
func (l *lane[Q, T, P, S, U, R]) stalled() {
	l.mu.Lock()
	l.armed = false
	now := time.Now()
	if len(l.pending) == 0 || !l.spareLocked(now) {
		l.armLocked(now)
		l.mu.Unlock()
		return
	}
	ws := l.take()
	l.inFlight++
	l.sentAt = now
	l.armLocked(now) // for the calls that did not fit in ws
	l.mu.Unlock()
	ctx, cancel := coalescedContext(ws)
	defer cancel()
	l.send(ctx, ws)
}

// wait returns w's answers once its request came back, or ctx's error if ctx ends first (w is
// then never sent, if it was not yet). A waiter that joined with a request to spare is sent
// here, with ctx.
func (l *lane[Q, T, P, S, U, R]) wait(ctx context.Context, w *waiter[P, R]) ([]R, error) {
	if w.alone {
		l.send(ctx, []*waiter[P, R]{w})
		return w.out, w.err
	}
	select {
	case <-w.done:
		return w.out, w.err
	case <-ctx.Done():
		l.mu.Lock()
		if !w.taken {
			for i, p := range l.pending {
				if p == w {
					l.pending = append(l.pending[:i], l.pending[i+1:]...)
					break
				}
			}
		}
		l.mu.Unlock()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// send sends the waiters' partitions as one request with ctx, hands each its answers, and
// passes the request on to what waited meanwhile.
func (l *lane[Q, T, P, S, U, R]) send(ctx context.Context, ws []*waiter[P, R]) {
	// A call sent alone runs its request itself: none of the calls it answers is another
	// goroutine that could join the next one.
	began := time.Now()
	var took time.Duration // the round trip of a request answered; zero for one that failed
	defer func() { l.next(!ws[0].alone, took) }()
	err := l.request(ctx, ws)
	if err == nil {
		took = time.Since(began)
	}
	if err != nil && len(ws) > 1 && refusedForSize(err) {
		// A server with a lower max.partitions.per.request (or message limit) than the lane
		// assumed: send each call alone, as it would have gone uncoalesced, and stay below
		// this size from now on.
		n := 0
		for _, w := range ws {
			n += len(w.parts)
		}
		l.c.lanesMu.Lock()
		l.mu.Lock()
		l.maxParts = max(1, min(l.maxParts, n/2))
		l.c.partLimits[partLimitKey{l.key.addr, l.key.method}] = l.maxParts
		l.mu.Unlock()
		l.c.lanesMu.Unlock()
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Go(func() {
				if err := l.request(ctx, []*waiter[P, R]{w}); err != nil {
					w.err = err
				}
				close(w.done)
			})
		}
		wg.Wait()
		return
	}
	for _, w := range ws {
		if err != nil {
			w.err = err
		}
		close(w.done)
	}
}

// refusedForSize reports whether a coalesced request's failure may be its size: the server's
// partitions-per-request limit (INVALID_ARGUMENT) or a message limit (RESOURCE_EXHAUSTED).
func refusedForSize(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.ResourceExhausted:
		return true
	}
	return false
}

// request sends the waiters' partitions as one request and stores each waiter's answers; it
// returns the request's error, storing nothing.
func (l *lane[Q, T, P, S, U, R]) request(ctx context.Context, ws []*waiter[P, R]) error {
	var topics []string
	var parts []P
	for _, w := range ws {
		topics = append(topics, w.topics...)
		parts = append(parts, w.parts...)
	}
	l.c.stats.requests.Add(1)
	if len(ws) > 1 {
		l.c.stats.coalesced.Add(uint64(len(ws)))
	}
	got, err := l.rpc.exchange(ctx, ws[0].stub, l.key.group, topics, parts)
	if err != nil {
		return err
	}
	at := 0
	for _, w := range ws {
		w.out = got[at : at+len(w.parts) : at+len(w.parts)]
		at += len(w.parts)
	}
	return nil
}

// regatherYields bounds how often a finished request's goroutine lets other goroutines run
// before it takes the next request's waiters.
const regatherYields = 8

// next hands the place of the request that finished (answered after took, or failed: zero) to the
// calls that waited for one, or frees it. The calls a coalesced request answered are runnable, and
// a caller that calls again at once would find the place taken and wait for the whole next
// request: so next first yields the processor (if regather), and again as long as waiters keep
// joining (at most regatherYields times), and the next request carries them too. With nothing else
// runnable a yield returns at once.
func (l *lane[Q, T, P, S, U, R]) next(regather bool, took time.Duration) {
	if regather {
		l.regather(runtime.Gosched)
	}
	l.mu.Lock()
	l.observeLocked(took)
	ws := l.take()
	if len(ws) == 0 {
		l.inFlight--
		idle := l.inFlight == 0 && len(l.pending) == 0
		l.mu.Unlock()
		if idle {
			l.leave()
		}
		return
	}
	now := time.Now()
	l.sentAt = now
	l.armLocked(now) // for the calls that did not fit in ws
	l.mu.Unlock()
	ctx, cancel := coalescedContext(ws)
	go func() {
		defer cancel()
		l.send(ctx, ws)
	}()
}

// observeLocked adds an answered request's round trip to the lane's smoothed one (weight 1/8, as
// TCP's SRTT); a failed request (zero), which may have waited out a whole attempt timeout, does
// not count. l.mu must be held.
func (l *lane[Q, T, P, S, U, R]) observeLocked(took time.Duration) {
	switch {
	case took <= 0:
		return
	case l.rtt == 0:
		l.rtt = took
	default:
		l.rtt += (took - l.rtt) / 8
	}
}

// regather calls yield until a call brought no new waiter, at most regatherYields times.
func (l *lane[Q, T, P, S, U, R]) regather(yield func()) {
	joined := -1
	for range regatherYields {
		l.mu.Lock()
		n := len(l.pending)
		l.mu.Unlock()
		if n == joined {
			return
		}
		joined = n
		yield()
	}
}

// leave takes the lane out of the client's map if it is still idle.
func (l *lane[Q, T, P, S, U, R]) leave() {
	l.c.lanesMu.Lock()
	defer l.c.lanesMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight == 0 && len(l.pending) == 0 && !l.gone {
		l.gone = true
		delete(l.c.lanes, l.key)
	}
}

// take removes from pending the waiters of the next request, in arrival order, and marks them
// taken: as many as fit in maxParts (the first always does), leaving for a later request any
// whose partitions the request already names, so that no partition appears twice in one
// request. l.mu must be held.
func (l *lane[Q, T, P, S, U, R]) take() []*waiter[P, R] {
	type name struct {
		topic     string
		partition int32
	}
	var ws []*waiter[P, R]
	var left []*waiter[P, R]
	named := make(map[name]bool)
	n := 0
	for _, w := range l.pending {
		fits := len(ws) == 0 || n+len(w.parts) <= l.maxParts
		for i, p := range w.parts {
			if named[name{w.topics[i], p.GetPartition()}] {
				fits = false
				break
			}
		}
		if !fits {
			left = append(left, w)
			continue
		}
		for i, p := range w.parts {
			named[name{w.topics[i], p.GetPartition()}] = true
		}
		n += len(w.parts)
		w.taken = true
		ws = append(ws, w)
	}
	l.pending = left
	return ws
}

// coalescedContext is the context of a request carrying several calls: it ends at the latest of
// their deadlines, so that no call's end cuts the others' request short, and has none when one
// of them has none.
func coalescedContext[P partition, R result](ws []*waiter[P, R]) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, w := range ws {
		if w.deadline.IsZero() {
			return context.WithCancel(context.Background())
		}
		if w.deadline.After(last) {
			last = w.deadline
		}
	}
	return context.WithDeadline(context.Background(), last)
}

// exchange sends one request of partitions parts (parts[i] of topic topics[i]) for group and
// returns the answer of each, in the order of parts. A partition the response does not answer
// gets UNKNOWN_SERVER_ERROR.
func (r *rpc[Q, T, P, S, U, R]) exchange(ctx context.Context, stub pb.ShareCoordinatorServiceClient, group string, topics []string, parts []P) ([]R, error) {
	ids, groups := byTopic(topics, allItems(len(parts)), func(i int) P { return parts[i] })
	entries := make([]T, len(ids))
	for j, id := range ids {
		entries[j] = r.topic(id, groups[j])
	}
	resp, err := r.call(stub, ctx, r.request(group, entries))
	if err != nil {
		return nil, err
	}
	type name struct {
		topic     string
		partition int32
	}
	got := make(map[name]R, len(parts))
	for _, t := range resp.GetResults() {
		for _, p := range t.GetPartitions() {
			got[name{t.GetTopicId(), p.GetPartition()}] = p
		}
	}
	out := make([]R, len(parts))
	for i, p := range parts {
		res, ok := got[name{topics[i], p.GetPartition()}]
		if !ok {
			res = r.failed(p.GetPartition(), pb.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR,
				fmt.Sprintf("the coordinator's %s response has no result for topic %s partition %d", r.method, topics[i], p.GetPartition()))
		}
		out[i] = res
	}
	return out, nil
}
