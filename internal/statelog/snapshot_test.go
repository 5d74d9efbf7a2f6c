package statelog

import (
	"errors"
	"path"
	"slices"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// A snapshot reads the log as it was when taken, while the owner appends and prunes; the
// segments it needs stay on disk until it is closed.
func TestSnapshotOutlivesPruning(t *testing.T) {
	mem := faultfs.NewCrashFS()
	batch := fixedBatch(1, 2, 40)
	opts := Options{FS: mem, SegmentBytes: segmentHeaderSize + frameLen(batch)}
	l := mustOpen(t, "/log", opts)
	var model [][]byte
	for i := range 4 {
		b := fixedBatch(uint64(i), 2, 40)
		mustAppend(t, l, b)
		model = append(model, b...)
	}
	snap, err := l.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.StartOffset() != 0 || snap.EndOffset() != 8 {
		t.Fatalf("snapshot holds [%d, %d), want [0, 8)", snap.StartOffset(), snap.EndOffset())
	}
	mustAppend(t, l, fixedBatch(9, 2, 40))
	if err := l.SetStartOffset(8); err != nil {
		t.Fatal(err)
	}
	l.remover.wait()
	if n := len(segmentFiles(t, mem, "/log")); n != 5 {
		t.Fatalf("%d segment files while the snapshot is open, want all 5", n)
	}
	var got []rec
	if err := snap.Replay(0, collect(&got)); err != nil {
		t.Fatal(err)
	}
	compareRecs(t, "the snapshot", got, want(model, 0))
	if err := snap.Replay(9, collect(&got)); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("replay past the snapshot's end: %v, want ErrOutOfRange", err)
	}
	snap.Close()
	snap.Close()
	l.remover.wait()
	if files := segmentFiles(t, mem, "/log"); len(files) != 1 {
		t.Fatalf("segment files %v after the snapshot closed, want the 1 at offset 8", files)
	}
}

// A snapshot closed after its log leaves the pinned segments to the next Open, which deletes
// them; nothing is deleted once the log is closed.
func TestSnapshotClosedAfterItsLog(t *testing.T) {
	mem := faultfs.NewCrashFS()
	batch := fixedBatch(1, 2, 40)
	opts := Options{FS: mem, SegmentBytes: segmentHeaderSize + frameLen(batch)}
	l := mustOpen(t, "/log", opts)
	for i := range 3 {
		mustAppend(t, l, fixedBatch(uint64(i), 2, 40))
	}
	snap, err := l.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetStartOffset(4); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	snap.Close()
	l.remover.wait()
	if n := len(segmentFiles(t, mem, "/log")); n != 3 {
		t.Fatalf("%d segment files, want 3: a closed log deletes nothing", n)
	}
	l2 := mustOpen(t, "/log", opts)
	if n := len(segmentFiles(t, mem, "/log")); n != 1 || l2.StartOffset() != 4 {
		t.Fatalf("after reopening: %d segment files, start %d; want 1 and 4", n, l2.StartOffset())
	}
}

// Reset replaces any log, damaged or not, with an empty one at the offset given, and leaves the
// owner's files alone.
func TestReset(t *testing.T) {
	mem := faultfs.NewCrashFS()
	opts := Options{FS: mem, OwnerFiles: []string{"owned"}}
	l := mustOpen(t, "/log", opts)
	mustAppend(t, l, fixedBatch(1, 3, 20))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := mem.Create("/log/owned")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Damage the log: Reset must not need to read it.
	segs := segmentFiles(t, mem, "/log")
	g, err := mem.OpenReadWrite(path.Join("/log", segs[0]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt([]byte("garbage"), 0); err != nil {
		t.Fatal(err)
	}
	g.Close()

	if err := Reset(zaptest.NewLogger(t), "/log", opts, 1000); err != nil {
		t.Fatal(err)
	}
	// What a power cut right after Reset leaves opens as the empty log at 1000.
	l2, err := Open(zaptest.NewLogger(t), "/log", Options{FS: mem.CrashClone(faultfs.CrashOptions{}), OwnerFiles: opts.OwnerFiles})
	if err != nil {
		t.Fatal(err)
	}
	if l2.StartOffset() != 1000 || l2.EndOffset() != 1000 {
		t.Fatalf("after Reset: [%d, %d), want [1000, 1000)", l2.StartOffset(), l2.EndOffset())
	}
	first, err := l2.Append(fixedBatch(2, 2, 20))
	if err != nil || first != 1000 {
		t.Fatalf("append after Reset: first %d, %v", first, err)
	}
	_ = l2.Close()
	names, err := mem.ReadDir("/log")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, "owned") {
		t.Fatalf("Reset removed the owner's file: %v", names)
	}
	if err := Reset(zaptest.NewLogger(t), "/log", opts, -1); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Reset to -1: %v", err)
	}
}
