package statelog

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/coordinatord/coordinatord/internal/vfs"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// buildClosedLog writes the corruption table's log and closes it cleanly: its directory holds
// the clean-end file.
func buildClosedLog(t *testing.T) (string, []string, [][]byte) {
	t.Helper()
	return buildTableLog(t, func(l *Log) {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(l.dir, cleanFileName)); err != nil {
			t.Fatalf("Close left no clean-end file: %v", err)
		}
	})
}

// After a clean close no append can have been interrupted, so what recovery after a crash takes
// for a torn tail (and drops) is damage to acknowledged records: Open and Scan refuse the log
// with a *CorruptionError and change nothing, and Repair cuts it out and says so. The same
// damage after a kill is a torn tail (TestCorruptionTable).
func TestCleanCloseTurnsTailDamageIntoCorruption(t *testing.T) {
	last := ctSegments - 1
	lastFrame := ctFramesPerSeg - 1
	tests := []struct {
		name   string
		damage func(t *testing.T, segs []string)
		keep   int // records the repaired log holds
	}{
		{"last frame flipped", func(t *testing.T, segs []string) {
			editFile(t, segs[last], func(b []byte) []byte { b[framePos(lastFrame)+40] ^= 1; return b })
		}, recordsBefore(last, lastFrame)},
		{"last frame cut short", func(t *testing.T, segs []string) {
			editFile(t, segs[last], func(b []byte) []byte { return b[:framePos(lastFrame)+10] })
		}, recordsBefore(last, lastFrame)},
		{"last frame gone", func(t *testing.T, segs []string) {
			editFile(t, segs[last], func(b []byte) []byte { return b[:framePos(lastFrame)] })
		}, recordsBefore(last, lastFrame)},
		{"newest segment cut inside its header", func(t *testing.T, segs []string) {
			editFile(t, segs[last], func(b []byte) []byte { return b[:10] })
		}, recordsBefore(last, 0)},
		{"newest segment deleted", func(t *testing.T, segs []string) {
			if err := os.Remove(segs[last]); err != nil {
				t.Fatal(err)
			}
		}, recordsBefore(last, 0)},
		{"every segment deleted", func(t *testing.T, segs []string) {
			for _, s := range segs {
				if err := os.Remove(s); err != nil {
					t.Fatal(err)
				}
			}
		}, 0},
		{"bytes after the last frame", func(t *testing.T, segs []string) {
			editFile(t, segs[last], func(b []byte) []byte { return append(b, 1, 2, 3, 4, 5) })
		}, recordsBefore(ctSegments, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, segs, model := buildClosedLog(t)
			tc.damage(t, segs)
			before := dirContent(t, dir)

			_, err := Open(zaptest.NewLogger(t), dir, ctOptions())
			ce := asCorruption(t, err)
			if after := dirContent(t, dir); !maps.Equal(before, after) {
				t.Fatal("Open changed a corrupt log")
			}
			err = Scan(zaptest.NewLogger(t), dir, ctOptions(), func(int64, []byte) error { return nil })
			if sce := asCorruption(t, err); sce.Segment != ce.Segment || sce.Offset != ce.Offset {
				t.Fatalf("Scan found %v, Open %v", sce, ce)
			}

			report, err := Repair(zaptest.NewLogger(t), dir, ctOptions())
			if err != nil {
				t.Fatal(err)
			}
			if len(report.Corruptions) == 0 || report.Corruptions[0].Error() != ce.Error() ||
				!strings.Contains(report.Corruptions[len(report.Corruptions)-1].Error(), cleanFileName) {
				t.Fatalf("Repair reported %v, want first %v and last the disagreement with %s", report.Corruptions, ce, cleanFileName)
			}
			if report.EndOffset != int64(tc.keep) {
				t.Fatalf("Repair leaves the log ending at %d, want %d", report.EndOffset, tc.keep)
			}
			l := mustOpen(t, dir, ctOptions())
			defer func() { _ = l.Close() }()
			checkRecords(t, readAll(t, l, 0), want(model[:tc.keep], 0))
		})
	}
}

