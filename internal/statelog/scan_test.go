package statelog

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

func scanAll(t *testing.T, path string, opts Options) ([]rec, error) {
	t.Helper()
	var out []rec
	err := Scan(zaptest.NewLogger(t), path, opts, collect(&out))
	return out, err
}

func TestScan(t *testing.T) {
	dir, segs, model := buildCorruptionLog(t)
	opts := ctOptions()
	opts.ReadBufferBytes = 100

	t.Run("directory", func(t *testing.T) {
		got, err := scanAll(t, dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, got, want(model, 0))
	})
	t.Run("single segment file", func(t *testing.T) {
		got, err := scanAll(t, segs[1], opts)
		if err != nil {
			t.Fatal(err)
		}
		first := int64(recordsBefore(1, 0))
		checkRecords(t, got, want(model[:recordsBefore(2, 0)], first))
	})
	t.Run("skips below the start offset", func(t *testing.T) {
		d := copyDir(t, dir)
		l := mustOpen(t, d, opts)
		if err := l.SetStartOffset(9); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := scanAll(t, d, opts)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, got, want(model, 9))
	})
	t.Run("torn tail ends the scan and is left alone", func(t *testing.T) {
		d := copyDir(t, dir)
		newest := filepath.Join(d, filepath.Base(segs[2]))
		editFile(t, newest, func(b []byte) []byte { return b[:len(b)-7] })
		before := dirContent(t, d)
		got, err := scanAll(t, d, opts)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, got, want(model[:recordsBefore(2, 2)], 0))
		got, err = scanAll(t, newest, opts)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, got, want(model[:recordsBefore(2, 2)], int64(recordsBefore(2, 0))))
		if after := dirContent(t, d); !maps.Equal(before, after) {
			t.Fatal("Scan modified the log")
		}
	})
	t.Run("callback error returned as is", func(t *testing.T) {
		stop := errors.New("stop")
		n := 0
		err := Scan(zaptest.NewLogger(t), dir, opts, func(int64, []byte) error {
			n++
			if n == 4 {
				return stop
			}
			return nil
		})
		if err != stop || n != 4 {
			t.Fatalf("Scan = %v after %d records, want stop after 4", err, n)
		}
	})
	t.Run("corruption stops the scan after the records before it", func(t *testing.T) {
		d := copyDir(t, dir)
		p := filepath.Join(d, filepath.Base(segs[1]))
		editFile(t, p, func(b []byte) []byte { b[framePos(1)+frameHeaderSize+3] ^= 1; return b })
		got, err := scanAll(t, d, opts)
		if ce := asCorruption(t, err); ce.Segment != p || ce.Offset != framePos(1) {
			t.Fatalf("corruption in %s at byte %d, want %s at %d", ce.Segment, ce.Offset, p, framePos(1))
		}
		checkRecords(t, got, want(model[:recordsBefore(1, 1)], 0))
	})
	t.Run("missing path", func(t *testing.T) {
		if _, err := scanAll(t, filepath.Join(dir, "nope"), opts); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Scan of a missing path = %v, want ErrNotExist", err)
		}
	})
	t.Run("single file with a bad header", func(t *testing.T) {
		d := copyDir(t, dir)
		p := filepath.Join(d, filepath.Base(segs[0]))
		editFile(t, p, func(b []byte) []byte { b[0] ^= 1; return b })
		_, err := scanAll(t, p, opts)
		if ce := asCorruption(t, err); ce.Offset != 0 {
			t.Fatalf("corruption at byte %d, want 0", ce.Offset)
		}
	})
}

