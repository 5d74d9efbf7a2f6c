package statelog

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

func TestSetStartOffset(t *testing.T) {
	// 12 batches of 2 records, 3 batches per segment: segments start at 0, 6, 12, 18.
	batch := func(i int) [][]byte { return fixedBatch(uint64(i), 2, 60) }
	opts := Options{SegmentBytes: segmentHeaderSize + 3*frameLen(batch(0))}
	tests := []struct {
		name         string
		moves        []int64
		wantErr      error
		wantStart    int64
		wantSegments []int64 // base offsets of the remaining segments
	}{
		{name: "inside the first segment", moves: []int64{3}, wantStart: 3, wantSegments: []int64{0, 6, 12, 18}},
		{name: "at a segment boundary", moves: []int64{6}, wantStart: 6, wantSegments: []int64{6, 12, 18}},
		{name: "across several segments", moves: []int64{2, 13}, wantStart: 13, wantSegments: []int64{12, 18}},
		{name: "backwards is a no-op", moves: []int64{13, 7}, wantStart: 13, wantSegments: []int64{12, 18}},
		{name: "to the end keeps the active segment", moves: []int64{24}, wantStart: 24, wantSegments: []int64{18}},
		{name: "beyond the end", moves: []int64{25}, wantErr: ErrOutOfRange, wantStart: 0, wantSegments: []int64{0, 6, 12, 18}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := mustOpen(t, dir, opts)
			var model [][]byte
			for i := range 12 {
				mustAppend(t, l, batch(i))
				model = append(model, batch(i)...)
			}
			var err error
			for _, off := range tc.moves {
				if err = l.SetStartOffset(off); err != nil {
					break
				}
			}
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("SetStartOffset = %v, want %v", err, tc.wantErr)
			}
			check := func(l *Log) {
				t.Helper()
				l.remover.wait()
				if l.StartOffset() != tc.wantStart {
					t.Fatalf("StartOffset() = %d, want %d", l.StartOffset(), tc.wantStart)
				}
				var bases []int64
				for _, n := range segmentFiles(t, l.fs, dir) {
					base, _, _ := parseSegmentName(n)
					bases = append(bases, base)
				}
				if !slices.Equal(bases, tc.wantSegments) {
					t.Fatalf("segments start at %v, want %v", bases, tc.wantSegments)
				}
				if got, want := l.Size(), segmentBytes(t, l.fs, dir); got != want {
					t.Fatalf("Size() = %d, files hold %d", got, want)
				}
				checkRecords(t, readAll(t, l, tc.wantStart), want(model, tc.wantStart))
				if tc.wantStart > 0 {
					if err := l.Replay(tc.wantStart-1, func(int64, []byte) error { return nil }); !errors.Is(err, ErrOutOfRange) {
						t.Fatalf("Replay below the start offset = %v, want ErrOutOfRange", err)
					}
				}
			}
			check(l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			check(mustOpen(t, dir, opts))
		})
	}
}

// A segment file below the log-start offset that could not be deleted, or whose deletion a
// crash cut short, stays behind; the log goes on without it, and Open deletes it.
func TestOpenDeletesSegmentsBelowStart(t *testing.T) {
	mem := faultfs.NewCrashFS()
	ffs := faultfs.Wrap(mem, nil)
	batch := func(i int) [][]byte { return fixedBatch(uint64(i), 1, 80) }
	opts := Options{FS: ffs, SegmentBytes: segmentHeaderSize + 2*frameLen(batch(0))}
	l := mustOpen(t, "/log", opts)
	var model [][]byte
	for i := range 8 { // segments at 0, 2, 4, 6
		mustAppend(t, l, batch(i))
		model = append(model, batch(i)...)
	}
	ffs.SetInjector(faultfs.Match(faultfs.OnKinds(faultfs.OpRemove), errEIO))
	if err := l.SetStartOffset(5); err != nil {
		t.Fatalf("SetStartOffset with failing removal = %v, want nil: the records are no longer needed", err)
	}
	l.remover.wait()
	mustAppend(t, l, batch(8))
	model = append(model, batch(8)...)
	ffs.SetInjector(nil)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(segmentFiles(t, mem, "/log")); n != 5 {
		t.Fatalf("%d segments before reopen, want all 5", n)
	}
	// What a power cut leaves: the start offset was synced, the removals never happened.
	crashed := mem.CrashClone(faultfs.CrashOptions{})
	opts.FS = crashed
	l = mustOpen(t, "/log", opts)
	if got := segmentFiles(t, crashed, "/log"); !slices.Equal(got, []string{segmentName(4, 3), segmentName(6, 4), segmentName(8, 5)}) {
		t.Fatalf("segments after reopen %v, want the three from offset 4", got)
	}
	if l.StartOffset() != 5 {
		t.Fatalf("StartOffset() = %d, want 5", l.StartOffset())
	}
	checkRecords(t, readAll(t, l, 5), want(model, 5))
}

