package shard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// randomWrite builds a valid write with a few batches around the key's window.
func randomWrite(r *rand.Rand, k Key, base int64) WriteRequest {
	var batches []StateBatch
	off := base + int64(r.IntN(5))
	for n := r.IntN(4); n > 0; n-- {
		last := off + int64(r.IntN(8))
		batches = append(batches, StateBatch{FirstOffset: off, LastOffset: last, DeliveryState: []int8{0, 1, 2, 4}[r.IntN(4)], DeliveryCount: int16(r.IntN(3))})
		off = last + 1 + int64(r.IntN(2)) - int64(r.IntN(4)) // sometimes overlapping
		off = max(off, 0)
	}
	so := int64(-1)
	if r.IntN(3) > 0 {
		so = base + int64(r.IntN(6))
	}
	return WriteRequest{Key: k, StateEpoch: int32(r.IntN(3)), LeaderEpoch: int32(r.IntN(3)), StartOffset: so,
		DeliveryCompleteCount: int32(r.IntN(20)) - 1, StateBatches: batches}
}

type randomOps struct {
	r    *rand.Rand
	keys []Key
	base map[Key]int64
}

func newRandomOps(seed uint64, nKeys int) *randomOps {
	ro := &randomOps{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b9)), base: map[Key]int64{}}
	for i := 0; i < nKeys; i++ {
		ro.keys = append(ro.keys, Key{GroupID: fmt.Sprintf("grp-%d", i%2), TopicID: testTopic, Partition: int32(i)})
	}
	return ro
}

// step runs one random operation through do* callbacks.
func (ro *randomOps) step(
	init func(InitializeRequest), write func(WriteRequest), read func(Key, int32), del func(Key), cold func(), tick func(),
) {
	k := ro.keys[ro.r.IntN(len(ro.keys))]
	switch p := ro.r.IntN(100); {
	case p < 8:
		init(InitializeRequest{Key: k, StateEpoch: int32(ro.r.IntN(3)), StartOffset: int64(ro.r.IntN(3)) - 1})
	case p < 75:
		ro.base[k] += int64(ro.r.IntN(4))
		write(randomWrite(ro.r, k, ro.base[k]))
	case p < 85:
		read(k, int32(ro.r.IntN(4)))
	case p < 90:
		del(k)
	case p < 95:
		cold()
	default:
		tick()
	}
}

// Random operation sequences: the state rebuilt by replaying the log equals the live state,
// including the epochs maps, update counts and the offsets manager.
func TestMachineReopenProperty(t *testing.T) {
	for seed := uint64(0); seed < 150; seed++ {
		h := newHarness(t, 1+int(seed%6))
		ro := newRandomOps(seed, 5)
		for i := 0; i < 400; i++ {
			ro.step(
				func(r InitializeRequest) { h.initialize(r) },
				func(r WriteRequest) { h.write(r) },
				func(k Key, le int32) { h.read(k, le) },
				func(k Key) { h.delete(k) },
				func() { h.cold() },
				func() { h.clock.advance(7 * time.Second) },
			)
		}
		assertSameMachine(t, h.reopened(), h.m)
		for k := range h.m.states {
			if e := h.m.states[k]; e.flags&flagCanonical != 0 && !canonical(e.batches) {
				t.Fatalf("seed %d: key marked canonical with %v", seed, e.batches)
			}
		}
	}
}

// The same through the shard and its on-disk log: close, reopen, compare.
func TestShardReopenProperty(t *testing.T) {
	for seed := uint64(0); seed < 6; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			clock := newFakeClock()
			ts := newTestShard(t, testOpts{Options: Options{Now: clock.Now, ColdSnapshotInterval: 0}})
			ts.provider = newLimits(int(seed%4) + 1)
			s := ts.active(nil)
			ctx := context.Background()
			ro := newRandomOps(seed, 4)
			for i := 0; i < 300; i++ {
				ro.step(
					func(r InitializeRequest) { s.Initialize(ctx, r) },
					func(r WriteRequest) { s.Write(ctx, r) },
					func(k Key, le int32) { s.Read(ctx, ReadRequest{Key: k, LeaderEpoch: le}) },
					func(k Key) { s.Delete(ctx, DeleteRequest{Key: k}) },
					func() {
						if _, err := s.SnapshotColdPartitions(ctx); err != nil {
							t.Fatal(err)
						}
					},
					func() { clock.advance(3 * time.Second) },
				)
			}
			assertSameMachine(t, reloaded(t, ts, s), s.m)
		})
	}
}
