package statelog

import (
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// fakeJournal stands in for the node's journal: it keeps a copy of every frame written to it,
// and fails a write when fail returns an error.
type fakeJournal struct {
	mu     sync.Mutex
	frames [][]byte
	fail   func(frame []byte) error
}

func (j *fakeJournal) Attach(*Log) error { return nil }

func (j *fakeJournal) Write(frame []byte) error {
	if j.fail != nil {
		if err := j.fail(frame); err != nil {
			return err
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.frames = append(j.frames, append([]byte(nil), frame...))
	return nil
}

func (j *fakeJournal) Checkpointed() int64 { return 0 }

// segmentWrites wraps fsys, counting the writes to segment files and failing them while the
// flag returned is set.
func segmentWrites(fsys FS) (*faultfs.FS, *atomic.Int64, *atomic.Bool) {
	writes, failing := new(atomic.Int64), new(atomic.Bool)
	return faultfs.Wrap(fsys, faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind != faultfs.OpWrite || filepath.Ext(op.Path) != ".seg" {
			return nil
		}
		if failing.Load() {
			return errEIO
		}
		writes.Add(1)
		return nil
	})), writes, failing
}

// reopened opens what a power cut would leave of mem's log in dir, with no journal to append
// what the log lacks, and returns its records.
func reopened(t *testing.T, mem *faultfs.CrashFS, dir string) []rec {
	t.Helper()
	l := mustOpen(t, dir, Options{FS: mem.CrashClone(faultfs.CrashOptions{})})
	return readAll(t, l, 0)
}

// A journaled log writes its acknowledged frames to its segment together, in writes of about
// tailBytes, and a Checkpoint makes all of them durable in the log.
func TestJournaledAppendsReachTheSegmentTogether(t *testing.T) {
	mem := faultfs.NewCrashFS()
	fsys, writes, _ := segmentWrites(mem)
	j := &fakeJournal{}
	l := mustOpen(t, "/log", Options{FS: fsys, Journal: j})
	before := writes.Load() // the new segment's header
	var model [][]byte
	const appends = 2000
	for i := range appends {
		batch := fixedBatch(uint64(i), 1, 100)
		mustAppend(t, l, batch)
		model = append(model, batch...)
	}
	bytes := appends * frameLen(fixedBatch(0, 1, 100))
	if got, most := writes.Load()-before, bytes/tailBytes+1; got > most {
		t.Fatalf("%d appends of %d bytes made %d segment writes, want at most %d", appends, bytes, got, most)
	}
	if len(j.frames) != appends {
		t.Fatalf("the journal got %d frames, want %d", len(j.frames), appends)
	}
	// The owner reads what it appended, tail included.
	checkRecords(t, readAll(t, l, 0), want(model, 0))

	mustAppend(t, l, fixedBatch(appends, 1, 100))
	model = append(model, fixedBatch(appends, 1, 100)...)
	if err := l.Checkpoint(); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	checkRecords(t, reopened(t, mem, "/log"), want(model, 0))
}

// A Checkpoint on the journal's goroutine while the owner appends writes out every frame
// acknowledged before it.
func TestCheckpointWhileAppending(t *testing.T) {
	mem := faultfs.NewCrashFS()
	l := mustOpen(t, "/log", Options{FS: mem, Journal: &fakeJournal{}, SegmentBytes: 64 << 10})
	var model [][]byte
	stop := make(chan struct{})
	done := make(chan error)
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := l.Checkpoint(); err != nil {
				done <- err
				return
			}
		}
	}()
	for i := range 3000 {
		batch := fixedBatch(uint64(i), 1+i%3, 60)
		mustAppend(t, l, batch)
		model = append(model, batch...)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	if err := l.Checkpoint(); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	checkRecords(t, reopened(t, mem, "/log"), want(model, 0))
}

