package statelog

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
	"go.uber.org/zap"
)

// TestCrashSimulation cuts the power at a random filesystem operation of a workload, keeping
// only synced state plus a random part of the unsynced state, many times over: after the
// "crash" every acknowledged batch must be present and intact, the batch in flight whole or
// absent, and the log must accept appends.
func TestCrashSimulation(t *testing.T) {
	seeds := 400
	if testing.Short() {
		seeds = 50
	}
	for seed := range uint64(seeds) {
		opts := Options{SegmentBytes: 256 + int64(seed%5)*400, ReadBufferBytes: 64 << (seed % 4)}

		// Count the workload's operations once, without a crash.
		counter := faultfs.Wrap(faultfs.NewCrashFS(), nil)
		o := opts
		o.FS = counter
		if w := newWorkload(seed, o); !w.run(zap.NewNop()) {
			t.Fatalf("seed %d: workload failed without a crash: %v", seed, w.errs)
		}
		crng := rand.New(rand.NewPCG(seed, 0xc4a5))
		crashAt := crng.Int64N(counter.Ops() + 1)

		mem := faultfs.NewCrashFS()
		w := newWorkload(seed, o)
		var crashed *faultfs.CrashFS
		var st ackState
		var seen int64
		crashOpts := faultfs.CrashOptions{Rand: crng, ZeroFill: seed%3 == 0}
		o.FS = faultfs.Wrap(mem, faultfs.InjectorFunc(func(faultfs.Op) error {
			if seen == crashAt {
				crashed, st = mem.CrashClone(crashOpts), w.snapshot()
			}
			seen++
			return nil
		}))
		w.opts = o
		if !w.run(zap.NewNop()) {
			t.Fatalf("seed %d: workload failed: %v", seed, w.errs)
		}
		if crashed == nil {
			crashed, st = mem.CrashClone(crashOpts), w.snapshot()
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			verifyAcked(t, crashed, w.dir, opts, st)
		})
	}
}
