package shard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func sb(first, last int64, state, count int) StateBatch {
	return StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: int8(state), DeliveryCount: int16(count)}
}

func bs(b ...StateBatch) []StateBatch { return b }

// manyBatches returns n batches of ten offsets each from offset 0, of varied states and counts.
func manyBatches(n int) []StateBatch {
	out := make([]StateBatch, n)
	for i := range out {
		out[i] = sb(int64(i)*10, int64(i)*10+9, i%3, i%5)
	}
	return out
}

// Kafka's PersisterStateBatchCombinerTest cases, ported.
func TestCombineKafkaCases(t *testing.T) {
	tests := []struct {
		name        string
		soFar, add  []StateBatch
		startOffset int64
		want        []StateBatch
	}{
		{"current batches with start offset midway are pruned", bs(sb(100, 130, 0, 1)), nil, 120, bs(sb(120, 130, 0, 1))},
		{"new batches with start offset midway are pruned", nil, bs(sb(100, 130, 0, 1)), 120, bs(sb(120, 130, 0, 1))},
		{"both empty", nil, nil, 120, nil},
		{"nil treated as empty", nil, nil, -1, nil},
		{"duplicate equal batches do not fill the gap", bs(sb(100, 110, 0, 1)), bs(sb(100, 110, 0, 1), sb(120, 130, 2, 1)), -1, bs(sb(100, 110, 0, 1), sb(120, 130, 2, 1))},
		{"duplicate state-2 batches do not fill the gap", bs(sb(0, 5, 2, 1)), bs(sb(0, 5, 2, 1), sb(11, 15, 0, 1)), -1, bs(sb(0, 5, 2, 1), sb(11, 15, 0, 1))},
		{"duplicate state-0 batches do not fill the gap", bs(sb(0, 5, 0, 1)), bs(sb(0, 5, 0, 1), sb(11, 15, 0, 1)), -1, bs(sb(0, 5, 0, 1), sb(11, 15, 0, 1))},
		{"same state, same range", bs(sb(100, 110, 0, 1)), bs(sb(100, 110, 0, 1)), -1, bs(sb(100, 110, 0, 1))},
		{"same state, new last smaller", bs(sb(100, 110, 0, 1)), bs(sb(100, 105, 0, 1)), -1, bs(sb(100, 110, 0, 1))},
		{"same state, new last larger", bs(sb(100, 110, 0, 1)), bs(sb(100, 115, 0, 1)), -1, bs(sb(100, 115, 0, 1))},
		{"same state, new inside", bs(sb(100, 110, 0, 1)), bs(sb(105, 108, 0, 1)), -1, bs(sb(100, 110, 0, 1))},
		{"same state, new first larger last equal", bs(sb(100, 110, 0, 1)), bs(sb(105, 110, 0, 1)), -1, bs(sb(100, 110, 0, 1))},
		{"same state, new overlapping right", bs(sb(100, 110, 0, 1)), bs(sb(105, 115, 0, 1)), -1, bs(sb(100, 115, 0, 1))},
		{"same state, contiguous", bs(sb(100, 110, 0, 1)), bs(sb(111, 115, 0, 1)), -1, bs(sb(100, 115, 0, 1))},
		{"overlapping new batches, same state", bs(sb(100, 110, 0, 1), sb(121, 130, 0, 1)), bs(sb(111, 119, 2, 2), sb(116, 123, 2, 2)), -1,
			bs(sb(100, 110, 0, 1), sb(111, 123, 2, 2), sb(124, 130, 0, 1))},
		{"overlapping new batches, different priority", bs(sb(100, 110, 0, 1)), bs(sb(101, 105, 1, 2), sb(101, 115, 2, 2), sb(101, 120, 3, 2)), -1,
			bs(sb(100, 100, 0, 1), sb(101, 120, 3, 2))},
		{"overlapping new batches with pruning", bs(sb(100, 110, 0, 1), sb(121, 130, 0, 1)), bs(sb(111, 119, 2, 2), sb(116, 123, 2, 2)), 120,
			bs(sb(120, 123, 2, 2), sb(124, 130, 0, 1))},
		{"multiple higher state updates", bs(sb(111, 120, 0, 1)), bs(sb(111, 113, 0, 2), sb(114, 114, 2, 1), sb(115, 119, 0, 2)), -1,
			bs(sb(111, 113, 0, 2), sb(114, 114, 2, 1), sb(115, 119, 0, 2), sb(120, 120, 0, 1))},
		{"higher count, same range", bs(sb(100, 110, 0, 1)), bs(sb(100, 110, 0, 2)), -1, bs(sb(100, 110, 0, 2))},
		{"lower count, same range", bs(sb(100, 110, 0, 3)), bs(sb(100, 110, 0, 1)), -1, bs(sb(100, 110, 0, 3))},
		{"higher count, prefix", bs(sb(100, 110, 0, 1)), bs(sb(100, 105, 0, 2)), -1, bs(sb(100, 105, 0, 2), sb(106, 110, 0, 1))},
		{"lower count, prefix", bs(sb(100, 110, 0, 3)), bs(sb(100, 105, 0, 1)), -1, bs(sb(100, 110, 0, 3))},
		{"higher count, longer", bs(sb(100, 110, 0, 1)), bs(sb(100, 115, 0, 2)), -1, bs(sb(100, 115, 0, 2))},
		{"lower count, longer", bs(sb(100, 110, 0, 3)), bs(sb(100, 115, 0, 1)), -1, bs(sb(100, 110, 0, 3), sb(111, 115, 0, 1))},
		{"higher state, inside", bs(sb(100, 115, 0, 1)), bs(sb(105, 110, 1, 1)), -1, bs(sb(100, 104, 0, 1), sb(105, 110, 1, 1), sb(111, 115, 0, 1))},
		{"lower state, inside", bs(sb(100, 115, 1, 1)), bs(sb(105, 110, 0, 1)), -1, bs(sb(100, 115, 1, 1))},
		{"higher count, suffix", bs(sb(100, 110, 0, 1)), bs(sb(105, 110, 0, 2)), -1, bs(sb(100, 104, 0, 1), sb(105, 110, 0, 2))},
		{"lower count, suffix", bs(sb(100, 110, 0, 2)), bs(sb(105, 110, 0, 1)), -1, bs(sb(100, 110, 0, 2))},
		{"higher count, overlapping right", bs(sb(100, 110, 0, 1)), bs(sb(105, 115, 0, 2)), -1, bs(sb(100, 104, 0, 1), sb(105, 115, 0, 2))},
		{"lower count, overlapping right", bs(sb(100, 110, 0, 2)), bs(sb(105, 115, 0, 1)), -1, bs(sb(100, 110, 0, 2), sb(111, 115, 0, 1))},
		// The combiner's worked example, first step: batch 1 acknowledged.
		{"worked example ack b1", bs(sb(100, 109, 1, 1), sb(110, 119, 1, 2), sb(120, 129, 1, 0)), bs(sb(100, 109, 2, 1)), 100,
			bs(sb(100, 109, 2, 1), sb(110, 119, 1, 2), sb(120, 129, 1, 0))},
		{"single inverted batch is returned as is", nil, bs(sb(10, 5, 0, 1)), -1, bs(sb(10, 5, 0, 1))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c combiner
			got := c.combineBatches(tt.soFar, tt.add, tt.startOffset)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("combine = %v, want %v", got, tt.want)
			}
			ref := referenceCombine(tt.soFar, tt.add, tt.startOffset)
			if !slices.Equal(ref, tt.want) {
				t.Fatalf("reference model = %v, want %v", ref, tt.want)
			}
			if canonical(tt.soFar) {
				for _, l := range storeLayouts {
					merged, _ := mergeStore(t, &c, tt.soFar, true, tt.add, tt.startOffset, l)
					if !slices.Equal(merged, tt.want) {
						t.Fatalf("mergeInPlace (layout %+v) = %v, want %v", l, merged, tt.want)
					}
				}
			}
		})
	}
}

