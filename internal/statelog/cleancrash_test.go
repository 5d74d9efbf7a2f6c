package statelog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/vfs"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// errCrash stops the clean-end workload at the operation where the power is cut.
var errCrash = errors.New("crash")

// cleanWorkload opens, appends (rolling segments), moves the log-start offset and closes the log
// in /log several times over, recording what was acknowledged; it stops at the first error.
type cleanWorkload struct {
	model    [][]byte // acknowledged records, by offset
	inflight int      // records of the append in progress, 0 if none
	start    int64    // acknowledged log-start offset
	startTo  int64    // log-start offset being set, -1 if none
	group    bool     // the log syncs through a SyncGroup (state.log.sync=filesystem)
}

func cleanCrashOptions(fsys FS) Options {
	return Options{FS: fsys, SegmentBytes: 200}
}

func (w *cleanWorkload) run(fsys FS) error {
	w.startTo = -1
	opts := cleanCrashOptions(fsys)
	if w.group {
		g, err := NewSyncGroup(zap.NewNop(), "/", SyncGroupOptions{FS: fsys})
		if err != nil {
			return err
		}
		defer func() { _ = g.Close() }()
		opts.SyncGroup = g
	}
	seed := uint64(0)
	batch := func(n int) [][]byte { seed++; return fixedBatch(seed, n, 30) }
	appendN := func(l *Log, counts ...int) error {
		for _, n := range counts {
			b := batch(n)
			w.inflight = n
			if _, err := l.Append(b); err != nil {
				return err
			}
			w.inflight = 0
			w.model = append(w.model, b...)
		}
		return nil
	}
	setStart := func(l *Log, off int64) error {
		w.startTo = off
		if err := l.SetStartOffset(off); err != nil {
			return err
		}
		l.remover.wait() // the same order of operations on every run
		w.start, w.startTo = off, -1
		return nil
	}
	for round := range 3 {
		l, err := Open(zap.NewNop(), "/log", opts)
		if err != nil {
			return err
		}
		// Two records of 30 bytes make a 96-byte frame: a 200-byte segment holds one, so
		// every append after the first of a segment rolls.
		err = appendN(l, 2, 2)
		if err == nil && round == 1 {
			err = setStart(l, int64(len(w.model))-2)
		}
		if err == nil && round == 2 {
			err = setStart(l, int64(len(w.model)))
		}
		if cerr := l.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkCleanCrash opens the log a power cut left, checks that it holds every acknowledged
// record, closes it cleanly and does the same again twice, appending once: neither the cut nor
// a clean close after the recovery may make a healthy log look corrupt.
func checkCleanCrash(t *testing.T, fsys FS, w cleanWorkload) {
	t.Helper()
	for pass := range 3 {
		var got []rec
		l, err := Load(zap.NewNop(), "/log", cleanCrashOptions(fsys), collect(&got))
		if err != nil {
			t.Fatalf("pass %d: Load after the crash: %v", pass, err)
		}
		start, end := l.StartOffset(), l.EndOffset()
		acked := int64(len(w.model))
		if end != acked && end != acked+int64(w.inflight) {
			t.Fatalf("pass %d: the log ends at %d, want %d (or %d with the append in flight)", pass, end, acked, acked+int64(w.inflight))
		}
		if start != w.start && start != w.startTo {
			t.Fatalf("pass %d: the log starts at %d, want %d (or %d being set)", pass, start, w.start, w.startTo)
		}
		// Records of the append in flight are not known; check what was acknowledged.
		compareRecs(t, "Load", got[:min(len(got), int(max(0, acked-start)))], want(w.model, start))
		if pass == 1 {
			// An append after recovery and a clean close, then a clean close.
			if _, err := l.Append(fixedBatch(99, 2, 30)); err != nil {
				t.Fatal(err)
			}
			// The log now holds what Load delivered, the append in flight included if it survived.
			model := append([][]byte(nil), w.model[:start]...)
			for _, r := range got {
				model = append(model, r.data)
			}
			w.model = model
			w.model = append(w.model, fixedBatch(99, 2, 30)...)
			w.inflight = 0
			if start == w.startTo {
				w.start = start
			}
			w.startTo = -1
		}
		if err := l.Close(); err != nil {
			t.Fatalf("pass %d: Close: %v", pass, err)
		}
	}
}

// TestCleanEndCrashAtEveryOperation cuts the power before each file-system operation of a
// workload of opens, appends, rolls, SetStartOffset and clean closes in turn: whatever
// survives (only the synced state, or a random part of the rest), the log opens with every
// acknowledged record, and opens again after a clean close; with per-file syncs and with a
// SyncGroup.
func TestCleanEndCrashAtEveryOperation(t *testing.T) {
	for _, group := range []bool{false, true} {
		t.Run(fmt.Sprintf("group=%v", group), func(t *testing.T) { testCleanEndCrashAtEveryOperation(t, group) })
	}
}

func testCleanEndCrashAtEveryOperation(t *testing.T, group bool) {
	counter := faultfs.Wrap(faultfs.NewCrashFS(), nil)
	w := cleanWorkload{group: group}
	if err := w.run(counter); err != nil {
		t.Fatal(err)
	}
	ops := counter.Ops()
	for i := range ops + 1 {
		variants := 3
		if group {
			variants = 2 // the SyncGroup changes how appends are synced, not what a cut keeps
		}
		for variant := range variants {
			mem := faultfs.NewCrashFS()
			w := cleanWorkload{group: group}
			var crashed *faultfs.CrashFS
			var at cleanWorkload
			seen := int64(0)
			crashOpts := faultfs.CrashOptions{}
			if variant > 0 {
				crashOpts.Rand = rand.New(rand.NewPCG(uint64(i), uint64(variant)))
				crashOpts.ZeroFill = variant == 2
			}
			fsys := faultfs.Wrap(mem, faultfs.InjectorFunc(func(op faultfs.Op) error {
				if seen++; seen-1 == i && op.Kind != faultfs.OpClose {
					crashed, at = mem.CrashClone(crashOpts), w
					at.model = append([][]byte(nil), w.model...)
					return errCrash
				}
				return nil
			}))
			err := w.run(fsys)
			if crashed == nil {
				if err != nil {
					t.Fatalf("op %d: %v", i, err)
				}
				crashed, at = mem.CrashClone(crashOpts), w
			}
			t.Run(fmt.Sprintf("op=%d/variant=%d", i, variant), func(t *testing.T) {
				checkCleanCrash(t, crashed, at)
			})
		}
	}
}

// A healthy log can end in a segment that holds nothing but its header: a crash tore the first
// append after a roll, and recovery truncated it. Closed cleanly, its clean-end file records the
// segment's base offset as the end; the next Open must not take that segment for bytes past the
// end (nor Repair for damage).
func TestCleanEndAtHeaderOnlyNewestSegment(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 200}
	l := mustOpen(t, dir, opts)
	model := fixedBatch(1, 2, 30)
	mustAppend(t, l, model)
	mustAppend(t, l, fixedBatch(2, 2, 30)) // rolls: the newest segment starts at offset 2
	kill(t, l)
	segs := segmentFiles(t, vfs.OS(), dir)
	if len(segs) != 2 {
		t.Fatalf("segments %v, want 2", segs)
	}
	// The crash tore the append after the roll.
	editFile(t, filepath.Join(dir, segs[1]), func(b []byte) []byte { return b[:segmentHeaderSize+10] })

	l = mustOpen(t, dir, opts)
	if l.EndOffset() != 2 || l.segments[len(l.segments)-1].size != segmentHeaderSize {
		t.Fatalf("after the crash the log ends at %d, newest segment %d bytes", l.EndOffset(), l.segments[len(l.segments)-1].size)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, opts)
	checkRecords(t, readAll(t, l, 0), want(model, 0))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Bytes after the header of that segment are still past the clean end.
	damaged := copyDir(t, dir)
	editFile(t, filepath.Join(damaged, segs[1]), func(b []byte) []byte { return append(b, 1, 2, 3) })
	_, err := Open(zaptest.NewLogger(t), damaged, opts)
	if ce := asCorruption(t, err); ce.kind != damageClean {
		t.Fatalf("Open of a log with bytes past its clean end: %v, want damage of kind damageClean", ce)
	}

	report, err := Repair(zaptest.NewLogger(t), dir, opts)
	if err != nil || len(report.Corruptions) > 0 || report.DroppedBytes > 0 {
		t.Fatalf("Repair of a healthy log: %+v, %v", report, err)
	}
	l = mustOpen(t, dir, opts)
	checkRecords(t, readAll(t, l, 0), want(model, 0))
	mustAppend(t, l, fixedBatch(3, 2, 30))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, opts)
	checkRecords(t, readAll(t, l, 0), want(append(model, fixedBatch(3, 2, 30)...), 0))
}

