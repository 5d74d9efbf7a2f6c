package statelog

import (
	"errors"
	"path"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// A process killed between an Append's write and its fdatasync leaves the frame in the page
// cache, where the next Open finds it intact. Open must make it durable before the log builds on
// it: otherwise a roll seals that segment unsynced, and after a power cut the log no longer opens
// past the lost frame, with acknowledged appends in the next segment.
func TestOpenSyncsWhatAKilledProcessLeftUnsynced(t *testing.T) {
	mem := faultfs.NewCrashFS()
	seg := int64(segmentHeaderSize + 2*frameLen(fixedBatch(0, 2, 40)))
	opts := Options{FS: mem, SegmentBytes: seg}
	l := mustOpen(t, "/log", opts)
	mustAppend(t, l, fixedBatch(1, 2, 40))
	// Process 1: the write of the next frame reaches the page cache, then kill -9 (no fdatasync).
	segs := segmentFiles(t, mem, "/log")
	p := path.Join("/log", segs[len(segs)-1])
	buf := encodedFrame(fixedBatch(2, 2, 40), l.EndOffset())
	f, err := mem.OpenReadWrite(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(buf, l.segments[0].size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	kill(t, l)

	// Process 2 (same page cache).
	l2 := mustOpen(t, "/log", opts)
	if l2.EndOffset() != 4 {
		t.Fatalf("end %d", l2.EndOffset())
	}
	// Acknowledged appends: the second one rolls to a new segment.
	mustAppend(t, l2, fixedBatch(3, 2, 40))
	mustAppend(t, l2, fixedBatch(4, 2, 40))
	acked := l2.EndOffset()
	if n := len(segmentFiles(t, mem, "/log")); n < 2 {
		t.Fatalf("no roll: %d segments", n)
	}
	l2.Close()

	// Power cut: only what was synced survives.
	clone := mem.CrashClone(faultfs.CrashOptions{})
	l3, err := Open(zaptest.NewLogger(t), "/log", Options{FS: clone, SegmentBytes: seg})
	var ce *CorruptionError
	if errors.As(err, &ce) {
		t.Fatalf("after the power cut the log does not open (acknowledged appends up to %d): %v", acked, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if l3.EndOffset() < acked {
		t.Fatalf("acknowledged end %d, recovered end %d", acked, l3.EndOffset())
	}
}

// A process killed inside createSegment, after writing the header but before the header and
// directory syncs, leaves a segment whose directory entry is not durable. Open must sync the
// directory before appending to it, or a power cut removes the file with acknowledged records in
// it, and the log opens shorter without a word.
func TestOpenSyncsASegmentEntryAKilledProcessLeft(t *testing.T) {
	for _, roll := range []bool{false, true} {
		t.Run(map[bool]string{false: "first segment", true: "rolled segment"}[roll], func(t *testing.T) {
			mem := faultfs.NewCrashFS()
			opts := Options{FS: mem, SegmentBytes: 1 << 20}
			base, id := int64(0), uint64(1)
			var before int64
			if roll {
				l := mustOpen(t, "/log", opts)
				mustAppend(t, l, fixedBatch(1, 2, 40))
				before = l.EndOffset()
				kill(t, l)
				base, id = before, 2
			} else {
				if err := mem.MkdirAll("/log"); err != nil {
					t.Fatal(err)
				}
				if err := mem.SyncDir("/"); err != nil {
					t.Fatal(err)
				}
			}
			// Process 1, killed inside createSegment: Create + header write, no Sync, no SyncDir.
			f, err := mem.Create(path.Join("/log", segmentName(base, id)))
			if err != nil {
				t.Fatal(err)
			}
			var hdr [segmentHeaderSize]byte
			segmentHeader{id: id, base: base}.encode(hdr[:])
			if _, err := f.WriteAt(hdr[:], 0); err != nil {
				t.Fatal(err)
			}
			f.Close()

			// Process 2.
			appendSurvivesPowerCut(t, mem, "/log", opts)
		})
	}
}

// appendSurvivesPowerCut opens the log in dir on mem, appends a batch and closes the log, then
// cuts the power: the log must open again with the batch in it.
func appendSurvivesPowerCut(t *testing.T, mem *faultfs.CrashFS, dir string, opts Options) {
	t.Helper()
	l := mustOpen(t, dir, opts)
	mustAppend(t, l, fixedBatch(2, 3, 40))
	acked := l.EndOffset()
	l.Close()
	opts.FS = mem.CrashClone(faultfs.CrashOptions{})
	l2, err := Open(zaptest.NewLogger(t), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.EndOffset() < acked {
		t.Fatalf("acknowledged end %d, after the power cut the log silently ends at %d", acked, l2.EndOffset())
	}
}

// Directories a process created and was killed before syncing are synced by the next Open, up to
// the root, before anything is acknowledged in them.
func TestOpenSyncsAncestorsAKilledProcessLeft(t *testing.T) {
	mem := faultfs.NewCrashFS()
	if err := mem.MkdirAll("/a/b/c"); err != nil { // process 1: MkdirAll, killed before SyncDir
		t.Fatal(err)
	}
	appendSurvivesPowerCut(t, mem, "/a/b/c", Options{FS: mem})
}

// When Open cannot sync what it found, it cannot tell what is on disk: a retry would read the same
// bytes from the page cache and its sync would succeed. The error says so (ErrNotDurable), unless
// a truncation offset, or the clean-end file of a clean close, vouches for everything kept.
func TestOpenSyncFailureIsNotDurable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fail     faultfs.Predicate
		truncate bool
		clean    bool // closed, not killed: the clean-end file vouches for the log
		want     bool
	}{
		{"segment sync", faultfs.OnKinds(faultfs.OpSync).And(faultfs.OnPath("*.seg")), false, false, true},
		{"directory sync", faultfs.OnKinds(faultfs.OpSyncDir).And(faultfs.OnPath("/log")), false, false, true},
		{"segment sync, truncating", faultfs.OnKinds(faultfs.OpSync).And(faultfs.OnPath("*.seg")), true, false, false},
		{"segment sync after a clean close", faultfs.OnKinds(faultfs.OpSync).And(faultfs.OnPath("*.seg")), false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := faultfs.NewCrashFS()
			l := mustOpen(t, "/log", Options{FS: mem})
			mustAppend(t, l, fixedBatch(1, 2, 40))
			end := l.EndOffset()
			if tc.clean {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				kill(t, l)
			}
			opts := Options{FS: faultfs.Wrap(mem, faultfs.Match(tc.fail, errors.New("EIO")))}
			if tc.truncate {
				opts.TruncateAfter = &end
			}
			_, err := Open(zaptest.NewLogger(t), "/log", opts)
			if err == nil || errors.Is(err, ErrNotDurable) != tc.want {
				t.Fatalf("Open = %v; want an error, ErrNotDurable %v", err, tc.want)
			}
		})
	}
	// A torn tail's cut is such a sync too: a retry would find the file already cut in the page
	// cache and the frames before it trusted.
	t.Run("torn tail cut", func(t *testing.T) {
		mem := faultfs.NewCrashFS()
		l := mustOpen(t, "/log", Options{FS: mem})
		mustAppend(t, l, fixedBatch(1, 2, 40))
		kill(t, l)
		seg := path.Join("/log", segmentFiles(t, mem, "/log")[0])
		b, err := mem.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.WriteFile(seg, append(b, 1, 2, 3)); err != nil { // a torn tail
			t.Fatal(err)
		}
		fail := faultfs.OnKinds(faultfs.OpSync).And(faultfs.OnPath("*.seg"))
		if _, err := Open(zaptest.NewLogger(t), "/log", Options{FS: faultfs.Wrap(mem, faultfs.Match(fail, errors.New("EIO")))}); !errors.Is(err, ErrNotDurable) {
			t.Fatalf("Open = %v; want ErrNotDurable", err)
		}
	})
	// A segment holding only its header (a first load whose header sync failed) holds nothing to
	// mistake for durable either.
	t.Run("header-only segment", func(t *testing.T) {
		mem := faultfs.NewCrashFS()
		fail := faultfs.OnKinds(faultfs.OpSync).And(faultfs.OnPath("*.seg"))
		for attempt := range 2 {
			_, err := Open(zaptest.NewLogger(t), "/log", Options{FS: faultfs.Wrap(mem, faultfs.Match(fail, errors.New("EIO")))})
			if err == nil || errors.Is(err, ErrNotDurable) {
				t.Fatalf("attempt %d: Open = %v; want an ordinary error", attempt, err)
			}
		}
	})
	// A new, empty log has nothing to mistake for durable: a failed sync there is an ordinary error.
	_, err := Open(zaptest.NewLogger(t), "/new", Options{FS: faultfs.Wrap(faultfs.NewCrashFS(),
		faultfs.Match(faultfs.OnKinds(faultfs.OpSyncDir).And(faultfs.OnPath("/new")), errors.New("EIO")))})
	if err == nil || errors.Is(err, ErrNotDurable) {
		t.Fatalf("Open of a new log = %v; want an ordinary error", err)
	}
}