// storeLayout places a store's batches in their backing array: front free slots before them and
// back free slots after them.
type storeLayout struct{ front, back int }

// storeLayouts cover a window at the start, in the middle and at the end of its array, with and
// without room to grow.
var storeLayouts = []storeLayout{{0, 0}, {0, 3}, {2, 0}, {5, 1}, {1, 40}, {40, 0}}

// newStore returns a store holding a copy of batches laid out as l.
func newStore(batches []StateBatch, l storeLayout) *batchStore {
	buf := make([]StateBatch, l.front+len(batches)+l.back)
	for i := range buf {
		buf[i] = sb(-7, -9, 3, 3) // garbage that must never show through
	}
	st := &batchStore{buf: buf, batches: buf[l.front : l.front+len(batches)]}
	copy(st.batches, batches)
	return st
}

// checkStore fails unless st's batches are a window of its array.
func checkStore(t testing.TB, st *batchStore) {
	t.Helper()
	if len(st.buf) != cap(st.buf) {
		t.Fatalf("buf has len %d, cap %d", len(st.buf), cap(st.buf))
	}
	lo := st.front()
	if lo < 0 || lo+len(st.batches) > len(st.buf) {
		t.Fatalf("window [%d, %d) outside a buf of %d", lo, lo+len(st.batches), len(st.buf))
	}
	if cap(st.batches) > 0 && &st.buf[lo:cap(st.buf)][:1][0] != &st.batches[:1][0] {
		t.Fatal("batches is not a window of buf")
	}
}