// Open removes the clean-end file, durably, before the log can change: after a crash the log is
// judged as one, its torn tail truncated, not taken for corruption against the end of an earlier
// clean close.
func TestCleanEndGoesAtOpen(t *testing.T) {
	mem := faultfs.NewCrashFS()
	opts := Options{FS: mem}
	l := mustOpen(t, "/log", opts)
	first := fixedBatch(1, 2, 40)
	mustAppend(t, l, first)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, "/log", opts)
	mustAppend(t, l, fixedBatch(2, 2, 40))
	// A power cut while the next append is written: only part of its frame reaches the disk.
	seg := filepath.Join("/log", segmentFiles(t, mem, "/log")[0])
	buf := encodedFrame(fixedBatch(3, 2, 40), l.EndOffset())
	f, err := mem.OpenReadWrite(seg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(buf[:len(buf)/2], l.segments[0].size); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	crashed := mem.CrashClone(faultfs.CrashOptions{})
	kill(t, l)

	names, err := crashed.ReadDir("/log")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == cleanFileName {
			t.Fatal("the clean-end file of the earlier close survived the power cut")
		}
	}
	opts.FS = crashed
	l = mustOpen(t, "/log", opts)
	defer func() { _ = l.Close() }()
	checkRecords(t, readAll(t, l, 0), want(append(first, fixedBatch(2, 2, 40)...), 0))
}

// A failed log writes no clean-end file when it is closed: its end is not known to be durable,
// and the next Open must judge it as after a crash (or against Options.TruncateAfter).
func TestFailedLogLeavesNoCleanEnd(t *testing.T) {
	mem := faultfs.NewCrashFS()
	var armed atomic.Bool // the segment's syncs fail once the log is open
	opts := Options{FS: faultfs.Wrap(mem, faultfs.InjectorFunc(func(op faultfs.Op) error {
		if armed.Load() && op.Kind == faultfs.OpSync && strings.HasSuffix(op.Path, segmentSuffix) {
			return errors.New("EIO")
		}
		return nil
	}))}
	l := mustOpen(t, "/log", opts)
	armed.Store(true)
	if _, err := l.Append(fixedBatch(1, 2, 40)); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append = %v, want ErrFailed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := mem.ReadDir("/log")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == cleanFileName || n == cleanTmpName {
			t.Fatalf("a failed log left %s", n)
		}
	}
}

// A clean-end file that cannot be read as one (damaged, or below the log-start offset) is not
// trusted: the log opens as after a crash, and the file goes. So does a clean-end.tmp that a
// close interrupted before its rename.
func TestUnusableCleanEndIsIgnored(t *testing.T) {
	for name, edit := range map[string]func(t *testing.T, dir string){
		"flipped byte": func(t *testing.T, dir string) {
			editFile(t, filepath.Join(dir, cleanFileName), func(b []byte) []byte { b[9] ^= 1; return b })
		},
		"wrong size": func(t *testing.T, dir string) {
			editFile(t, filepath.Join(dir, cleanFileName), func(b []byte) []byte { return b[:7] })
		},
		"below the log-start offset": func(t *testing.T, dir string) {
			if err := writeOffsetFile(vfs.OS(), dir, cleanFileName, cleanTmpName, cleanMagic, 2); err != nil {
				t.Fatal(err)
			}
			if err := writeStartFile(vfs.OS(), dir, 4); err != nil {
				t.Fatal(err)
			}
		},
		"interrupted close": func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, cleanFileName)); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, cleanTmpName), []byte("half"), 0o600); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l := mustOpen(t, dir, Options{})
			batch := fixedBatch(1, 6, 30)
			mustAppend(t, l, batch)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			edit(t, dir)
			// Trailing bytes: a torn tail when the clean-end file is not trusted.
			seg := filepath.Join(dir, segmentFiles(t, vfs.OS(), dir)[0])
			editFile(t, seg, func(b []byte) []byte { return append(b, 9, 9, 9) })
			l = mustOpen(t, dir, Options{})
			checkRecords(t, readAll(t, l, l.StartOffset()), want(batch, l.StartOffset()))
			for _, n := range []string{cleanFileName, cleanTmpName} {
				if _, err := os.Stat(filepath.Join(dir, n)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s is still there after Open: %v", n, err)
				}
			}
			kill(t, l)
		})
	}
}

