package statelog

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/coordinatord/coordinatord/internal/statelog/faultfs"
	"go.uber.org/zap/zaptest"
)

// TestFaultInjectionEveryOperation fails filesystem operation #i of a workload, for every i
// until the workload runs through: every failure must surface as an error (wrapping the
// injected one), the log must refuse appends after it, and reopening (after a restart, and
// after a power cut) must find exactly the acknowledged batches, plus at most the one in
// flight, whole.
func TestFaultInjectionEveryOperation(t *testing.T) {
	tests := []struct {
		name string
		seed uint64
		opts Options
	}{
		{name: "rolls", seed: 1, opts: Options{SegmentBytes: 1024, ReadBufferBytes: 128}},
		{name: "segment per batch", seed: 2, opts: Options{SegmentBytes: 1}},
		{name: "one segment", seed: 3, opts: Options{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			total := faultLoop(t, tc.seed, tc.opts)
			if total < 100 {
				t.Fatalf("the workload performed only %d operations; it should exercise far more", total)
			}
			t.Logf("injected a failure at each of %d operations", total)
		})
	}
}

// faultLoop runs the workload once per operation index and returns the number of operations.
func faultLoop(t *testing.T, seed uint64, opts Options) int64 {
	for i := int64(0); ; i++ {
		mem := faultfs.NewCrashFS()
		inj := faultfs.OnIndex(i, nil)
		o := opts
		o.FS = faultfs.Wrap(mem, inj)
		w := newWorkload(seed, o)
		ok := runNoPanic(t, i, w)
		op, fired := inj.Fired()
		if !fired {
			if !ok {
				t.Fatalf("op %d: workload failed without an injected fault: %v", i, w.errs)
			}
			return i
		}
		if ok && op.Kind == faultfs.OpSyncDir && aboveParent(op.Path, w.dir) {
			// LockDir syncs the ancestors above an existing log's parent where the file system
			// lets it; a failure there is not the log's. Everything acknowledged still holds.
			verifyAcked(t, mem, w.dir, opts, w.snapshot())
			continue
		}
		if ok && op.Kind == faultfs.OpRemove {
			// A segment below the log-start offset could not be deleted in the background: the
			// log goes on (its records are no longer needed), and the next Open deletes it.
			verifyAcked(t, mem, w.dir, opts, w.snapshot())
			if f, err := mem.Open(op.Path); !errors.Is(err, fs.ErrNotExist) {
				if err == nil {
					_ = f.Close()
				}
				t.Fatalf("op %d (%s): the segment is still there after a reopen (open: %v)", i, op, err)
			}
			continue
		}
		if ok || len(w.errs) == 0 {
			t.Fatalf("op %d (%s): the injected failure did not surface", i, op)
		}
		if !errors.Is(w.errs[0], faultfs.ErrInjected) {
			t.Fatalf("op %d (%s): first error %v does not wrap the injected one", i, op, w.errs[0])
		}
		for _, err := range w.errs[1:] {
			t.Fatalf("op %d (%s): unexpected further error %v", i, op, err)
		}
		st := w.snapshot()
		t.Run(fmt.Sprintf("op=%d", i), func(t *testing.T) {
			t.Logf("failed %s", op)
			verifyAcked(t, mem.CrashClone(faultfs.CrashOptions{}), w.dir, opts, st)
			verifyAcked(t, mem, w.dir, opts, st)
		})
	}
}

// aboveParent reports whether p is an ancestor of dir's parent directory.
func aboveParent(p, dir string) bool {
	for a := filepath.Dir(filepath.Dir(dir)); ; a = filepath.Dir(a) {
		if a == p {
			return true
		}
		if filepath.Dir(a) == a {
			return false
		}
	}
}

func runNoPanic(t *testing.T, i int64, w *workload) (ok bool) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("op %d: panic: %v", i, r)
		}
	}()
	return w.run(zaptest.NewLogger(t).Named("workload"))
}