// When the journal fails an append, the log fails without that frame, and with every frame it
// acknowledged before it written out and synced: reopened in the same process, or after a power
// cut, it holds exactly the acknowledged appends.
func TestFailedJournalWriteKeepsTheAcknowledgedFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		// checkpointFirst: a Checkpoint writes the tail out, the failing frame with it, before
		// the journal fails that frame.
		checkpointFirst bool
	}{{"frame in the tail", false}, {"frame written out by a checkpoint", true}} {
		t.Run(tc.name, func(t *testing.T) {
			mem := faultfs.NewCrashFS()
			j := &fakeJournal{}
			l := mustOpen(t, "/log", Options{FS: mem, Journal: j})
			var model [][]byte
			for i := range 50 {
				batch := fixedBatch(uint64(i), 2, 80)
				mustAppend(t, l, batch)
				model = append(model, batch...)
			}
			injected := errors.New("injected journal failure")
			j.fail = func([]byte) error {
				if tc.checkpointFirst {
					if err := l.Checkpoint(); err != nil {
						t.Errorf("Checkpoint: %v", err)
					}
				}
				return injected
			}
			if _, err := l.Append(fixedBatch(99, 2, 80)); !errors.Is(err, ErrFailed) || !errors.Is(err, injected) {
				t.Fatalf("Append with the journal failing: %v, want ErrFailed wrapping the journal's error", err)
			}
			if _, err := l.Append(fixedBatch(100, 1, 80)); !errors.Is(err, ErrFailed) {
				t.Fatalf("Append after the failure: %v, want ErrFailed", err)
			}
			if errors.Is(l.failed, ErrHeldInJournal) {
				t.Fatalf("the log failed with %v: its acknowledged frames were written out, a reopen suffices", l.failed)
			}
			checkRecords(t, reopened(t, mem, "/log"), want(model, 0))
			if err := l.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			again := mustOpen(t, "/log", Options{FS: mem, Journal: &fakeJournal{}})
			checkRecords(t, readAll(t, again, 0), want(model, 0))
		})
	}
}

// A tail that cannot be written out fails the log with ErrHeldInJournal: only a restart, whose
// journal recovery appends the frames again, may serve the log. Checkpoints refuse it from then on.
func TestFailedTailWriteNeedsARestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failing func(t *testing.T, l *Log) error // what meets the failing write
	}{
		{"when the tail is full", func(t *testing.T, l *Log) error {
			for i := 0; ; i++ {
				if _, err := l.Append(fixedBatch(uint64(1000+i), 1, 200)); err != nil {
					return err
				}
				if i > 2*tailBytes/200 {
					t.Fatal("appends went on with every segment write failing")
				}
			}
		}},
		{"at a checkpoint", func(t *testing.T, l *Log) error {
			err := l.Checkpoint()
			if !errors.Is(err, ErrHeldInJournal) {
				t.Fatalf("Checkpoint: %v, want ErrHeldInJournal", err)
			}
			_, err = l.Append(fixedBatch(1000, 1, 200))
			return err
		}},
		{"at close", func(t *testing.T, l *Log) error { return l.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, _, failing := segmentWrites(faultfs.NewCrashFS())
			l := mustOpen(t, "/log", Options{FS: fsys, Journal: &fakeJournal{}})
			for i := range 10 {
				mustAppend(t, l, fixedBatch(uint64(i), 1, 200))
			}
			failing.Store(true)
			if err := tc.failing(t, l); !errors.Is(err, ErrHeldInJournal) || !errors.Is(err, errEIO) {
				t.Fatalf("got %v, want ErrHeldInJournal wrapping EIO", err)
			}
			if err := l.Checkpoint(); !errors.Is(err, ErrCheckpointFailed) {
				t.Fatalf("Checkpoint after the failure: %v, want ErrCheckpointFailed", err)
			}
		})
	}
}

// A journal write that fails while the tail cannot be written out either fails the log with
// ErrHeldInJournal, and cuts the segment where the tail starts, not past what it holds.
func TestFailedJournalWriteWithAnUnwritableTail(t *testing.T) {
	mem := faultfs.NewCrashFS()
	fsys, _, failing := segmentWrites(mem)
	j := &fakeJournal{}
	l := mustOpen(t, "/log", Options{FS: fsys, Journal: j})
	for i := range 10 {
		mustAppend(t, l, fixedBatch(uint64(i), 1, 200))
	}
	seg := filepath.Join("/log", segmentFiles(t, mem, "/log")[0])
	f, err := mem.Open(seg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	written, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	j.fail = func([]byte) error { return errors.New("injected journal failure") }
	if _, err := l.Append(fixedBatch(99, 1, 200)); !errors.Is(err, ErrHeldInJournal) {
		t.Fatalf("Append with the journal and the segment failing: %v, want ErrHeldInJournal", err)
	}
	if size, err := f.Size(); err != nil || size != written {
		t.Fatalf("the segment holds %d bytes (%v), want the %d it held before the tail", size, err, written)
	}
}
