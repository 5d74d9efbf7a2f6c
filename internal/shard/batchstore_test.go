package shard

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBatchStoreSplice(t *testing.T) {
	cur := bs(sb(0, 0, 0, 1), sb(1, 1, 0, 1), sb(2, 2, 0, 1), sb(3, 3, 0, 1), sb(4, 4, 0, 1), sb(5, 5, 0, 1))
	x, y := sb(10, 10, 2, 2), sb(11, 11, 2, 2)
	tests := []struct {
		name string
		i, j int
		res  []StateBatch
		want []StateBatch
	}{
		{"same length", 2, 3, bs(x), bs(cur[0], cur[1], x, cur[3], cur[4], cur[5])},
		{"shorter", 1, 4, bs(x), bs(cur[0], x, cur[4], cur[5])},
		{"removes", 1, 3, nil, bs(cur[0], cur[3], cur[4], cur[5])},
		{"longer near the start", 1, 2, bs(x, y), bs(cur[0], x, y, cur[2], cur[3], cur[4], cur[5])},
		{"longer near the end", 4, 5, bs(x, y), bs(cur[0], cur[1], cur[2], cur[3], x, y, cur[5])},
		{"insert at the front", 0, 0, bs(x), bs(x, cur[0], cur[1], cur[2], cur[3], cur[4], cur[5])},
		{"insert at the end", 6, 6, bs(x, y), bs(cur[0], cur[1], cur[2], cur[3], cur[4], cur[5], x, y)},
	}
	for _, tt := range tests {
		for _, l := range storeLayouts {
			t.Run(fmt.Sprintf("%s/front=%d/back=%d", tt.name, l.front, l.back), func(t *testing.T) {
				st := newStore(cur, l)
				st.splice(tt.i, tt.j, tt.res)
				checkStore(t, st)
				if !slices.Equal(st.batches, tt.want) {
					t.Fatalf("got %v, want %v", st.batches, tt.want)
				}
			})
		}
	}
}

// TestBatchStoreMatchesSlices runs random operations on a store and on a plain slice and checks
// after each that the store holds the same batches as a window of its array.
func TestBatchStoreMatchesSlices(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 200; round++ {
		var st batchStore
		var model []StateBatch
		next := int64(0)
		fresh := func(n int) []StateBatch {
			out := make([]StateBatch, n)
			for i := range out {
				out[i] = sb(next, next, r.IntN(3), 1)
				next++
			}
			return out
		}
		for step := 0; step < 300; step++ {
			op := r.IntN(7)
			switch op {
			case 0:
				src := fresh(r.IntN(40))
				st.set(src)
				model = slices.Clone(src)
			case 1:
				d := r.IntN(len(model) + 1)
				st.dropFront(d)
				model = model[d:]
			case 2:
				k := 1 + r.IntN(5)
				st.reserve(k)
				if cap(st.batches)-len(st.batches) < k {
					t.Fatalf("reserve(%d) left room for %d", k, cap(st.batches)-len(st.batches))
				}
				add := fresh(k)
				st.batches = append(st.batches, add...)
				model = append(model, add...)
			case 3:
				i := r.IntN(len(model) + 1)
				j := i + r.IntN(len(model)-i+1)
				res := fresh(r.IntN(5))
				st.splice(i, j, res)
				model = slices.Concat(model[:i], res, model[j:])
			case 4:
				res := fresh(r.IntN(60))
				st.replace(res)
				model = slices.Clone(res)
			case 5:
				st.shrink()
				if loose(cap(st.buf), len(st.batches)) {
					t.Fatalf("buf of %d for %d batches after shrink", cap(st.buf), len(st.batches))
				}
			case 6:
				// The usual update: slide forward by a couple of batches.
				d := min(2, len(model))
				st.dropFront(d)
				model = model[d:]
				st.reserve(2)
				add := fresh(2)
				st.batches = append(st.batches, add...)
				model = append(model, add...)
			}
			checkStore(t, &st)
			if !slices.Equal(st.batches, model) {
				t.Fatalf("round %d step %d (op %d): store %v, want %v", round, step, op, st.batches, model)
			}
		}
	}
}

// TestBatchStoreSlidingWindow checks that a window sliding forward settles without allocating and
// within the memory bound of growCap.
func TestBatchStoreSlidingWindow(t *testing.T) {
	for _, n := range []int{1, 2, 50, 100, 1000} {
		t.Run(fmt.Sprintf("batches=%d", n), func(t *testing.T) {
			var st batchStore
			st.set(manyBatches(n))
			next := int64(n) * 10
			slide := func() {
				st.dropFront(min(2, len(st.batches)))
				st.reserve(2)
				st.batches = append(st.batches, sb(next, next+9, 2, 1), sb(next+10, next+19, 4, 1))
				next += 20
			}
			for i := 0; i < 4*n+10; i++ {
				slide()
			}
			if allocs := testing.AllocsPerRun(1000, slide); allocs != 0 {
				t.Fatalf("%v allocations per slide", allocs)
			}
			if limit := cap(slices.Grow([]StateBatch(nil), growCap(max(n, 2)+2))); cap(st.buf) > limit {
				t.Fatalf("buf of %d for %d batches, want at most %d", cap(st.buf), len(st.batches), limit)
			}
		})
	}
}