// The owner does not wait for segment files to be deleted: SetStartOffset returns and appends
// go on while a deletion is stuck in the filesystem, and Close waits for it to end before it
// releases the directory.
func TestSegmentsDeletedInBackground(t *testing.T) {
	ffs := faultfs.Wrap(faultfs.NewCrashFS(), nil)
	batch := func(i int) [][]byte { return fixedBatch(uint64(i), 1, 80) }
	opts := Options{FS: ffs, SegmentBytes: segmentHeaderSize + 2*frameLen(batch(0))}
	l := mustOpen(t, "/log", opts)
	for i := range 6 { // segments at 0, 2, 4
		mustAppend(t, l, batch(i))
	}
	sizeBefore := l.Size()
	entered, release := make(chan string, 2), make(chan struct{})
	var stuck atomic.Bool // a deletion waited for release in vain
	ffs.SetInjector(faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpRemove {
			entered <- op.Path
			select {
			case <-release:
			case <-time.After(5 * time.Second): // a broken feature fails the test, not hangs it
				stuck.Store(true)
			}
		}
		return nil
	}))
	if err := l.SetStartOffset(4); err != nil {
		t.Fatal(err)
	}
	if stuck.Load() {
		t.Fatal("SetStartOffset waited for the deletion of the segments it dropped")
	}
	if got := recvWithin(t, entered, "the first deletion"); got != "/log/"+segmentName(0, 1) {
		t.Fatalf("first deletion %s, want the oldest segment", got)
	}
	if got, want := l.Size(), sizeBefore-2*(2*frameLen(batch(0))+segmentHeaderSize); got != want {
		t.Fatalf("Size() = %d while the deletions run, want %d: dropped segments do not count", got, want)
	}
	mustAppend(t, l, batch(6)) // while the deletion is stuck
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a deletion was still running", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if got := recvWithin(t, entered, "the second deletion"); got != "/log/"+segmentName(2, 2) {
		t.Fatalf("second deletion %s, want the segment at 2", got)
	}
	if err := recvWithin(t, closed, "Close"); err != nil {
		t.Fatal(err)
	}
	if got := segmentFiles(t, ffs, "/log"); !slices.Equal(got, []string{segmentName(4, 3), segmentName(6, 4)}) {
		t.Fatalf("segments after Close %v, want the two from offset 4", got)
	}
}

// Segments dropped while a deletion runs are deleted by the same goroutine before Close returns.
func TestSegmentsDroppedDuringADeletion(t *testing.T) {
	ffs := faultfs.Wrap(faultfs.NewCrashFS(), nil)
	batch := func(i int) [][]byte { return fixedBatch(uint64(i), 1, 80) }
	opts := Options{FS: ffs, SegmentBytes: segmentHeaderSize + 2*frameLen(batch(0))}
	l := mustOpen(t, "/log", opts)
	for i := range 8 { // segments at 0, 2, 4, 6
		mustAppend(t, l, batch(i))
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var removes atomic.Int64
	ffs.SetInjector(faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpRemove && removes.Add(1) == 1 {
			close(entered)
			select {
			case <-release:
			case <-time.After(5 * time.Second): // a broken feature fails the test, not hangs it
			}
		}
		return nil
	}))
	if err := l.SetStartOffset(4); err != nil { // drops 0 and 2
		t.Fatal(err)
	}
	recvWithin(t, entered, "the first deletion")
	if err := l.SetStartOffset(6); err != nil { // drops 4 while 0 is being deleted
		t.Fatal(err)
	}
	close(release)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := segmentFiles(t, ffs, "/log"); !slices.Equal(got, []string{segmentName(6, 4)}) {
		t.Fatalf("segments after Close %v, want only the one at 6", got)
	}
}

// recvWithin receives from ch, failing the test if nothing comes within 10 s.
func recvWithin[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen within 10 s", what)
		panic("unreachable")
	}
}

