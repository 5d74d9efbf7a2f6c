package service

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// responseBudget bounds the bytes that read responses hold at once, from the moment their state
// batches are encoded until the transport has sent them (grpc.max.pending.response.bytes). A
// client decides how large the responses it asks for are and whether it reads them; this bound
// is the server's.
//
// Admission is not first come, first served, as golang.org/x/sync/semaphore's is: there a large
// read waiting at the head would hold back every small read behind it, so that one client asking
// for large states would stall all the others. Here any holder whose bytes fit goes ahead, and a
// large one waits until enough is free (bounded by its own wait). A holder never takes more than
// the whole capacity, so that a state larger than the budget can still be read, alone.
//
// A nil *responseBudget bounds nothing.
type responseBudget struct {
	capacity int64
	inUse    prometheus.Gauge // nil: not exported

	mu      sync.Mutex
	used    int64
	waiters int           // takers waiting for room
	freed   chan struct{} // closed and replaced whenever bytes are released
}

// newResponseBudget returns a budget of capacity bytes, or nil (no bound) for capacity <= 0.
// inUse, when not nil, follows the bytes held.
func newResponseBudget(capacity int64, inUse prometheus.Gauge) *responseBudget {
	if capacity <= 0 {
		return nil
	}
	return &responseBudget{capacity: capacity, inUse: inUse, freed: make(chan struct{})}
}

// clamp is the most of n that one holder may take: the whole capacity at most.
func (b *responseBudget) clamp(n int64) int64 {
	if b == nil {
		return 0
	}
	return min(n, b.capacity)
}

// tryTake takes n bytes if they are free now. n must be clamped already.
func (b *responseBudget) tryTake(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.capacity {
		return false
	}
	b.used += n
	b.report()
	return true
}

// take takes n bytes, waiting up to wait for them to be free, or until ctx ends. n must be
// clamped already. It reports whether it took them.
func (b *responseBudget) take(ctx context.Context, n int64, wait time.Duration) bool {
	if b.tryTake(n) {
		return true
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	b.mu.Lock()
	b.waiters++
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.waiters--
		b.mu.Unlock()
	}()
	for {
		b.mu.Lock()
		if b.used+n <= b.capacity {
			b.used += n
			b.report()
			b.mu.Unlock()
			return true
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// release gives back n bytes taken before.
func (b *responseBudget) release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.report()
	close(b.freed)
	b.freed = make(chan struct{})
}

// inUseBytes returns the bytes held now.
func (b *responseBudget) inUseBytes() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// waiting returns the number of takers waiting for room.
func (b *responseBudget) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters
}

// report sets the gauge; the caller holds b.mu.
func (b *responseBudget) report() {
	if b.inUse != nil {
		b.inUse.Set(float64(b.used))
	}
}