// A clean-end file listed but gone when it is opened (dump-log reading a directory while a server
// opens the log and removes it) reads as no file: the log is scanned as one that is open.
func TestCleanEndRemovedWhileScanned(t *testing.T) {
	dir, _, model := buildClosedLog(t)
	gone := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpOpen && filepath.Base(op.Path) == cleanFileName {
			return fs.ErrNotExist
		}
		return nil
	})
	opts := ctOptions()
	opts.FS = faultfs.Wrap(vfs.OS(), gone)
	var n int
	if err := Scan(zaptest.NewLogger(t), dir, opts, func(int64, []byte) error { n++; return nil }); err != nil || n != len(model) {
		t.Fatalf("Scan = %v after %d records, want %d records", err, n, len(model))
	}
}

// TestCloseOnFullDisk: a Close whose clean-end.tmp write fails with ENOSPC returns the error and
// removes the tmp file it could not fill. One it could not remove either (or that a process
// killed right then left) is removed by the next Open, durably and with a WARN; the log, which
// no clean-end file vouches for, opens as after a crash with every record.
func TestCloseOnFullDisk(t *testing.T) {
	for _, removeFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("remove fails=%v", removeFails), func(t *testing.T) {
			crash := faultfs.NewCrashFS()
			var full atomic.Bool
			tmp := faultfs.OnPath(cleanTmpName)
			inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
				switch {
				case !full.Load() || !tmp(op):
				case op.Kind == faultfs.OpWrite:
					return syscall.ENOSPC
				case op.Kind == faultfs.OpRemove && removeFails:
					return syscall.EIO
				}
				return nil
			})
			l := mustOpen(t, "/log", Options{FS: faultfs.Wrap(crash, inj)})
			batch := fixedBatch(1, 5, 40)
			mustAppend(t, l, batch)
			full.Store(true)
			if err := l.Close(); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Close on a full disk = %v, want ENOSPC", err)
			}
			names := func(fsys vfs.FS) []string {
				t.Helper()
				n, err := fsys.ReadDir("/log")
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			if got := slices.Contains(names(crash), cleanTmpName); got != removeFails || slices.Contains(names(crash), cleanFileName) {
				t.Fatalf("after the failed Close: %v (want %s only if its removal failed, and no %s)", names(crash), cleanTmpName, cleanFileName)
			}
			if err := crash.SyncDir("/log"); err != nil { // the tmp file's entry reaches the disk
				t.Fatal(err)
			}

			core, logs := observer.New(zapcore.InfoLevel)
			l, err := Open(zap.New(core), "/log", Options{FS: crash})
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, readAll(t, l, l.StartOffset()), want(batch, l.StartOffset()))
			warned := logs.FilterMessageSnippet("removing the clean-end.tmp").Len() == 1
			if warned != removeFails {
				t.Fatalf("WARN about the tmp file: %v, want %v\n%v", warned, removeFails, logs.All())
			}
			after := crash.CrashClone(faultfs.CrashOptions{})
			if slices.Contains(names(after), cleanTmpName) || slices.Contains(names(crash), cleanTmpName) {
				t.Fatalf("%s survives the next Open (and a power cut after it): %v", cleanTmpName, names(after))
			}
			kill(t, l)
		})
	}
}