// An empty directory, or one whose only file is the lock of a log that never got a segment, is
// not an empty log to the operator's tools: Scan and Repair refuse it and leave it as it was,
// while Open still starts a new log there.
func TestScanAndRepairRefuseDirectoryWithoutLog(t *testing.T) {
	for _, files := range [][]string{nil, {lockFileName}, {lockFileName, "notes.txt"}} {
		dir := t.TempDir()
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := dirContent(t, dir)
		recs, err := scanAll(t, dir, Options{})
		if !errors.Is(err, ErrNoLog) || len(recs) > 0 {
			t.Errorf("Scan of a directory holding %q: %d records, %v; want ErrNoLog", files, len(recs), err)
		}
		report, err := Repair(zaptest.NewLogger(t), dir, Options{})
		if !errors.Is(err, ErrNoLog) || len(report.Corruptions) > 0 || report.TornTail != nil || report.StartOffsetReset {
			t.Errorf("Repair of a directory holding %q: %+v, %v; want ErrNoLog", files, report, err)
		}
		if after := dirContent(t, dir); !maps.Equal(before, after) {
			t.Errorf("a refused Scan or Repair changed the directory: %q before, %q after", before, after)
		}
		l, err := Open(zaptest.NewLogger(t), dir, Options{})
		if err != nil {
			t.Fatalf("Open of a directory holding %q: %v", files, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := scanAll(t, dir, Options{}); err != nil {
			t.Errorf("Scan of the new log Open started: %v", err)
		}
	}
}

// A directory whose only log-like file is a misnamed segment is a damaged log, not an absent one:
// Scan reports the corruption, as Open does.
func TestScanReportsLoneMisnamedSegment(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "junk.seg"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptionError
	if _, err := scanAll(t, dir, Options{}); !errors.As(err, &ce) {
		t.Fatalf("Scan = %v, want a *CorruptionError", err)
	}
	if _, err := Open(zaptest.NewLogger(t), dir, Options{}); !errors.As(err, &ce) {
		t.Fatalf("Open = %v, want a *CorruptionError", err)
	}
}

// A server using the log changes it under a scan. Scan reads it again when a read fails and
// the directory changed, and hands every record over once, in order.
func TestScanOfALogInUse(t *testing.T) {
	batch := func(i int) [][]byte { return fixedBatch(uint64(i), 1, 80) }
	opts := Options{SegmentBytes: segmentHeaderSize + 2*frameLen(batch(0))}
	build := func(t *testing.T) (*faultfs.CrashFS, [][]byte) {
		mem := faultfs.NewCrashFS()
		o := opts
		o.FS = mem
		l := mustOpen(t, "/log", o)
		var model [][]byte
		for i := range 7 { // segments at 0, 2, 4, 6; the last holds one batch
			mustAppend(t, l, batch(i))
			model = append(model, batch(i)...)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return mem, model
	}
	// readListing is the listing of the directory with which the read itself starts: Scan lists
	// it once before, with the files' sizes, to find a log and to see a change later.
	const readListing = 2
	// scan scans /log of mem, calling change once, when the read first opens the segment file
	// name (before the open goes through).
	scan := func(t *testing.T, mem *faultfs.CrashFS, name string, change func()) ([]rec, error) {
		t.Helper()
		listings, changed := 0, false
		o := opts
		o.FS = faultfs.Wrap(mem, faultfs.InjectorFunc(func(op faultfs.Op) error {
			if op.Kind == faultfs.OpReadDir {
				listings++
			}
			if listings >= readListing && !changed && op.Kind == faultfs.OpOpen && op.Path == "/log/"+name {
				changed = true
				change()
			}
			return nil
		}))
		var got []rec
		err := Scan(zaptest.NewLogger(t), "/log", o, collect(&got))
		if !changed {
			t.Fatalf("the read never opened %s", name)
		}
		return got, err
	}

	t.Run("a prune deletes the segment about to be read", func(t *testing.T) {
		mem, model := build(t)
		o := opts
		o.FS = mem
		l := mustOpen(t, "/log", o)
		got, err := scan(t, mem, segmentName(0, 1), func() {
			if err := l.SetStartOffset(5); err != nil {
				t.Error(err)
			}
			l.remover.wait()
		})
		if err != nil {
			t.Fatalf("Scan = %v, want the log read again after the prune", err)
		}
		checkRecords(t, got, want(model, 5))
	})
	// A start-up removes the clean end and appends past it; a server that also stops again
	// while the scan reads leaves the same file names, with other sizes.
	for _, stops := range []bool{false, true} {
		t.Run(fmt.Sprintf("a server starts and appends during the read/stops again=%v", stops), func(t *testing.T) {
			mem, model := build(t)
			o := opts
			o.FS = mem
			got, err := scan(t, mem, segmentName(6, 4), func() {
				l := mustOpen(t, "/log", o)
				mustAppend(t, l, batch(7)) // into the segment at 6, past the clean end
				if !stops {
					return
				}
				if err := l.Close(); err != nil {
					t.Error(err)
				}
			})
			if err != nil {
				t.Fatalf("Scan = %v, want the log read again after the start-up", err)
			}
			checkRecords(t, got, want(append(model, batch(7)...), 0))
		})
	}
	t.Run("a server stops before the read and starts again during it", func(t *testing.T) {
		mem := faultfs.NewCrashFS()
		o := opts
		o.FS = mem
		running := mustOpen(t, "/log", o)
		var model [][]byte
		for i := range 7 {
			mustAppend(t, running, batch(i))
			model = append(model, batch(i)...)
		}
		listings, restarted := 0, false
		so := opts
		so.FS = faultfs.Wrap(mem, faultfs.InjectorFunc(func(op faultfs.Op) error {
			if op.Kind == faultfs.OpReadDir && op.Path == "/log" {
				if listings++; listings == readListing { // the server has just stopped
					if err := running.Close(); err != nil {
						t.Error(err)
					}
				}
			}
			if listings >= readListing && !restarted && op.Kind == faultfs.OpOpen && op.Path == "/log/"+segmentName(6, 4) {
				restarted = true
				mustAppend(t, mustOpen(t, "/log", o), batch(7))
			}
			return nil
		}))
		var got []rec
		err := Scan(zaptest.NewLogger(t), "/log", so, collect(&got))
		if !restarted {
			t.Fatal("the server never restarted during the read")
		}
		if err != nil {
			t.Fatalf("Scan = %v, want the log read again after the restart", err)
		}
		checkRecords(t, got, want(append(model, batch(7)...), 0))
	})
	t.Run("damage in a log that does not change is reported at once", func(t *testing.T) {
		mem, _ := build(t)
		o := opts
		o.FS = mem
		f, err := mem.OpenReadWrite("/log/" + segmentName(2, 2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{0xff}, segmentHeaderSize+frameHeaderSize+5); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		core, logged := observer.New(zapcore.WarnLevel)
		err = Scan(zap.New(core), "/log", o, func(int64, []byte) error { return nil })
		asCorruption(t, err)
		if n := logged.FilterMessageSnippet("reading it again").Len(); n != 0 {
			t.Fatalf("the log was read again %d times: a damaged log that did not change is read once", n)
		}
	})
}
