package shard

import (
	"cmp"
	"math"
	"slices"
)

// Batch combining (Kafka's PersisterStateBatchCombiner).
//
// The result of combining is fully determined per offset: every offset covered by some input batch
// (after pruning at the start offset) gets the highest priority among the batches covering it,
// where priority orders by delivery count, then by delivery state (signed, as Java compares bytes).
// The output lists those offsets as sorted, disjoint batches, neighbours with equal (state, count)
// coalesced, gaps kept. As in Kafka, when at most one batch survives pruning it is returned as is.
//
// Two algorithms compute this result:
//   - overlay: a linear two-pointer merge used when the current batches are canonical (sorted,
//     disjoint, coalesced: everything this package produces) and the new batches are sorted and
//     disjoint (what share-partition leaders send). Only the suffix of the current batches from
//     the first new batch on is touched.
//   - sweep: the general sweep-line over begin/end events with a counted max-heap of active
//     priorities, O((n+k) log n), for anything else (overlapping or unsorted input). Batches with
//     first > last cover no offset and are ignored here (Kafka fails on them).

// priority orders batches for overlap resolution: delivery count first, then delivery state, both
// compared as signed numbers (Java's Short.compare/Byte.compare).
type priority uint32

func prioOf(s *StateBatch) priority {
	return priority(uint32(uint16(s.DeliveryCount)^0x8000)<<8 | uint32(uint8(s.DeliveryState)^0x80))
}

func (p priority) state() int8  { return int8(uint8(p) ^ 0x80) }
func (p priority) count() int16 { return int16(uint16(p>>8) ^ 0x8000) }

// combiner holds reusable scratch space; it is used by one goroutine at a time.
type combiner struct {
	out    []StateBatch
	pruned []StateBatch
	events []sweepEvent
	heap   []priority
	counts map[priority]int32
}

type sweepEvent struct {
	pos   int64
	end   bool // begin events sort before end events at the same position
	prio  priority
	index int32 // keeps the sort stable-free yet deterministic
}

// combineBatches returns combine(soFar ∪ newBatches) pruned at startOffset (-1: no pruning) in a
// newly allocated slice. It never modifies its inputs.
func (c *combiner) combineBatches(soFar, newBatches []StateBatch, startOffset int64) []StateBatch {
	res := c.combineTo(c.out[:0], soFar, canonical(soFar), newBatches, startOffset)
	c.out = res[:0]
	defer c.trim()
	if len(res) == 0 {
		return nil
	}
	return slices.Clone(res)
}

// maxScratch bounds the scratch a combiner keeps between operations, in elements: one huge write
// would otherwise pin its peak for the life of the partition.
const maxScratch = 1 << 14

// trim drops scratch space that grew past maxScratch.
func (c *combiner) trim() {
	if cap(c.out) > maxScratch {
		c.out = nil
	}
	if cap(c.pruned) > maxScratch {
		c.pruned = nil
	}
	if cap(c.events) > 2*maxScratch {
		c.events = nil
	}
	if cap(c.heap) > maxScratch {
		c.heap = nil
	}
	if len(c.counts) > maxScratch {
		c.counts = nil
	}
}

// combineTo appends the combined batches to dst (which must not alias the inputs) and returns it.
// soFarCanonical tells that soFar is sorted, disjoint, non-inverted and coalesced.
func (c *combiner) combineTo(dst, soFar []StateBatch, soFarCanonical bool, newBatches []StateBatch, startOffset int64) []StateBatch {
	if soFarCanonical && sortedDisjoint(newBatches) {
		a, aHead, aOK := pruneSorted(soFar, startOffset)
		b, bHead, bOK := pruneSorted(newBatches, startOffset)
		n := len(a) + len(b)
		if aOK {
			n++
		}
		if bOK {
			n++
		}
		if n <= 1 {
			return appendSingle(dst, a, aHead, aOK, b, bHead, bOK)
		}
		return overlay(dst, a, aHead, aOK, b, bHead, bOK)
	}
	return c.sweep(dst, soFar, newBatches, startOffset)
}

