package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// batch is one state call as the retry loop sees it: its partitions are items 0..n-1, in request
// order, and the batch keeps each item's latest answer.
type batch interface {
	// send sends the items idx to stub as one request, stores each item's answer and returns the
	// answers' error codes in the order of idx.
	// addr is the node's address, for coalescing.
	send(ctx context.Context, addr string, stub pb.ShareCoordinatorServiceClient, idx []int) ([]pb.ErrorCode, error)
	// fail stores, as item i's answer, a result carrying code and message.
	fail(i int, code pb.ErrorCode, msg string)
}

// retriable reports whether a per-partition code is worth another attempt.
func retriable(code pb.ErrorCode) bool {
	switch code {
	case pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR,
		pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE,
		pb.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS,
		pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT:
		return true
	}
	return false
}

// wait returns the backoff before retry n (1 for the first): a random duration in [d/2, d] with
// d = min(Initial·2ⁿ⁻¹, Max).
func (b Backoff) wait(n int) time.Duration {
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	half := d / 2
	return half + rand.N(d-half+1)
}

// call is the state of one state call across its attempts.
type call struct {
	c      *Client
	method string
	keys   []string // coordinator key of each item
	b      batch

	part []int32        // each item's state partition, -1 until known
	last []pb.ErrorCode // each item's latest code; NONE until it has an answer

	delivered   bool   // a state request may have reached a node
	reached     bool   // some node answered some request
	unreachable error  // the latest failure to reach any node
	prefer      string // the node to ask FindCoordinator first: the latest to answer NOT_COORDINATOR
}

// run makes one state call: it sends each item to the leader of its key's state partition,
// retries the items that fail retriably until the call's deadline and leaves every item's final
// answer in b. It returns an error only for a failure of the whole call.
func (c *Client) run(ctx context.Context, method string, keys []string, b batch) error {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	if ended(ctx) {
		return endedError(ctx)
	}
	c.stats.calls.Add(1)
	k := &call{c: c, method: method, keys: keys, b: b,
		part: make([]int32, len(keys)), last: make([]pb.ErrorCode, len(keys))}
	for i := range k.part {
		k.part[i] = -1
	}
	todo := allItems(len(keys))
	backoffs := 0        // retries that waited
	redirecting := false // the previous retry was for NOT_COORDINATOR answers only
	for attempt := 2; ; attempt++ {
		retry, err := k.attempt(ctx, todo)
		if err != nil {
			return err
		}
		if len(retry) == 0 {
			return nil
		}
		todo = retry
		if ended(ctx) {
			return k.finish(ctx, todo)
		}
		r := Retry{Method: method, Attempt: attempt, Partitions: len(todo), Codes: make(map[pb.ErrorCode]int)}
		for _, i := range todo {
			r.Codes[k.last[i]]++
		}
		// A NOT_COORDINATOR is followed at once: the lookup that follows it knows the new leader.
		// Redirects in a row back off like any other error, so a leader that keeps moving (or a
		// node with a stale view) is not hammered.
		onlyRedirects := r.Codes[pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR] == len(todo)
		if !onlyRedirects || redirecting {
			backoffs++
			r.Backoff = c.opts.RetryBackoff.wait(backoffs)
		}
		redirecting = onlyRedirects
		if deadline, _ := ctx.Deadline(); time.Until(deadline) <= r.Backoff {
			return k.finish(ctx, todo)
		}
		c.stats.retries.Add(1)
		c.stats.retried.Add(uint64(len(todo)))
		c.stats.redirects.Add(uint64(r.Codes[pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR]))
		c.logger.Debug("retrying partitions", zap.String("method", method), zap.Int("attempt", attempt),
			zap.Int("partitions", len(todo)), zap.Duration("backoff", r.Backoff), zap.Any("codes", r.Codes))
		if c.opts.OnRetry != nil {
			c.opts.OnRetry(r)
		}
		if r.Backoff > 0 {
			t := time.NewTimer(r.Backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return k.finish(ctx, todo)
			}
		}
	}
}

