package statelog

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
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
		failures, logged := observer.New(zapcore.ErrorLevel)
		ok := runNoPanic(t, i, w, failures)
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
		if ok && removerFailed(logged, op) {
			// The background deletion of a segment below the log-start offset, or the directory
			// sync after it, failed: the log goes on (its records are no longer needed), and the
			// next Open deletes the segment.
			verifyAcked(t, mem.CrashClone(faultfs.CrashOptions{}), w.dir, opts, w.snapshot())
			verifyAcked(t, mem, w.dir, opts, w.snapshot())
			if f, err := mem.Open(op.Path); op.Kind == faultfs.OpRemove && !errors.Is(err, fs.ErrNotExist) {
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

// runNoPanic runs w with a logger that writes to the test's log and to also.
func runNoPanic(t *testing.T, i int64, w *workload, also zapcore.Core) (ok bool) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("op %d: panic: %v", i, r)
		}
	}()
	logger := zaptest.NewLogger(t, zaptest.WrapOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewTee(c, also)
	})))
	return w.run(logger.Named("workload"))
}

// removerFailed reports whether the log's segment remover logged the failure of op: a deletion
// of a segment below the log-start offset, or the directory sync after deletions. Neither
// fails the log.
func removerFailed(logged *observer.ObservedLogs, op faultfs.Op) bool {
	for _, e := range logged.All() {
		switch {
		case op.Kind == faultfs.OpRemove && strings.HasPrefix(e.Message, "could not delete a segment below the log-start offset"):
			if e.ContextMap()["segment"] == op.Path {
				return true
			}
		case op.Kind == faultfs.OpSyncDir && strings.HasPrefix(e.Message, "could not sync the directory after deleting segments"):
			if e.ContextMap()["dir"] == op.Path {
				return true
			}
		}
	}
	return false
}
