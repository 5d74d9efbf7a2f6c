package statelog

import (
	"errors"
	"math/rand/v2"
	"path"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// A log that defers its syncs keeps, after a power cut, exactly what its last Sync covered;
// reopened at that end (as a replica does) it holds those records and can be appended to.
func TestDeferSyncKeepsWhatSyncCovered(t *testing.T) {
	for seed := range uint64(20) {
		mem := faultfs.NewCrashFS()
		opts := Options{FS: mem, DeferSync: true, SegmentBytes: 600}
		l := mustOpen(t, "/log", opts)
		var model [][]byte
		var synced int64
		rng := rand.New(rand.NewPCG(seed, 2))
		for i := range 30 {
			b := fixedBatch(seed*100+uint64(i), 1+rng.IntN(3), 30)
			mustAppend(t, l, b)
			model = append(model, b...)
			if rng.IntN(4) == 0 {
				if err := l.Sync(); err != nil {
					t.Fatal(err)
				}
				synced = l.EndOffset()
			}
		}
		cut := mem.CrashClone(faultfs.CrashOptions{Rand: rng, ZeroFill: seed%2 == 0})
		kill(t, l)
		o := opts
		o.FS = cut
		o.TruncateAfter = &synced
		l2 := mustOpen(t, "/log", o)
		if l2.EndOffset() != synced {
			t.Fatalf("seed %d: end %d after the cut, want the synced end %d", seed, l2.EndOffset(), synced)
		}
		checkRecords(t, readAll(t, l2, 0), want(model[:synced], 0))
		mustAppend(t, l2, fixedBatch(7, 2, 30))
	}
}

// Without Sync, a deferring log's appends are not durable; a roll seals its segment synced, and
// Close syncs before it records the clean end.
func TestDeferSyncRollAndClose(t *testing.T) {
	mem := faultfs.NewCrashFS()
	batch := fixedBatch(1, 2, 40)
	opts := Options{FS: mem, DeferSync: true, SegmentBytes: segmentHeaderSize + frameLen(batch)}
	l := mustOpen(t, "/log", opts)
	mustAppend(t, l, batch)
	lost := mem.CrashClone(faultfs.CrashOptions{})
	mustAppend(t, l, fixedBatch(2, 2, 40)) // rolls: the first segment is sealed synced
	afterRoll := mem.CrashClone(faultfs.CrashOptions{})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		fs   *faultfs.CrashFS
		end  int64
	}{{"before any sync", lost, 0}, {"after the roll", afterRoll, 2}, {"after Close", mem, 4}} {
		l2, err := Open(zaptest.NewLogger(t), "/log", Options{FS: c.fs, DeferSync: true, SegmentBytes: opts.SegmentBytes})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if l2.EndOffset() != c.end {
			t.Errorf("%s: end %d, want %d", c.name, l2.EndOffset(), c.end)
		}
		_ = l2.Close()
	}
}

// A failed Sync fails the log, as a failed append does.
func TestDeferSyncFailureIsSticky(t *testing.T) {
	inj := faultfs.Wrap(faultfs.NewCrashFS(), nil)
	l := mustOpen(t, "/log", Options{FS: inj, DeferSync: true})
	mustAppend(t, l, fixedBatch(1, 1, 10))
	inj.SetInjector(faultfs.Match(faultfs.OnKinds(faultfs.OpSync), errEIO))
	if err := l.Sync(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Sync after a failed fdatasync: %v, want ErrFailed", err)
	}
	inj.SetInjector(nil)
	if _, err := l.Append(fixedBatch(2, 1, 10)); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append after a failed Sync: %v, want ErrFailed", err)
	}
}

func TestDeferSyncExcludesSyncGroup(t *testing.T) {
	dir := t.TempDir()
	g, err := NewSyncGroup(zaptest.NewLogger(t), dir, SyncGroupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := Open(zaptest.NewLogger(t), path.Join(dir, "log"), Options{DeferSync: true, SyncGroup: g}); err == nil {
		t.Fatal("Open with DeferSync and a SyncGroup succeeded")
	}
}