// appendSingle appends the only surviving batch (if any) unchanged.
func appendSingle(dst, a []StateBatch, aHead StateBatch, aOK bool, b []StateBatch, bHead StateBatch, bOK bool) []StateBatch {
	switch {
	case aOK:
		return append(dst, aHead)
	case len(a) == 1:
		return append(dst, a[0])
	case bOK:
		return append(dst, bHead)
	case len(b) == 1:
		return append(dst, b[0])
	}
	return dst
}

// sortedDisjoint reports whether batches are non-inverted, sorted and pairwise disjoint.
func sortedDisjoint(batches []StateBatch) bool {
	for i := range batches {
		if batches[i].FirstOffset > batches[i].LastOffset {
			return false
		}
		if i > 0 && batches[i].FirstOffset <= batches[i-1].LastOffset {
			return false
		}
	}
	return true
}

// canonical reports whether batches are sorted, disjoint, non-inverted and coalesced.
func canonical(batches []StateBatch) bool {
	for i := range batches {
		if batches[i].FirstOffset > batches[i].LastOffset {
			return false
		}
		if i > 0 {
			p := &batches[i-1]
			if batches[i].FirstOffset <= p.LastOffset {
				return false
			}
			if p.LastOffset+1 == batches[i].FirstOffset && p.DeliveryState == batches[i].DeliveryState && p.DeliveryCount == batches[i].DeliveryCount {
				return false
			}
		}
	}
	return true
}

// pruneSorted prunes a sorted, disjoint list at startOffset: batches ending before it are dropped
// (a prefix) and the first remaining one is clipped. The clipped batch, if any, is returned as head
// with ok=true and rest holds the batches after it; otherwise rest is the whole remainder.
func pruneSorted(batches []StateBatch, startOffset int64) (rest []StateBatch, head StateBatch, ok bool) {
	if startOffset == -1 || len(batches) == 0 {
		return batches, head, false
	}
	i := 0
	if batches[0].LastOffset < startOffset {
		i = sortSearch(len(batches), func(j int) bool { return batches[j].LastOffset >= startOffset })
	}
	batches = batches[i:]
	if len(batches) > 0 && batches[0].FirstOffset < startOffset {
		head = batches[0]
		head.FirstOffset = startOffset
		return batches[1:], head, true
	}
	return batches, head, false
}

// sortSearch is sort.Search without the closure escaping to the heap in hot paths.
func sortSearch(n int, f func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if !f(h) {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return lo
}

// emit appends [first, last] with priority p to out, extending the tail when contiguous and equal.
func emit(out []StateBatch, first, last int64, p priority) []StateBatch {
	if n := len(out); n > 0 {
		t := &out[n-1]
		if t.LastOffset < first && t.LastOffset+1 == first && prioOf(t) == p {
			t.LastOffset = last
			return out
		}
	}
	return append(out, StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: p.state(), DeliveryCount: p.count()})
}

// cursor walks a pruned sorted list: an optional clipped head, then the rest.
type cursor struct {
	cur  StateBatch
	rest []StateBatch
	ok   bool
}

func newCursor(rest []StateBatch, head StateBatch, headOK bool) cursor {
	c := cursor{rest: rest}
	if headOK {
		c.cur, c.ok = head, true
		return c
	}
	c.next()
	return c
}

func (c *cursor) next() {
	if len(c.rest) == 0 {
		c.ok = false
		return
	}
	c.cur, c.rest, c.ok = c.rest[0], c.rest[1:], true
}

