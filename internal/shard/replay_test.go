package shard

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/record"
)

// modelKey is the per-key state of Kafka's ShareCoordinatorShard replay as the reference model
// keeps it.
type modelKey struct {
	startOffset int64
	batches     []StateBatch
}

// replayGen produces long random record streams for a few keys: mostly updates that slide a
// window forward, with acknowledgements inside the window, overlapping and many-batch writes,
// updates without a start offset, snapshots (canonical or not) and tombstones.
type replayGen struct {
	r        *rand.Rand
	frontier map[string]int64
	start    map[string]int64
}

func (g *replayGen) batch(first int64) StateBatch {
	return sb(first, first+int64(g.r.IntN(6)), []int{0, 1, 2, 4}[g.r.IntN(4)], g.r.IntN(3))
}

func (g *replayGen) update(mk string) *record.UpdateValue {
	r := g.r
	f, so := g.frontier[mk], g.start[mk]
	var add []StateBatch
	switch p := r.IntN(20); {
	case p < 10: // one to three batches at the end, touching it or after a gap
		off := f + int64(r.IntN(2))
		for n := 1 + r.IntN(3); n > 0; n-- {
			s := g.batch(off)
			add = append(add, s)
			off = s.LastOffset + 1 + int64(r.IntN(2))
		}
	case p < 14: // an acknowledgement inside the window, maybe followed by a new batch
		lo := so
		if lo < 0 {
			lo = 0
		}
		if f > lo {
			first := lo + int64(r.IntN(int(f-lo)))
			add = append(add, g.batch(first))
			if r.IntN(2) == 0 {
				add = append(add, g.batch(max(f, add[0].LastOffset+1)))
			}
		}
	case p < 16: // overlapping or unsorted batches (the general combiner)
		for n := 2 + r.IntN(3); n > 0; n-- {
			add = append(add, g.batch(max(so, 0)+int64(r.IntN(int(f-max(so, 0)+10)))))
		}
	case p < 18: // many sorted batches spread over the window and past its end
		off := max(so, 0) + int64(r.IntN(3))
		for n := 9 + r.IntN(10); n > 0; n-- {
			s := g.batch(off)
			add = append(add, s)
			off = s.LastOffset + 1 + int64(r.IntN(3))
		}
	default: // no batches
	}
	for _, s := range add {
		g.frontier[mk] = max(g.frontier[mk], s.LastOffset+1)
	}
	start := int64(-1)
	if r.IntN(5) > 0 {
		start = max(so, 0) + int64(r.IntN(8))
		if start > g.frontier[mk] {
			start = g.frontier[mk]
		}
		g.start[mk] = start
	}
	return &record.UpdateValue{SnapshotEpoch: 1, LeaderEpoch: int32(r.IntN(3)) - 1, StartOffset: start, StateBatches: add, DeliveryCompleteCount: int32(r.IntN(5)) - 1}
}

func (g *replayGen) snapshot(mk string) *record.SnapshotValue {
	so := g.start[mk]
	var batches []StateBatch
	off := max(so, 0)
	for n := g.r.IntN(12); n > 0; n-- {
		s := g.batch(off)
		batches = append(batches, s)
		off = s.LastOffset + 1
	}
	if g.r.IntN(4) == 0 && len(batches) > 1 {
		batches[0], batches[1] = batches[1], batches[0] // not canonical
	}
	return &record.SnapshotValue{SnapshotEpoch: 2, StateEpoch: 1, StartOffset: so, StateBatches: batches, DeliveryCompleteCount: -1}
}