// mergeStore runs mergeInPlace on a store holding soFar laid out as l and returns its batches.
func mergeStore(t testing.TB, c *combiner, soFar []StateBatch, canon bool, add []StateBatch, start int64, l storeLayout) ([]StateBatch, bool) {
	t.Helper()
	st := newStore(soFar, l)
	ok := c.mergeInPlace(st, canon, add, start)
	checkStore(t, st)
	return st.batches, ok
}

// referenceCombine is the per-offset model of Kafka's batch combining: every covered offset takes
// the highest (count, state) of the batches covering it; runs of equal priority become batches.
func referenceCombine(soFar, add []StateBatch, startOffset int64) []StateBatch {
	var pruned []StateBatch
	for _, src := range [][]StateBatch{soFar, add} {
		for _, s := range src {
			if startOffset != -1 && s.LastOffset < startOffset {
				continue
			}
			if startOffset != -1 && s.FirstOffset < startOffset {
				s.FirstOffset = startOffset
			}
			pruned = append(pruned, s)
		}
	}
	if len(pruned) <= 1 {
		return pruned
	}
	best := map[int64]priority{}
	for i := range pruned {
		s := &pruned[i]
		for o := s.FirstOffset; o <= s.LastOffset; o++ {
			if p, ok := best[o]; !ok || prioOf(s) > p {
				best[o] = prioOf(s)
			}
		}
	}
	offs := make([]int64, 0, len(best))
	for o := range best {
		offs = append(offs, o)
	}
	slices.Sort(offs)
	var out []StateBatch
	for _, o := range offs {
		out = emit(out, o, o, best[o])
	}
	return out
}

func randomBatches(r *rand.Rand, n int, sorted bool) []StateBatch {
	states := []int8{0, 1, 2, 4}
	var out []StateBatch
	next := int64(r.IntN(20))
	for i := 0; i < n; i++ {
		var first int64
		if sorted {
			first = next + int64(r.IntN(3))
		} else {
			first = int64(r.IntN(200))
		}
		last := first + int64(r.IntN(15))
		out = append(out, StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: states[r.IntN(len(states))], DeliveryCount: int16(r.IntN(4))})
		next = last + 1
	}
	return out
}