// overlay merges two pruned, sorted, disjoint lists (a also coalesced) per offset.
func overlay(out, a []StateBatch, aHead StateBatch, aOK bool, b []StateBatch, bHead StateBatch, bOK bool) []StateBatch {
	ca := newCursor(a, aHead, aOK)
	cb := newCursor(b, bHead, bOK)
	for ca.ok || cb.ok {
		switch {
		case !cb.ok:
			// Only a is left: its remainder is already canonical.
			out = emit(out, ca.cur.FirstOffset, ca.cur.LastOffset, prioOf(&ca.cur))
			return append(out, ca.rest...)
		case !ca.ok:
			out = emit(out, cb.cur.FirstOffset, cb.cur.LastOffset, prioOf(&cb.cur))
			cb.next()
		case ca.cur.FirstOffset < cb.cur.FirstOffset:
			out = overlayLead(out, &ca, &cb)
		case cb.cur.FirstOffset < ca.cur.FirstOffset:
			out = overlayLead(out, &cb, &ca)
		default:
			end := min(ca.cur.LastOffset, cb.cur.LastOffset)
			p := max(prioOf(&ca.cur), prioOf(&cb.cur))
			out = emit(out, ca.cur.FirstOffset, end, p)
			if ca.cur.LastOffset == end {
				ca.next()
			} else {
				ca.cur.FirstOffset = end + 1
			}
			if cb.cur.LastOffset == end {
				cb.next()
			} else {
				cb.cur.FirstOffset = end + 1
			}
		}
	}
	return out
}

// overlayLead emits the part of lead that starts before other does.
func overlayLead(out []StateBatch, lead, other *cursor) []StateBatch {
	if lead.cur.LastOffset < other.cur.FirstOffset {
		out = emit(out, lead.cur.FirstOffset, lead.cur.LastOffset, prioOf(&lead.cur))
		lead.next()
		return out
	}
	out = emit(out, lead.cur.FirstOffset, other.cur.FirstOffset-1, prioOf(&lead.cur))
	lead.cur.FirstOffset = other.cur.FirstOffset
	return out
}

// sweep is the general algorithm: prune every batch, keep a single survivor as is, otherwise run a
// sweep-line over begin/end events with a counted max-heap of active priorities.
func (c *combiner) sweep(out, soFar, newBatches []StateBatch, startOffset int64) []StateBatch {
	pr := c.pruned[:0]
	pr = appendPruned(pr, soFar, startOffset)
	pr = appendPruned(pr, newBatches, startOffset)
	c.pruned = pr[:0]
	if len(pr) <= 1 {
		return append(out, pr...)
	}

	ev := c.events[:0]
	for i := range pr {
		s := &pr[i]
		if s.FirstOffset > s.LastOffset {
			continue
		}
		p := prioOf(s)
		ev = append(ev,
			sweepEvent{pos: s.FirstOffset, prio: p, index: int32(i)},
			sweepEvent{pos: s.LastOffset, end: true, prio: p, index: int32(i)})
	}
	slices.SortFunc(ev, func(x, y sweepEvent) int {
		if c := cmp.Compare(x.pos, y.pos); c != 0 {
			return c
		}
		if x.end != y.end {
			if !x.end {
				return -1
			}
			return 1
		}
		return cmp.Compare(x.index, y.index)
	})
	c.events = ev[:0]

	if c.counts == nil {
		c.counts = make(map[priority]int32)
	}
	clear(c.counts)
	c.heap = c.heap[:0]
	active := 0
	var cur int64
	for i := 0; i < len(ev); {
		p := ev[i].pos
		if !ev[i].end {
			if active > 0 && cur < p {
				out = emit(out, cur, p-1, c.top())
			}
			cur = p
			for ; i < len(ev) && ev[i].pos == p && !ev[i].end; i++ {
				c.push(ev[i].prio)
				active++
			}
		}
		if i < len(ev) && ev[i].pos == p && ev[i].end {
			out = emit(out, cur, p, c.top())
			for ; i < len(ev) && ev[i].pos == p; i++ {
				c.counts[ev[i].prio]--
				active--
			}
			if p < math.MaxInt64 {
				cur = p + 1
			}
		}
	}
	return out
}

func appendPruned(dst, src []StateBatch, startOffset int64) []StateBatch {
	for _, s := range src {
		if startOffset != -1 && s.LastOffset < startOffset {
			continue
		}
		if startOffset != -1 && s.FirstOffset < startOffset {
			s.FirstOffset = startOffset
		}
		dst = append(dst, s)
	}
	return dst
}