// TestReplayMatchesModel replays long random record streams and compares every key's start offset
// and batches after each record with the reference model of Kafka's replay and
// PersisterStateBatchCombiner (per-offset combining), so that the replay fast paths (window moves,
// appends, region merges, the store's copies and growth) are checked over long histories.
func TestReplayMatchesModel(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			g := &replayGen{r: rand.New(rand.NewPCG(seed, 99)), frontier: map[string]int64{}, start: map[string]int64{}}
			m := newMachine(zaptest.NewLogger(t), fixedLimit(1000), time.Now, 0, 0)
			model := map[string]*modelKey{}
			var keys []string
			for i := 0; i < 4; i++ {
				mk, _ := record.EncodeKey(record.Key{GroupID: "g", TopicID: testTopic, Partition: int32(i)})
				keys = append(keys, mk)
			}
			for off := int64(0); off < 1500; off++ {
				mk := keys[g.r.IntN(len(keys))]
				var raw []byte
				switch p := g.r.IntN(100); {
				case p < 2:
					raw = record.AppendTombstone(nil, mk)
					delete(model, mk)
				case p < 7:
					v := g.snapshot(mk)
					raw = record.AppendSnapshot(nil, mk, v)
					model[mk] = &modelKey{startOffset: v.StartOffset, batches: slices.Clone(v.StateBatches)}
				default:
					v := g.update(mk)
					raw = record.AppendUpdate(nil, mk, v)
					if mo := model[mk]; mo == nil {
						model[mk] = &modelKey{startOffset: v.StartOffset, batches: slices.Clone(v.StateBatches)}
					} else {
						if v.StartOffset != -1 {
							mo.startOffset = v.StartOffset
						}
						mo.batches = referenceCombine(mo.batches, v.StateBatches, mo.startOffset)
					}
				}
				if err := m.replayRaw(off, raw); err != nil {
					t.Fatal(err)
				}
				e, mo := m.states[mk], model[mk]
				if (e == nil) != (mo == nil) {
					t.Fatalf("offset %d: key present %v, model %v", off, e != nil, mo != nil)
				}
				if e == nil {
					continue
				}
				checkStore(t, &e.batchStore)
				if e.startOffset != mo.startOffset || !slices.Equal(e.batches, mo.batches) {
					t.Fatalf("offset %d: start %d batches %v, model start %d batches %v", off, e.startOffset, e.batches, mo.startOffset, mo.batches)
				}
				if e.flags&flagCanonical != 0 && !canonical(e.batches) {
					t.Fatalf("offset %d: marked canonical with %v", off, e.batches)
				}
			}
		})
	}
}

// TestReplayUpdateDoesNotAllocate checks that replaying the usual update (the window slides by two
// batches) allocates nothing once the key's batches have reached their size.
func TestReplayUpdateDoesNotAllocate(t *testing.T) {
	m := newMachine(zaptest.NewLogger(t), fixedLimit(1000), time.Now, 0, 0)
	mk, _ := record.EncodeKey(record.Key{GroupID: "group", TopicID: testTopic, Partition: 3})
	snapshot := record.AppendSnapshot(nil, mk, &record.SnapshotValue{StateEpoch: 1, StateBatches: manyBatches(50), DeliveryCompleteCount: -1})
	records := make([][]byte, 64)
	for i := range records {
		first := int64(500 + 20*i)
		records[i] = record.AppendUpdate(nil, mk, &record.UpdateValue{LeaderEpoch: 1, StartOffset: first - 480,
			StateBatches: bs(sb(first, first+9, 2, 1), sb(first+10, first+19, 4, 1)), DeliveryCompleteCount: 20})
	}
	// A cycle is the snapshot then its updates, so that the offsets keep moving forward.
	off := int64(0)
	replay := func() {
		i := int(off % int64(len(records)+1))
		rec := snapshot
		if i > 0 {
			rec = records[i-1]
		}
		if err := m.replayRaw(off, rec); err != nil {
			t.Fatal(err)
		}
		off++
	}
	for i := 0; i < 2*(len(records)+1); i++ {
		replay()
	}
	if e := m.states[mk]; len(e.batches) != 50 {
		t.Fatalf("the key holds %d batches, want 50", len(e.batches))
	}
	if allocs := testing.AllocsPerRun(10*len(records), replay); allocs != 0 {
		t.Fatalf("%v allocations per replayed record", allocs)
	}
}