// TestCombineMatchesReferenceModel checks every code path (overlay, sweep, in-place merge) against
// the per-offset model on random inputs: canonical or arbitrary current batches, sorted or
// overlapping new batches, with and without pruning.
func TestCombineMatchesReferenceModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var c combiner
	for i := 0; i < 20000; i++ {
		soFar := randomBatches(r, r.IntN(12), r.IntN(2) == 0)
		if r.IntN(2) == 0 {
			soFar = referenceCombine(soFar, nil, -1)
		}
		nAdd := r.IntN(6)
		if r.IntN(8) == 0 {
			nAdd = r.IntN(24) // more than mergeInPlace merges one by one
		}
		add := randomBatches(r, nAdd, r.IntN(3) != 0)
		start := int64(-1)
		if r.IntN(2) == 0 {
			start = int64(r.IntN(150))
		}
		want := referenceCombine(soFar, add, start)
		got := c.combineBatches(soFar, add, start)
		if !slices.Equal(got, want) {
			t.Fatalf("case %d: combine(%v, %v, %d) = %v, want %v", i, soFar, add, start, got, want)
		}
		isCanon := canonical(soFar)
		l := storeLayouts[i%len(storeLayouts)]
		merged, canon := mergeStore(t, &c, soFar, isCanon, add, start, l)
		if !slices.Equal(merged, want) {
			t.Fatalf("case %d: mergeInPlace(%v, %v, %v, %d, layout %+v) = %v, want %v", i, soFar, isCanon, add, start, l, merged, want)
		}
		if canon != canonical(merged) {
			t.Fatalf("case %d: mergeInPlace reported canonical=%v for %v", i, canon, merged)
		}
	}
}