// push adds one occurrence of p to the active multiset.
func (c *combiner) push(p priority) {
	c.counts[p]++
	if c.counts[p] > 1 {
		return
	}
	h := append(c.heap, p)
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if h[parent] >= h[i] {
			break
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
	c.heap = h
}

// top returns the highest active priority, dropping stale heap entries whose count reached zero.
func (c *combiner) top() priority {
	h := c.heap
	for len(h) > 0 && c.counts[h[0]] == 0 {
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		for i := 0; ; {
			l, r, m := 2*i+1, 2*i+2, i
			if l < len(h) && h[l] > h[m] {
				m = l
			}
			if r < len(h) && h[r] > h[m] {
				m = r
			}
			if m == i {
				break
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	c.heap = h
	return h[0]
}

// mergeInPlace combines the batches of st with add at startOffset, in st (the caller owns it).
// curCanonical tells that st's batches are canonical; the result tells whether the combined
// batches are.
//
// With canonical batches and sorted, disjoint new ones (every replayed update of a well-behaved
// leader) it works on the window of st: pruning drops a prefix by moving the window, and each new
// batch is merged into the few current batches it overlaps or touches (see mergeRegion). Merging
// the new batches one by one gives the same result as merging them at once, since the result is
// the canonical form of the per-offset maximum. Many new batches are merged in one pass instead,
// which bounds the work by the batches' count rather than their product.
func (c *combiner) mergeInPlace(st *batchStore, curCanonical bool, add []StateBatch, startOffset int64) bool {
	defer c.trim()
	if !curCanonical || !sortedDisjoint(add) {
		res := c.sweep(c.out[:0], st.batches, add, startOffset)
		c.out = res[:0]
		st.replace(res)
		return canonical(res)
	}
	// Prune the current batches: drop the prefix below startOffset and clip the new head.
	if cur := st.batches; startOffset != -1 && len(cur) > 0 && cur[0].FirstOffset < startOffset {
		d := 0
		for d < len(cur) && cur[d].LastOffset < startOffset {
			d++
		}
		st.dropFront(d)
		if cur = st.batches; len(cur) > 0 && cur[0].FirstOffset < startOffset {
			cur[0].FirstOffset = startOffset
		}
	}
	b, bHead, bOK := pruneSorted(add, startOffset)
	switch {
	case len(b) == 0 && !bOK:
	case len(b) > mergeOneByOne || bOK && st.endsBefore(bHead.FirstOffset) || !bOK && st.endsBefore(b[0].FirstOffset):
		c.mergeRegion(st, b, bHead, bOK)
	default:
		if bOK {
			c.mergeRegion(st, nil, bHead, true)
		}
		for j := range b {
			c.mergeRegion(st, nil, b[j], true)
		}
	}
	st.shrink()
	return true
}

// regionBounds returns the region [i, j) of the canonical batches cur that new batches from first
// to last overlap or touch: i is the first batch ending at or after first.FirstOffset-1, j the
// first one starting after last.LastOffset+1 (both written without overflow).
func regionBounds(cur []StateBatch, first, last StateBatch) (i, j int) {
	n := len(cur)
	hi := n
	for i < hi {
		h := int(uint(i+hi) >> 1)
		if x := cur[h].LastOffset; x >= first.FirstOffset || x+1 == first.FirstOffset {
			hi = h
		} else {
			i = h + 1
		}
	}
	j, hi = i, n
	for j < hi {
		h := int(uint(j+hi) >> 1)
		if x := cur[h].FirstOffset; x > last.LastOffset && x-1 != last.LastOffset {
			hi = h
		} else {
			j = h + 1
		}
	}
	return i, j
}

// mergedLen returns how many batches mergeInPlace(st, curCanonical, add, startOffset) would leave
// for st's batches cur, without changing them. For canonical batches and sorted, disjoint new
// ones it overlays only the region the new batches touch, as mergeInPlace does, so its cost does
// not grow with the state; otherwise it runs the general sweep.
func (c *combiner) mergedLen(cur []StateBatch, curCanonical bool, add []StateBatch, startOffset int64) int {
	defer c.trim()
	if !curCanonical || !sortedDisjoint(add) {
		res := c.sweep(c.out[:0], cur, add, startOffset)
		c.out = res[:0]
		return len(res)
	}
	// Pruning drops a prefix and clips the new head; the clipped head takes part in the overlay
	// as a copy.
	var clipped StateBatch
	headClipped := false
	if startOffset != -1 && len(cur) > 0 && cur[0].FirstOffset < startOffset {
		cur = cur[sortSearch(len(cur), func(k int) bool { return cur[k].LastOffset >= startOffset }):]
		if len(cur) > 0 && cur[0].FirstOffset < startOffset {
			clipped, headClipped = cur[0], true
			clipped.FirstOffset = startOffset
		}
	}
	b, head, headOK := pruneSorted(add, startOffset)
	n := len(cur)
	if len(b) == 0 && !headOK {
		return n
	}
	first, last := head, head
	if !headOK {
		first = b[0]
	}
	if len(b) > 0 {
		last = b[len(b)-1]
	}
	out := c.out[:0]
	if n == 0 || cur[n-1].LastOffset < first.FirstOffset {
		// Everything new lies after the current batches: only the junction may coalesce (on its
		// last offset and priority, which a clip leaves alone).
		if n > 0 {
			out = append(out, cur[n-1])
		}
		if headOK {
			out = emit(out, head.FirstOffset, head.LastOffset, prioOf(&head))
		}
		for j := range b {
			out = emit(out, b[j].FirstOffset, b[j].LastOffset, prioOf(&b[j]))
		}
		c.out = out[:0]
		return max(n-1, 0) + len(out)
	}
	// The region that mergeRegion would overlay. A clipped head starts no later than the first
	// new batch, so the clip leaves the bounds alone; it does change what the overlay emits.
	i, j := regionBounds(cur, first, last)
	region := cur[i:j]
	if i == 0 && j > 0 && headClipped {
		pr := append(c.pruned[:0], region...)
		pr[0] = clipped
		c.pruned, region = pr[:0], pr
	}
	out = overlay(out, region, StateBatch{}, false, b, head, headOK)
	c.out = out[:0]
	return n - (j - i) + len(out)
}

// mergeOneByOne is the largest number of new batches that mergeInPlace merges one at a time.
const mergeOneByOne = 8

// mergeRegion merges new batches (an optional head, then b; pruned, sorted, disjoint and at least
// one) into the canonical batches of st. Only the region of current batches that the new ones
// overlap or touch (offsets from the first new batch's first offset - 1 to the last one's last
// offset + 1) is overlaid; the batches before and after it stay in place, since none of them can
// coalesce with the region's result. New batches after every current one are appended, coalesced
// where they touch; so a lone surviving batch is kept as is (Kafka's PersisterStateBatchCombiner).
func (c *combiner) mergeRegion(st *batchStore, b []StateBatch, head StateBatch, headOK bool) {
	first, last := head, head
	if !headOK {
		first = b[0]
	}
	if len(b) > 0 {
		last = b[len(b)-1]
	}
	if st.endsBefore(first.FirstOffset) {
		// Everything new lies after the current batches; only the junction may coalesce.
		k := len(b)
		if headOK {
			k++
		}
		st.reserve(k)
		out := st.batches
		if headOK {
			out = emit(out, head.FirstOffset, head.LastOffset, prioOf(&head))
		}
		for j := range b {
			out = emit(out, b[j].FirstOffset, b[j].LastOffset, prioOf(&b[j]))
		}
		st.batches = out
		return
	}
	cur := st.batches
	i, j := regionBounds(cur, first, last)
	res := overlay(c.out[:0], cur[i:j], StateBatch{}, false, b, head, headOK)
	c.out = res[:0]
	st.splice(i, j, res)
}