// TestCleanEndRepairCrashAtEveryOperation cuts the power before each file-system operation of a
// Repair of a cleanly closed log whose last frame was cut short (corruption, as the log was
// closed cleanly): whatever survives, a second Repair ends, and leaves a log that opens with
// every record before the damaged frame, twice over (its own clean close included).
func TestCleanEndRepairCrashAtEveryOperation(t *testing.T) {
	build := func() (*faultfs.CrashFS, [][]byte) {
		mem := faultfs.NewCrashFS()
		l, err := Open(zap.NewNop(), "/log", cleanCrashOptions(mem))
		if err != nil {
			t.Fatal(err)
		}
		var model [][]byte
		for i := range 4 {
			b := fixedBatch(uint64(i+1), 2, 30)
			mustAppend(t, l, b)
			model = append(model, b...)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		segs := segmentFiles(t, mem, "/log")
		last := filepath.Join("/log", segs[len(segs)-1])
		b, err := mem.ReadFile(last)
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.WriteFile(last, b[:len(b)-10]); err != nil {
			t.Fatal(err)
		}
		return mem, model[:len(model)-2]
	}
	mem, _ := build()
	counter := faultfs.Wrap(mem, nil)
	if _, err := Repair(zap.NewNop(), "/log", cleanCrashOptions(counter)); err != nil {
		t.Fatal(err)
	}
	for i := range counter.Ops() + 1 {
		mem, kept := build()
		var crashed *faultfs.CrashFS
		seen := int64(0)
		fsys := faultfs.Wrap(mem, faultfs.InjectorFunc(func(op faultfs.Op) error {
			if seen++; seen-1 == i && op.Kind != faultfs.OpClose {
				crashed = mem.CrashClone(faultfs.CrashOptions{})
				return errCrash
			}
			return nil
		}))
		_, err := Repair(zap.NewNop(), "/log", cleanCrashOptions(fsys))
		if crashed == nil {
			if err != nil {
				t.Fatalf("op %d: %v", i, err)
			}
			crashed = mem.CrashClone(faultfs.CrashOptions{})
		}
		if _, err := Repair(zap.NewNop(), "/log", cleanCrashOptions(crashed)); err != nil {
			t.Fatalf("op %d: Repair after a crash in Repair: %v", i, err)
		}
		checkCleanCrash(t, crashed, cleanWorkload{model: kept, startTo: -1})
	}
}