// The stress cases of Kafka's PersisterStateBatchCombinerStressTest.
func TestCombineStress(t *testing.T) {
	var c combiner
	t.Run("10000 contiguous coalesce to 1", func(t *testing.T) {
		var in []StateBatch
		for i := int64(0); i < 10000; i++ {
			in = append(in, sb(i*10, i*10+9, 0, 1))
		}
		got := c.combineBatches(in, nil, -1)
		if want := bs(sb(0, 99999, 0, 1)); !slices.Equal(got, want) {
			t.Fatalf("got %d batches %v, want %v", len(got), got[:min(3, len(got))], want)
		}
	})
	t.Run("5000 shuffled coalesce to 1", func(t *testing.T) {
		var in []StateBatch
		for i := int64(0); i < 5000; i++ {
			in = append(in, sb(i*10, i*10+9, 0, 1))
		}
		rand.New(rand.NewPCG(42, 42)).Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
		got := c.combineBatches(in, nil, -1)
		if want := bs(sb(0, 49999, 0, 1)); !slices.Equal(got, want) {
			t.Fatalf("got %d batches, want %v", len(got), want)
		}
	})
	t.Run("1000 alternating stay separate", func(t *testing.T) {
		var in []StateBatch
		for i := int64(0); i < 1000; i++ {
			in = append(in, sb(i*10, i*10+9, int(i%2)*2, 1))
		}
		got := c.combineBatches(in, nil, -1)
		if !slices.Equal(got, in) {
			t.Fatalf("got %d batches, want the 1000 inputs unchanged", len(got))
		}
	})
	t.Run("2000 random give a sorted disjoint cover equal to the model", func(t *testing.T) {
		r := rand.New(rand.NewPCG(7, 7))
		var in []StateBatch
		for i := 0; i < 2000; i++ {
			first := int64(r.IntN(100000))
			in = append(in, sb(first, first+int64(r.IntN(50)), r.IntN(4), r.IntN(3)+1))
		}
		got := c.combineBatches(in, nil, -1)
		if !canonical(got) {
			t.Fatal("result is not sorted, disjoint and coalesced")
		}
		if want := referenceCombine(in, nil, -1); !slices.Equal(got, want) {
			t.Fatal("result differs from the reference model")
		}
	})
	t.Run("extreme offsets do not overflow", func(t *testing.T) {
		const maxI = int64(^uint64(0) >> 1)
		in := bs(sb(maxI-5, maxI, 0, 1), sb(maxI-2, maxI, 2, 1))
		got := c.combineBatches(in, nil, -1)
		if want := bs(sb(maxI-5, maxI-3, 0, 1), sb(maxI-2, maxI, 2, 1)); !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

func BenchmarkCombine(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		r := rand.New(rand.NewPCG(3, uint64(n)))
		cur := referenceCombine(randomBatches(r, n, true), nil, -1)
		last := cur[len(cur)-1].LastOffset
		// Realistic update: the start offset advances past the first batch and two new batches
		// arrive at the end, one of them overlapping the last current batch.
		add := bs(sb(last-2, last+5, 2, 1), sb(last+6, last+20, 0, 1))
		start := cur[0].LastOffset + 1
		b.Run(fmt.Sprintf("batches=%d/path=merge-in-place", n), func(b *testing.B) {
			var c combiner
			var st batchStore
			st.alloc(len(cur) + 4)
			b.ReportAllocs()
			for b.Loop() {
				st.set(cur)
				c.mergeInPlace(&st, true, add, start)
			}
		})
		b.Run(fmt.Sprintf("batches=%d/path=sweep", n), func(b *testing.B) {
			var c combiner
			shuffled := slices.Clone(cur)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			b.ReportAllocs()
			for b.Loop() {
				res := c.sweep(c.out[:0], shuffled, add, start)
				c.out = res[:0]
			}
		})
	}
}

// FuzzCombine checks the combiner (both paths and the in-place merge) against the per-offset
// reference model on arbitrary small inputs, including inverted and overlapping batches.
func FuzzCombine(f *testing.F) {
	f.Add([]byte{0, 10, 0, 1, 5, 3, 2, 2}, []byte{3, 4, 1, 1}, int16(-1))
	f.Add([]byte{100, 9, 1, 1, 110, 9, 1, 2, 120, 9, 1, 0}, []byte{100, 9, 2, 1}, int16(100))
	f.Fuzz(func(t *testing.T, a, b []byte, start int16) {
		decode := func(p []byte) []StateBatch {
			var out []StateBatch
			for len(p) >= 4 && len(out) < 64 {
				first := int64(p[0])
				last := first + int64(int8(p[1]))%40 // may be inverted
				out = append(out, StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: int8(p[2] % 6), DeliveryCount: int16(p[3] % 4)})
				p = p[4:]
			}
			return out
		}
		soFar, add := decode(a), decode(b)
		so := int64(start)
		if so < -1 || so > 300 {
			so = -1
		}
		want := referenceCombine(soFar, add, so)
		var c combiner
		if got := c.combineBatches(soFar, add, so); !slices.Equal(got, want) {
			t.Fatalf("combine(%v, %v, %d) = %v, want %v", soFar, add, so, got, want)
		}
		for _, l := range storeLayouts {
			got, _ := mergeStore(t, &c, soFar, canonical(soFar), add, so, l)
			if !slices.Equal(got, want) {
				t.Fatalf("mergeInPlace(%v, %v, %d, layout %+v) = %v, want %v", soFar, add, so, l, got, want)
			}
		}
	})
}

// TestMergeInPlaceExtremeOffsets checks the in-place merge next to the ends of the int64 range,
// where "first - 1" and "last + 1" overflow, against the general sweep.
func TestMergeInPlaceExtremeOffsets(t *testing.T) {
	const hi, lo = math.MaxInt64, math.MinInt64
	tests := []struct {
		name        string
		cur, add    []StateBatch
		startOffset int64
	}{
		{"append touching the top", bs(sb(hi-9, hi-5, 0, 1)), bs(sb(hi-4, hi, 0, 1)), -1},
		{"append after a gap at the top", bs(sb(hi-9, hi-5, 0, 1)), bs(sb(hi-3, hi, 2, 1)), -1},
		{"overlap at the top", bs(sb(hi-9, hi-5, 0, 1), sb(hi-4, hi, 2, 1)), bs(sb(hi-6, hi-1, 4, 2)), hi - 8},
		{"inside at the top", bs(sb(hi-9, hi, 0, 1)), bs(sb(hi, hi, 2, 1)), -1},
		{"before everything at the bottom", bs(sb(lo+5, lo+9, 0, 1)), bs(sb(lo, lo+1, 2, 1)), -1},
		{"touching at the bottom", bs(sb(lo+2, lo+9, 0, 1)), bs(sb(lo, lo+1, 0, 1)), -1},
		{"overlap at the bottom", bs(sb(lo, lo+3, 0, 1), sb(lo+4, lo+9, 2, 1)), bs(sb(lo, lo+5, 2, 3)), -1},
		{"many new batches spanning the range", bs(sb(lo, lo, 0, 1), sb(0, 10, 2, 1), sb(hi, hi, 0, 1)),
			bs(sb(lo, lo+1, 1, 1), sb(lo+3, lo+4, 1, 1), sb(-5, -4, 1, 1), sb(-2, 0, 1, 1), sb(2, 3, 4, 1), sb(5, 5, 4, 1),
				sb(7, 12, 4, 1), sb(20, 30, 0, 1), sb(hi-3, hi-2, 0, 1), sb(hi-1, hi, 0, 2)), -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c combiner
			want := slices.Clone(c.sweep(nil, tt.cur, tt.add, tt.startOffset))
			for _, l := range storeLayouts {
				got, canon := mergeStore(t, &c, tt.cur, true, tt.add, tt.startOffset, l)
				if !slices.Equal(got, want) || !canon || !canonical(got) {
					t.Fatalf("layout %+v: mergeInPlace = %v (canonical %v), sweep = %v", l, got, canon, want)
				}
			}
		})
	}
}

