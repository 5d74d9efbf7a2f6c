package statelog

import (
	"errors"
	"sync"
	"syscall"
	"testing"

	"github.com/coordinatord/coordinatord/internal/statelog/faultfs"
	"github.com/coordinatord/coordinatord/internal/statelog/vfs"
)

// A writer and a syncer on two goroutines, through many rolls: the durable offset only grows,
// never passes the end, reaches it after a last Sync, and a reopen finds every record.
func TestWriteAndSyncOnTwoGoroutines(t *testing.T) {
	modes := []struct {
		name  string
		group bool
	}{{"fdatasync", false}, {"sync group", true}}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			root := t.TempDir()
			opts := Options{SegmentBytes: 2048}
			if mode.group {
				g, err := NewSyncGroup(nil, root, SyncGroupOptions{})
				if err != nil {
					t.Fatalf("NewSyncGroup: %v (this test needs Linux 5.8 or later)", err)
				}
				defer g.Close()
				opts.SyncGroup = g
			}
			dir := root + "/log"
			l := mustOpen(t, dir, opts)

			var model [][]byte
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var syncErr error
			wg.Go(func() {
				var last int64
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := l.Sync(); err != nil {
						syncErr = err
						return
					}
					d := l.DurableOffset()
					if d < last || d > l.EndOffset() {
						syncErr = errors.New("the durable offset moved back or passed the end")
						return
					}
					last = d
				}
			})
			for i := range 300 {
				batch := fixedBatch(uint64(i), 1+i%3, 90)
				first, err := l.Write(batch)
				if err != nil {
					t.Fatalf("Write %d: %v", i, err)
				}
				if first != int64(len(model)) {
					t.Fatalf("Write %d got offset %d, want %d", i, first, len(model))
				}
				model = append(model, batch...)
			}
			close(stop)
			wg.Wait()
			if syncErr != nil {
				t.Fatal(syncErr)
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if l.DurableOffset() != l.EndOffset() || l.EndOffset() != int64(len(model)) {
				t.Fatalf("durable %d, end %d after the last Sync; want both %d", l.DurableOffset(), l.EndOffset(), len(model))
			}
			if n := len(segmentFiles(t, l.fs, dir)); n < 10 {
				t.Fatalf("%d segments: the test wanted many rolls", n)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			checkRecords(t, readAll(t, mustOpen(t, dir, opts), 0), want(model, 0))
		})
	}
}

// Rolling makes the sealed segment durable, so that Sync only ever syncs the active segment.
func TestRollMakesWrittenRecordsDurable(t *testing.T) {
	fsys := faultfs.Wrap(vfs.OS(), nil)
	l := mustOpen(t, t.TempDir(), Options{FS: fsys, SegmentBytes: 600})
	b := fixedBatch(1, 2, 100)
	for range 2 {
		if _, err := l.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if l.DurableOffset() != 0 {
		t.Fatalf("durable offset %d before any sync or roll, want 0", l.DurableOffset())
	}
	before := l.EndOffset()
	if _, err := l.Write(b); err != nil { // does not fit: rolls
		t.Fatal(err)
	}
	if len(l.segments) != 2 {
		t.Fatalf("%d segments, want a roll to 2", len(l.segments))
	}
	if got := l.DurableOffset(); got != before {
		t.Fatalf("durable offset %d after the roll, want %d (all of the sealed segment)", got, before)
	}
}

// A failed Sync fails the log for good: the records written and not synced stay unacknowledged,
// the durable offset stays where it was, and a reopen truncated to it finds only what was synced.
func TestFailedSyncLeavesWrittenRecordsOut(t *testing.T) {
	dir := t.TempDir()
	fsys := faultfs.Wrap(vfs.OS(), nil)
	l := mustOpen(t, dir, Options{FS: fsys})
	acked := fixedBatch(1, 2, 50)
	mustAppend(t, l, acked)
	for i := range 3 {
		if _, err := l.Write(fixedBatch(uint64(10+i), 2, 50)); err != nil {
			t.Fatal(err)
		}
	}
	fsys.SetInjector(failOnce(faultfs.OnKinds(faultfs.OpSync).And(faultfs.OnPath("*.seg")), syscall.EIO))
	if err := l.Sync(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Sync = %v, want ErrFailed", err)
	}
	fsys.SetInjector(nil)
	durable := l.DurableOffset()
	if durable != int64(len(acked)) {
		t.Fatalf("durable offset %d after the failed sync, want %d", durable, len(acked))
	}
	if err := l.Sync(); !errors.Is(err, ErrFailed) {
		t.Fatalf("a second Sync = %v, want the sticky ErrFailed", err)
	}
	if _, err := l.Write(fixedBatch(20, 1, 50)); !errors.Is(err, ErrFailed) {
		t.Fatalf("Write after the failed sync = %v, want ErrFailed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close = %v, want ErrClosed", err)
	}
	re := mustOpen(t, dir, Options{TruncateAfter: &durable})
	checkRecords(t, readAll(t, re, 0), want(acked, 0))
}
