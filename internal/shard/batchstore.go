package shard

import "slices"

// batchStore holds the state batches of one key. batches is a window of buf, its backing array:
// batches = buf[lo:lo+len(batches)] with its capacity running to the end of buf, so lo is
// cap(buf)-cap(batches).
//
// A share partition's batches slide forward: every update drops the oldest ones (the start offset
// advances) and adds new ones at the end. Dropping moves the start of the window; the window is
// copied back to the start of buf only when its end reaches the end of buf and enough room is
// freed, so a sliding key costs amortised O(1) copies per batch instead of a memmove of all its
// batches on every update.
type batchStore struct {
	batches []StateBatch // the state batches of the key
	buf     []StateBatch // backing array of batches, len(buf) == cap(buf); nil before the first batch
}

// storeSlack is the room (as a fraction 1/storeSlack of the batches held) that a copy back to the
// start of buf must leave free; it bounds the copies to storeSlack per added batch.
const storeSlack = 16

// front is the number of slots of buf before the window.
func (s *batchStore) front() int { return cap(s.buf) - cap(s.batches) }

// set replaces the batches with a copy of src, reusing buf when it fits snugly.
func (s *batchStore) set(src []StateBatch) {
	if len(src) == 0 {
		s.batches = s.buf[:0]
		return
	}
	if cap(s.buf) < len(src) || loose(cap(s.buf), len(src)) {
		s.alloc(len(src))
	}
	s.batches = s.buf[:len(src)]
	copy(s.batches, src)
}

// endsBefore reports whether every batch ends before offset (true when there is none).
func (s *batchStore) endsBefore(offset int64) bool {
	n := len(s.batches)
	return n == 0 || s.batches[n-1].LastOffset < offset
}

// dropFront drops the first n batches.
func (s *batchStore) dropFront(n int) { s.batches = s.batches[n:] }

// reserve makes room for k more batches after the window, copying the window back to the start of
// buf when that frees enough room and into a new, larger buf otherwise.
func (s *batchStore) reserve(k int) {
	n := len(s.batches)
	if cap(s.batches)-n >= k {
		return
	}
	need := n + k
	if free := cap(s.buf) - need; free >= 0 && free >= need/storeSlack {
		copy(s.buf, s.batches)
		s.batches = s.buf[:n]
		return
	}
	old := s.batches
	s.alloc(need)
	s.batches = s.buf[:n]
	copy(s.batches, old)
}

// splice replaces batches[i:j] with res (which must not alias buf). When res is longer, the
// shorter side moves: the batches before i towards the front of buf if it has room, else the
// batches from j on towards its end.
func (s *batchStore) splice(i, j int, res []StateBatch) {
	n := len(s.batches)
	delta := len(res) - (j - i)
	switch {
	case delta <= 0:
		copy(s.batches[i:], res)
		if delta < 0 {
			copy(s.batches[i+len(res):], s.batches[j:])
			s.batches = s.batches[:n+delta]
		}
	case i < n-j && s.front() >= delta:
		lo := s.front()
		w := s.buf[lo-delta : lo+n]
		copy(w, w[delta:delta+i])
		copy(w[i:], res)
		s.batches = w
	default:
		s.reserve(delta)
		s.batches = s.batches[:n+delta]
		copy(s.batches[j+delta:], s.batches[j:n])
		copy(s.batches[i:], res)
	}
}

// replace replaces all batches with res (which must not alias buf), reusing buf when it fits.
func (s *batchStore) replace(res []StateBatch) {
	if cap(s.buf) < len(res) {
		s.alloc(len(res))
	}
	s.batches = s.buf[:len(res)]
	copy(s.batches, res)
	s.shrink()
}

// shrink moves the batches into a new, tight buf when buf is far larger than they need.
func (s *batchStore) shrink() {
	if !loose(cap(s.buf), len(s.batches)) {
		return
	}
	old := s.batches
	s.alloc(len(old))
	s.batches = s.buf[:len(old)]
	copy(s.batches, old)
}

// alloc gives s a new buf for at least n batches; the caller fills batches.
func (s *batchStore) alloc(n int) {
	// slices.Grow rounds the capacity up to the allocator's size class: room that would be
	// allocated anyway.
	buf := slices.Grow([]StateBatch(nil), growCap(n))
	s.buf = buf[:cap(buf)]
}

// growCap is the capacity for a buf that must hold n batches: 1/8 slack keeps resident memory per
// key near its encoded size while amortising growth and copies.
func growCap(n int) int { return n + n/8 + 2 }

// loose reports whether a buf of capacity c is far larger than n batches need.
func loose(c, n int) bool { return c > 2*n+8 }