// A combine of many batches leaves no scratch of that size behind: one huge write must not pin its
// peak for the life of the partition.
func TestCombinerTrimsScratch(t *testing.T) {
	var c combiner
	many := make([]StateBatch, 4*maxScratch)
	for i := range many {
		many[i] = sb(int64(2*i), int64(2*i), 2, 1+i%3)
	}
	// Unsorted new batches take the sweep, which uses every scratch slice.
	overlapping := append(slices.Clone(many[1:]), many[0])
	if got := c.combineBatches(many, overlapping, -1); len(got) != len(many) {
		t.Fatalf("combined %d batches, want %d", len(got), len(many))
	}
	var st batchStore
	st.set(many)
	c.mergeInPlace(&st, true, overlapping, -1)
	if cap(c.out) > maxScratch || cap(c.pruned) > maxScratch || cap(c.events) > 2*maxScratch || cap(c.heap) > maxScratch || len(c.counts) > maxScratch {
		t.Fatalf("scratch kept after a huge combine: out %d, pruned %d, events %d, heap %d, counts %d",
			cap(c.out), cap(c.pruned), cap(c.events), cap(c.heap), len(c.counts))
	}
}

// mergedLen counts exactly what mergeInPlace leaves, on random states and updates: canonical or
// not, sorted and disjoint new batches or not, with and without pruning.
func TestMergedLenMatchesMergeInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	randomBatches := func(n int) []StateBatch {
		var out []StateBatch
		for range n {
			first := rng.Int64N(200)
			out = append(out, sb(first, first+rng.Int64N(6), []int{0, 1, 2, 4}[rng.IntN(4)], rng.IntN(3)))
		}
		return out
	}
	var c combiner
	for i := range 100_000 {
		cur := c.combineBatches(nil, randomBatches(rng.IntN(40)), -1)
		curCanonical := true
		if rng.IntN(10) == 0 {
			cur, curCanonical = randomBatches(rng.IntN(10)), false
		}
		add := randomBatches(rng.IntN(12))
		if rng.IntN(4) != 0 {
			add = c.combineBatches(nil, add, -1)
		}
		start := int64(-1)
		if rng.IntN(2) == 0 {
			start = rng.Int64N(220)
		}
		before := slices.Clone(cur)
		got := c.mergedLen(cur, curCanonical, add, start)
		if !slices.Equal(cur, before) {
			t.Fatalf("case %d: mergedLen changed its input", i)
		}
		var st batchStore
		st.set(cur)
		c.mergeInPlace(&st, curCanonical, add, start)
		if got != len(st.batches) {
			t.Fatalf("case %d: mergedLen = %d, mergeInPlace left %d\ncur %v (canonical %v)\nadd %v\nstart %d\nresult %v",
				i, got, len(st.batches), cur, curCanonical, add, start, st.batches)
		}
	}
}
