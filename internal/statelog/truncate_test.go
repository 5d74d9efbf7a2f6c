package statelog

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/vfs"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

func ptr(v int64) *int64 { return &v }

// recoverers are the two ways to recover a log; both must honour TruncateAfter alike.
var recoverers = []struct {
	name string
	open func(t *testing.T, dir string, opts Options) (*Log, []rec, error)
}{
	{name: "open", open: func(t *testing.T, dir string, opts Options) (*Log, []rec, error) {
		l, err := Open(zaptest.NewLogger(t), dir, opts)
		if err != nil {
			return nil, nil, err
		}
		return l, readAll(t, l, l.StartOffset()), nil
	}},
	{name: "load", open: func(t *testing.T, dir string, opts Options) (*Log, []rec, error) {
		var recs []rec
		l, err := Load(zaptest.NewLogger(t), dir, opts, collect(&recs))
		return l, recs, err
	}},
}

// TestTruncateAfter reopens the corruption table's log (3 segments × 3 frames × 2 records:
// segment bases 0, 6, 12, end 18) with every kind of truncation offset.
func TestTruncateAfter(t *testing.T) {
	tests := []struct {
		name      string
		start     int64 // log-start offset set before the cut (0: none)
		damage    func(t *testing.T, segs []string)
		cut       int64
		wantEnd   int64
		wantSegs  int   // segment files after the cut
		wantSize  int64 // size of the newest segment after the cut
		wantCut   bool  // bytes were removed (logged and counted)
		wantErr   error // errors.Is target; nil: success unless wantCorrupt or wantOther
		corrupt   bool
		otherErr  string // a plain error containing this
		unchanged bool   // on error, nothing changed
	}{
		{name: "at the end: nothing to cut", cut: 18, wantEnd: 18, wantSegs: 3, wantSize: framePos(3)},
		{name: "the last frame", cut: 16, wantEnd: 16, wantSegs: 3, wantSize: framePos(2), wantCut: true},
		{name: "at a segment base: that segment and later ones go", cut: 12, wantEnd: 12, wantSegs: 2, wantSize: framePos(3), wantCut: true},
		{name: "inside an older segment", cut: 8, wantEnd: 8, wantSegs: 2, wantSize: framePos(1), wantCut: true},
		{name: "everything", cut: 0, wantEnd: 0, wantSegs: 1, wantSize: segmentHeaderSize, wantCut: true},
		{name: "at the start offset, which is a segment base", start: 12, cut: 12, wantEnd: 12, wantSegs: 1, wantSize: segmentHeaderSize, wantCut: true},
		{name: "damage past the cut is not read", cut: 14, wantEnd: 14, wantSegs: 3, wantSize: framePos(1), wantCut: true,
			damage: func(t *testing.T, segs []string) {
				editFile(t, segs[2], func(b []byte) []byte { return frameDamage(t, "garbage")(b, framePos(1)) })
			}},
		{name: "a damaged header past the cut is not read", cut: 12, wantEnd: 12, wantSegs: 2, wantSize: framePos(3), wantCut: true,
			damage: func(t *testing.T, segs []string) {
				editFile(t, segs[2], func(b []byte) []byte { b[3] ^= 0xff; return b })
			}},
		{name: "a bad last frame below the cut is corruption, not a torn tail", cut: 18, corrupt: true, unchanged: true,
			damage: func(t *testing.T, segs []string) {
				editFile(t, segs[2], func(b []byte) []byte { return frameDamage(t, "bad payload checksum")(b, framePos(2)) })
			}},
		{name: "a log that ends before the cut is corruption", cut: 19, corrupt: true, unchanged: true},
		{name: "a cut inside a frame", cut: 7, otherErr: "holds offsets [6, 8)", unchanged: true},
		{name: "a cut below the start offset", start: 8, cut: 6, wantErr: ErrOutOfRange, unchanged: true},
		{name: "a negative cut", cut: -1, wantErr: ErrOutOfRange, unchanged: true},
	}
	for _, tc := range tests {
		for _, rc := range recoverers {
			t.Run(tc.name+"/"+rc.name, func(t *testing.T) {
				dir, segs, model := buildCorruptionLog(t)
				if tc.start > 0 {
					l := mustOpen(t, dir, ctOptions())
					if err := l.SetStartOffset(tc.start); err != nil {
						t.Fatal(err)
					}
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
				}
				if tc.damage != nil {
					tc.damage(t, segs)
				}
				before := dirContent(t, dir)
				reg := prometheus.NewRegistry()
				opts := ctOptions()
				opts.Metrics, opts.Name, opts.TruncateAfter = NewMetrics(reg), "4", ptr(tc.cut)
				l, recs, err := rc.open(t, dir, opts)
				switch {
				case tc.wantErr != nil:
					if !errors.Is(err, tc.wantErr) {
						t.Fatalf("error %v, want %v", err, tc.wantErr)
					}
				case tc.corrupt:
					asCorruption(t, err)
				case tc.otherErr != "":
					if err == nil || errors.As(err, new(*CorruptionError)) || !strings.Contains(err.Error(), tc.otherErr) {
						t.Fatalf("error %v, want a plain error containing %q", err, tc.otherErr)
					}
				case err != nil:
					t.Fatal(err)
				}
				if err != nil {
					if tc.unchanged && !maps.Equal(before, dirContent(t, dir)) {
						t.Fatal("a refused cut changed the log")
					}
					return
				}
				defer l.Close()
				if l.EndOffset() != tc.wantEnd {
					t.Fatalf("EndOffset %d, want %d", l.EndOffset(), tc.wantEnd)
				}
				checkRecords(t, recs, want(model[:tc.wantEnd], l.StartOffset()))
				files := segmentFiles(t, l.fs, dir)
				if len(files) != tc.wantSegs {
					t.Fatalf("segments %v, want %d", files, tc.wantSegs)
				}
				fi, err := os.Stat(filepath.Join(dir, files[len(files)-1]))
				if err != nil {
					t.Fatal(err)
				}
				if fi.Size() != tc.wantSize {
					t.Fatalf("newest segment has %d bytes, want %d", fi.Size(), tc.wantSize)
				}
				if got := metricValue(t, reg, "sharecoord_state_log_durable_end_truncations_total", "4"); (got == 1) != tc.wantCut || got > 1 {
					t.Fatalf("durable-end truncations = %v, want a cut: %v", got, tc.wantCut)
				}
				// Appends continue at the cut, and the cut is durable.
				if first := mustAppend(t, l, ctBatch(50)); first != tc.wantEnd {
					t.Fatalf("Append after the cut returned offset %d, want %d", first, tc.wantEnd)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				l2 := mustOpen(t, dir, ctOptions())
				checkRecords(t, readAll(t, l2, l2.StartOffset()), want(append(slices.Clone(model[:tc.wantEnd]), ctBatch(50)...), l2.StartOffset()))
			})
		}
	}
}

// failOnce is an injector that fails the first operation p selects with err, and no other.
func failOnce(p faultfs.Predicate, err error) faultfs.Injector {
	fired := false
	return faultfs.InjectorFunc(func(op faultfs.Op) error {
		if !fired && p(op) {
			fired = true
			return err
		}
		return nil
	})
}

// The fsyncgate scenario: an append's write reaches the page cache but its sync fails. The
// batch was never acknowledged, yet a plain reopen would find it intact (its pages may be lost
// later). The failed append cuts it off at once; when that cut fails too (here every truncation
// fails while the fault is in place), reopening with the failed log's durable end removes it from
// disk.
func TestTruncateAfterFailedAppend(t *testing.T) {
	tests := []struct {
		name     string
		segBytes int64
		fail     faultfs.Predicate
		wantSegs int
	}{
		{name: "sync of the append fails", segBytes: 1 << 20, fail: faultfs.OnKinds(faultfs.OpSync).And(faultfs.OnPath("*.seg")), wantSegs: 1},
		{name: "sync of a rolled segment's header fails", segBytes: 400, fail: faultfs.OnKinds(faultfs.OpSync).And(faultfs.OnPath("*.seg")), wantSegs: 1},
		{name: "directory sync of a roll fails", segBytes: 400, fail: faultfs.OnKinds(faultfs.OpSyncDir), wantSegs: 1},
	}
	for _, tc := range tests {
		for _, rc := range recoverers {
			t.Run(tc.name+"/"+rc.name, func(t *testing.T) {
				dir := t.TempDir()
				fsys := faultfs.Wrap(vfs.OS(), nil)
				opts := Options{FS: fsys, SegmentBytes: tc.segBytes}
				l := mustOpen(t, dir, opts)
				acked := fixedBatch(1, 3, 100)
				mustAppend(t, l, acked)
				sizeBefore := l.Size()
				once := failOnce(tc.fail, syscall.EIO)
				fsys.SetInjector(faultfs.InjectorFunc(func(op faultfs.Op) error {
					if op.Kind == faultfs.OpTruncate {
						return syscall.EIO
					}
					return once.MaybeError(op)
				}))
				if _, err := l.Append(fixedBatch(2, 3, 100)); !errors.Is(err, ErrFailed) {
					t.Fatalf("Append = %v, want ErrFailed", err)
				}
				fsys.SetInjector(nil)
				durableEnd := l.EndOffset()
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				// Without the cut the unacknowledged bytes are found again (as a batch, or as
				// a rolled segment the next appends would continue).
				plain := copyDir(t, dir)
				pl := mustOpen(t, plain, Options{SegmentBytes: tc.segBytes})
				if pl.Size() == sizeBefore {
					t.Fatal("the failed append left nothing on disk: the test shows nothing")
				}
				if err := pl.Close(); err != nil {
					t.Fatal(err)
				}

				reg := prometheus.NewRegistry()
				l, recs, err := rc.open(t, dir, Options{SegmentBytes: tc.segBytes, TruncateAfter: &durableEnd, Metrics: NewMetrics(reg), Name: "1"})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				checkRecords(t, recs, want(acked, 0))
				if l.EndOffset() != durableEnd || l.Size() != sizeBefore {
					t.Fatalf("after the cut: end %d, size %d; want %d, %d", l.EndOffset(), l.Size(), durableEnd, sizeBefore)
				}
				if got := len(segmentFiles(t, l.fs, dir)); got != tc.wantSegs {
					t.Fatalf("%d segments after the cut, want %d", got, tc.wantSegs)
				}
				if got := metricValue(t, reg, "sharecoord_state_log_durable_end_truncations_total", "1"); got != 1 {
					t.Fatalf("durable-end truncations = %v, want 1", got)
				}
			})
		}
	}
}

// A failed append cuts its frame off the segment before it returns, with the segment's own
// truncation and fdatasync, so that neither a reopen nor a power cut after it (nor a restart of a
// process killed before any reopen) finds the unacknowledged batch. This holds with a SyncGroup
// too, whose failed sync the cut does not depend on; and when the failed sync had written the
// frame to the disk all the same (a write-back error of other pages), which only the cut's own
// sync undoes.
func TestFailedAppendCutAtOnce(t *testing.T) {
	for _, tc := range []struct {
		group  bool
		landed bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		group := tc.group
		name := map[bool]string{false: "fdatasync", true: "sync group"}[group]
		if tc.landed {
			name += "/frame written back"
		}
		t.Run(name, func(t *testing.T) {
			mem := faultfs.NewCrashFS()
			fsys := faultfs.Wrap(mem, nil)
			opts := Options{FS: fsys}
			fail := faultfs.OnKinds(faultfs.OpSync).And(faultfs.OnPath("*.seg"))
			if group {
				g, err := NewSyncGroup(zaptest.NewLogger(t), "/", SyncGroupOptions{FS: fsys})
				if err != nil {
					t.Fatal(err)
				}
				opts.SyncGroup, fail = g, faultfs.OnKinds(faultfs.OpSyncFS)
			}
			l := mustOpen(t, "/log", opts)
			acked := fixedBatch(1, 3, 100)
			mustAppend(t, l, acked)
			sizeBefore := l.Size()
			var syncErr error = syscall.EIO
			if tc.landed {
				syncErr = faultfs.AfterEffect(syscall.EIO)
			}
			fsys.SetInjector(failOnce(fail, syncErr))
			if _, err := l.Append(fixedBatch(2, 3, 100)); !errors.Is(err, ErrFailed) {
				t.Fatalf("Append = %v, want ErrFailed", err)
			}
			fsys.SetInjector(nil)
			// The process ends here (Close does not cut): no reopen at the durable end ever
			// happens. A restart finds what the page cache holds, a power cut what was synced.
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			for name, fs := range map[string]FS{"restart": mem, "power cut": mem.CrashClone(faultfs.CrashOptions{})} {
				var recs []rec
				l2, err := Load(zaptest.NewLogger(t), "/log", Options{FS: fs}, collect(&recs))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				checkRecords(t, recs, want(acked, 0))
				if l2.Size() != sizeBefore {
					t.Errorf("%s: log of %d bytes, want the %d acknowledged", name, l2.Size(), sizeBefore)
				}
				if err := l2.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// Scan and Repair ignore the truncation offset: they never cut.
func TestTruncateAfterIgnoredByScanAndRepair(t *testing.T) {
	dir, _, model := buildCorruptionLog(t)
	before := dirContent(t, dir)
	opts := ctOptions()
	opts.TruncateAfter = ptr(4)
	var n int
	if err := Scan(zaptest.NewLogger(t), dir, opts, func(int64, []byte) error { n++; return nil }); err != nil || n != len(model) {
		t.Fatalf("Scan = %v after %d records, want %d records", err, n, len(model))
	}
	if report, err := Repair(zaptest.NewLogger(t), dir, opts); err != nil || report.DroppedBytes != 0 {
		t.Fatalf("Repair = %+v, %v; want a zero report", report, err)
	}
	after := dirContent(t, dir)
	delete(after, cleanFileName) // Repair ends by opening and closing the log it verified
	if !maps.Equal(before, after) {
		t.Fatal("Scan or Repair cut the log")
	}
}