// finish ends a call whose items todo still fail retriably when its time is up. They keep their
// latest answers, unless nothing was sent at all: then the call fails as a whole, with the
// caller's cancellation or with the failure to reach any node. An item the call never got to
// send (its leader's lookup was cut short) answers REQUEST_TIMED_OUT.
func (k *call) finish(ctx context.Context, todo []int) error {
	if !k.delivered {
		if errors.Is(ctx.Err(), context.Canceled) {
			return endedError(ctx)
		}
		if !k.reached {
			if k.unreachable != nil {
				return k.unreachable
			}
			return endedError(ctx)
		}
	}
	for _, i := range todo {
		if k.last[i] == pb.ErrorCode_ERROR_CODE_NONE {
			k.b.fail(i, pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT, "the call ended before this partition could be sent")
		}
	}
	k.c.stats.exhausted.Add(uint64(len(todo)))
	k.c.logger.Debug("call ended with partitions failing retriably", zap.String("method", k.method), zap.Int("partitions", len(todo)))
	return nil
}

// attempt routes the items todo to their leaders, sends one request per leader concurrently and
// returns the items to try again. An error fails the whole call.
func (k *call) attempt(ctx context.Context, todo []int) ([]int, error) {
	byNode, retry, err := k.route(ctx, todo)
	if err != nil {
		return nil, err
	}
	if ended(ctx) { // the lookup ran out of time: there is nothing left to send with
		for _, idx := range byNode {
			retry = append(retry, idx...)
		}
		slices.Sort(retry)
		return retry, nil
	}
	addrs := make([]string, 0, len(byNode))
	for a := range byNode {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	type outcome struct {
		codes []pb.ErrorCode
		err   error
	}
	outs := make([]outcome, len(addrs))
	send := func(j int) {
		idx := byNode[addrs[j]]
		stub, err := k.c.stub(addrs[j])
		if err != nil {
			outs[j].err = err
			return
		}
		actx, cancel := k.c.attemptContext(ctx)
		defer cancel()
		outs[j].codes, outs[j].err = k.b.send(actx, addrs[j], stub, idx)
	}
	if len(addrs) == 1 {
		send(0)
	} else {
		var wg sync.WaitGroup
		for j := range addrs {
			wg.Go(func() { send(j) })
		}
		wg.Wait()
	}
	var fatal error
	for j, addr := range addrs {
		idx := byNode[addr]
		if err := outs[j].err; err != nil {
			if again, ferr := k.failed(ctx, addr, idx, err); ferr != nil {
				fatal = cmp.Or(fatal, ferr)
			} else {
				retry = append(retry, again...)
			}
			continue
		}
		k.reached, k.delivered = true, true
		for n, i := range idx {
			code := outs[j].codes[n]
			k.last[i] = code
			if !retriable(code) {
				continue
			}
			switch code {
			case pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR:
				k.prefer = addr
				k.c.routes.forget(k.part[i], addr)
			case pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE:
				// In a cluster this is a node without a leader for the partition; another node
				// may be elected, so ask again who leads.
				k.c.routes.forget(k.part[i], addr)
			}
			retry = append(retry, i)
		}
	}
	if fatal != nil {
		return nil, fatal
	}
	slices.Sort(retry)
	return retry, nil
}

// failed handles a request to addr for the items idx that failed as a whole with err. It returns
// the items to retry, or the error that fails the call.
func (k *call) failed(ctx context.Context, addr string, idx []int, err error) ([]int, error) {
	switch {
	case ended(ctx):
		// The call's own deadline or cancellation cut the request: it may have been applied. An
		// item that failed before keeps that error, which says more than the cut.
		k.delivered = true
		for _, i := range idx {
			if k.last[i] == pb.ErrorCode_ERROR_CODE_NONE {
				k.b.fail(i, pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT,
					fmt.Sprintf("node %s did not answer before the call ended (%v); the operation may still be applied", addr, status.Convert(endedError(ctx)).Message()))
				k.last[i] = pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT
			}
		}
		return idx, nil
	case !transient(ctx, err):
		return nil, err
	}
	code := pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE
	msg := fmt.Sprintf("node %s could not be reached: %s", addr, status.Convert(err).Message())
	if status.Code(err) == codes.DeadlineExceeded {
		k.delivered = true
		code = pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT
		msg = fmt.Sprintf("node %s did not answer in time (%s); the operation may still be applied", addr, status.Convert(err).Message())
	} else {
		k.unreachable = &unreachableError{last: fmt.Errorf("%s: %w", addr, err)}
	}
	k.c.logger.Debug("request to a node failed", zap.String("method", k.method), zap.String("address", addr), zap.Error(err))
	for _, i := range idx {
		k.c.routes.forget(k.part[i], addr) // the partition may have moved off an unreachable node
		k.b.fail(i, code, msg)
		k.last[i] = code
	}
	return idx, nil
}

// route groups the items todo by the address of their leader, looking up with one
// FindCoordinator the leaders the cache lacks. Items with no leader right now get the lookup's
// answer and are returned in retry; items whose key FindCoordinator refuses get that answer as
// final.
func (k *call) route(ctx context.Context, todo []int) (byNode map[string][]int, retry []int, err error) {
	byNode = make(map[string][]int)
	var lookup []int            // items to look up
	var keys []string           // the keys to ask for, one per item or per state partition
	asked := map[int32]string{} // state partition → the key asked for it
	for _, i := range todo {
		if k.part[i] < 0 {
			if p, ok := k.c.routes.partition(k.keys[i]); ok {
				k.part[i] = p
			}
		}
		if p := k.part[i]; p >= 0 {
			if n, ok := k.c.routes.leader(p); ok {
				byNode[n.addr] = append(byNode[n.addr], i)
				continue
			}
			if _, ok := asked[p]; !ok {
				asked[p] = k.keys[i]
				keys = append(keys, k.keys[i])
			}
		} else {
			keys = append(keys, k.keys[i])
		}
		lookup = append(lookup, i)
	}
	if len(lookup) == 0 {
		return byNode, nil, nil
	}
	resp, _, err := k.c.find(ctx, keys, k.prefer)
	if err != nil && ended(ctx) {
		return byNode, lookup, nil // the items keep their answers so far; finish completes them
	}
	if err != nil {
		var u *unreachableError
		if !errors.As(err, &u) {
			return nil, nil, err
		}
		k.unreachable = u
		for _, i := range lookup {
			k.b.fail(i, pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, "coordinatord client: "+u.Error())
			k.last[i] = pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE
		}
		return byNode, lookup, nil
	}
	k.reached = true
	answers := make(map[string]*pb.Coordinator, len(resp.GetCoordinators()))
	for _, co := range resp.GetCoordinators() {
		answers[co.GetKey()] = co
	}
	for _, i := range lookup {
		key := k.keys[i]
		if p := k.part[i]; p >= 0 {
			key = asked[p]
		}
		co, ok := answers[key]
		if !ok {
			co = &pb.Coordinator{Key: key, StatePartition: -1, ErrorCode: pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE,
				ErrorMessage: "FindCoordinator answered without this key"}
		}
		if p := co.GetStatePartition(); p >= 0 {
			k.part[i] = p
		}
		if n, ok := leaderOf(co); ok {
			byNode[n.addr] = append(byNode[n.addr], i)
			continue
		}
		le := lookupError(co)
		k.b.fail(i, le.Code, le.Message)
		k.last[i] = le.Code
		if retriable(le.Code) {
			retry = append(retry, i)
		}
	}
	for _, idx := range byNode {
		slices.Sort(idx)
	}
	return byNode, retry, nil
}