// A segment file whose deletion failed is deleted with the next segments the log drops: a log
// that does not fail is not reopened before the process restarts, and Size no longer counts the
// file, so it would take disk space unseen until then.
func TestFailedSegmentDeletionIsRetried(t *testing.T) {
	ffs := faultfs.Wrap(faultfs.NewCrashFS(), nil)
	batch := func(i int) [][]byte { return fixedBatch(uint64(i), 1, 80) }
	opts := Options{FS: ffs, SegmentBytes: segmentHeaderSize + 2*frameLen(batch(0))}
	l := mustOpen(t, "/log", opts)
	defer l.Close()
	for i := range 8 { // segments at 0, 2, 4, 6
		mustAppend(t, l, batch(i))
	}
	var removes atomic.Int64
	ffs.SetInjector(faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpRemove && removes.Add(1) == 1 {
			return errEIO // the first deletion fails once
		}
		return nil
	}))
	if err := l.SetStartOffset(4); err != nil {
		t.Fatal(err)
	}
	l.remover.wait()
	if got := segmentFiles(t, ffs, "/log"); !slices.Equal(got, []string{segmentName(0, 1), segmentName(4, 3), segmentName(6, 4)}) {
		t.Fatalf("segments after a failed deletion %v, want the one at 0 left over", got)
	}
	if err := l.SetStartOffset(6); err != nil {
		t.Fatal(err)
	}
	l.remover.wait()
	if got := segmentFiles(t, ffs, "/log"); !slices.Equal(got, []string{segmentName(6, 4)}) {
		t.Fatalf("segments after the next prune %v, want only the one at 6: the failed deletion was not retried", got)
	}
}

func TestStartOffsetFileProblems(t *testing.T) {
	batch := func(i int) [][]byte { return fixedBatch(uint64(i), 1, 80) }
	opts := Options{SegmentBytes: segmentHeaderSize + 2*frameLen(batch(0))}
	build := func(t *testing.T) string {
		dir := t.TempDir()
		l := mustOpen(t, dir, opts)
		for i := range 6 { // segments at 0, 2, 4
			mustAppend(t, l, batch(i))
		}
		if err := l.SetStartOffset(3); err != nil { // deletes the segment at 0
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	writeStart := func(off int64) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			var b [startFileSize]byte
			encodeOffsetFile(b[:], startMagic, off)
			if err := os.WriteFile(filepath.Join(dir, startFileName), b[:], 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name      string
		damage    func(t *testing.T, dir string)
		wantStart int64 // after Repair
	}{
		{name: "garbage", wantStart: 2, damage: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, startFileName), []byte("not an offset file!!"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "garbage, with the temporary file of an interrupted SetStartOffset", wantStart: 2, damage: func(t *testing.T, dir string) {
			for name, content := range map[string]string{startFileName: "not an offset file!!", startTmpName: "half"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "truncated", wantStart: 2, damage: func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, startFileName), 7); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "missing", wantStart: 2, damage: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, startFileName)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "below the first segment", wantStart: 2, damage: writeStart(1)},
		{name: "beyond the end", wantStart: 6, damage: writeStart(7)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := build(t)
			tc.damage(t, dir)
			before := dirContent(t, dir)
			_, err := Open(nil, dir, opts)
			ce := asCorruption(t, err)
			if ce.Segment != filepath.Join(dir, startFileName) {
				t.Fatalf("corruption names %s, want the start-offset file", ce.Segment)
			}
			after := dirContent(t, dir)
			delete(after, lockFileName)
			delete(before, lockFileName)
			if !maps.Equal(before, after) {
				t.Fatal("a failed Open changed the directory")
			}
			report, err := Repair(nil, dir, opts)
			if err != nil {
				t.Fatalf("Repair: %v", err)
			}
			if !report.StartOffsetReset || report.NewStartOffset != tc.wantStart || report.DroppedBytes != 0 {
				t.Fatalf("Repair report %+v, want start reset to %d and nothing dropped", report, tc.wantStart)
			}
			l := mustOpen(t, dir, opts)
			if l.StartOffset() != tc.wantStart || l.EndOffset() != 6 {
				t.Fatalf("bounds after repair [%d, %d), want [%d, 6)", l.StartOffset(), l.EndOffset(), tc.wantStart)
			}
		})
	}
}
