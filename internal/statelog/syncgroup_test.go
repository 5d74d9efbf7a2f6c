package statelog

import (
	"errors"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/vfs"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// fakeSyncer is a file-system syncer whose rounds the test controls: with block set, each
// Sync announces its round on entered and waits for release; errs fails chosen rounds.
type fakeSyncer struct {
	block   bool
	entered chan int
	release chan struct{}
	errs    map[int]error
	others  map[string]bool // directories on another file system

	mu       sync.Mutex
	started  int
	finished int
	closed   bool
}

func newFakeSyncer(block bool) *fakeSyncer {
	return &fakeSyncer{block: block, entered: make(chan int, 100), release: make(chan struct{})}
}

func (f *fakeSyncer) Sync() error {
	f.mu.Lock()
	f.started++
	round := f.started
	f.mu.Unlock()
	if f.block {
		f.entered <- round
		<-f.release
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finished = round
	return f.errs[round]
}

func (f *fakeSyncer) Holds(dir string) (bool, error) { return !f.others[dir], nil }

func (f *fakeSyncer) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func (f *fakeSyncer) counts() (started, finished int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.started, f.finished
}

// syncerFS is a filesystem whose OpenSyncer returns a fake.
type syncerFS struct {
	FS
	s *fakeSyncer
}

func (f syncerFS) OpenSyncer(string) (vfs.Syncer, error) { return f.s, nil }

func newFakeGroup(t *testing.T, s *fakeSyncer) *SyncGroup {
	t.Helper()
	g, err := NewSyncGroup(zaptest.NewLogger(t), "/data", SyncGroupOptions{FS: syncerFS{FS: faultfs.NewCrashFS(), s: s}})
	if err != nil {
		t.Fatal(err)
	}
	g.waited = make(chan struct{}, 1) // for waitWaiting; set before any Sync
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	return g
}

// waitWaiting waits until n callers wait for a round, checking again each time the group's hook
// says that one more started to wait (the group must come from newFakeGroup).
func waitWaiting(t *testing.T, g *SyncGroup, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		g.mu.Lock()
		w := g.waiting
		g.mu.Unlock()
		if w == n {
			return
		}
		select {
		case <-g.waited:
		case <-deadline:
			t.Fatalf("%d callers wait, want %d", w, n)
		}
	}
}

// syncAsync calls g.Sync on a goroutine and delivers its result.
func syncAsync(g *SyncGroup) <-chan error {
	done := make(chan error, 1)
	go func() { done <- g.Sync() }()
	return done
}

func noResult(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned (%v) before its round finished", what, err)
	default:
	}
}

// Every caller that arrives during a round shares the next one: 1 + 8 callers, 2 syncs.
func TestSyncGroupSharesRounds(t *testing.T) {
	s := newFakeSyncer(true)
	g := newFakeGroup(t, s)
	first := syncAsync(g)
	if r := <-s.entered; r != 1 {
		t.Fatalf("round %d entered, want 1", r)
	}
	var rest []<-chan error
	for range 8 {
		rest = append(rest, syncAsync(g))
	}
	waitWaiting(t, g, 8)
	s.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if r := <-s.entered; r != 2 {
		t.Fatalf("round %d entered, want 2", r)
	}
	for _, done := range rest {
		noResult(t, done, "a caller that arrived during round 1")
	}
	s.release <- struct{}{}
	for _, done := range rest {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if started, _ := s.counts(); started != 2 || g.Syncs() != 2 {
		t.Fatalf("%d syncs (group counted %d) for 9 callers, want 2", started, g.Syncs())
	}
}

// A caller that arrives while a sync runs is not answered by it: its write may have missed
// it. It gets the next round; one arriving when the group is idle runs its own at once.
func TestSyncGroupWaiterGetsALaterRound(t *testing.T) {
	s := newFakeSyncer(true)
	g := newFakeGroup(t, s)
	a := syncAsync(g)
	<-s.entered
	b := syncAsync(g)
	waitWaiting(t, g, 1)
	s.release <- struct{}{}
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	if r := <-s.entered; r != 2 {
		t.Fatalf("round %d entered for the late caller, want 2", r)
	}
	noResult(t, b, "the late caller")
	s.release <- struct{}{}
	if err := <-b; err != nil {
		t.Fatal(err)
	}
	c := syncAsync(g)
	if r := <-s.entered; r != 3 {
		t.Fatalf("round %d entered for an idle group, want 3", r)
	}
	s.release <- struct{}{}
	if err := <-c; err != nil {
		t.Fatal(err)
	}
}

// The invariant under contention: when Sync returns, a round that started after the call has
// finished.
func TestSyncGroupRoundStartsAfterTheCall(t *testing.T) {
	s := newFakeSyncer(false)
	g := newFakeGroup(t, s)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 300 {
				before, _ := s.counts()
				if err := g.Sync(); err != nil {
					errs <- err
					return
				}
				if _, finished := s.counts(); finished < before+1 {
					errs <- errors.New("Sync returned before a round that started after the call finished")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if started, _ := s.counts(); started >= 8*300 {
		t.Logf("no round was shared (%d rounds)", started)
	}
}

// The first failed sync poisons the group: Failed() is closed, its callers and every later one
// fail with ErrSyncFailed wrapping the cause, no further sync runs, logs of the group fail before writing
// anything, and no log can join. A caller whose round succeeded before the failure succeeds.
func TestSyncGroupPoisoned(t *testing.T) {
	s := newFakeSyncer(true)
	s.errs = map[int]error{2: syscall.EIO}
	g := newFakeGroup(t, s)
	mem := syncerFS{FS: faultfs.NewCrashFS(), s: s}
	idle := mustOpen(t, "/data/idle", Options{FS: mem, SyncGroup: g})

	a := syncAsync(g)
	<-s.entered
	b := syncAsync(g)
	waitWaiting(t, g, 1)
	s.release <- struct{}{}
	if err := <-a; err != nil {
		t.Fatalf("a caller whose round succeeded: %v", err)
	}
	select {
	case <-g.Failed():
		t.Fatal("Failed() closed after a round that succeeded")
	default:
	}
	<-s.entered
	s.release <- struct{}{}
	if err := <-b; !errors.Is(err, ErrSyncFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("caller of the failed round: %v, want ErrSyncFailed wrapping EIO", err)
	}
	select {
	case <-g.Failed():
	default:
		t.Fatal("Failed() not closed after the failed round")
	}
	for range 3 {
		if err := g.Sync(); !errors.Is(err, ErrSyncFailed) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("Sync after the failure: %v", err)
		}
	}
	if err := g.Err(); !errors.Is(err, ErrSyncFailed) {
		t.Fatalf("Err() = %v", err)
	}
	if started, _ := s.counts(); started != 2 {
		t.Fatalf("%d syncs, want none after the failure", started)
	}

	size := idle.Size()
	if _, err := idle.Append(fixedBatch(1, 1, 10)); !errors.Is(err, ErrFailed) || !errors.Is(err, ErrSyncFailed) {
		t.Fatalf("Append to a log of the poisoned group: %v, want ErrFailed and ErrSyncFailed", err)
	}
	if b, err := mem.FS.(*faultfs.CrashFS).ReadFile(filepath.Join("/data/idle", segmentName(0, 1))); err != nil || int64(len(b)) != size {
		t.Fatalf("the refused append wrote: segment has %d bytes (%v), want %d", len(b), err, size)
	}
	if err := idle.SetStartOffset(0); !errors.Is(err, ErrFailed) {
		t.Fatalf("SetStartOffset on a log of the poisoned group: %v", err)
	}
	for _, rc := range recoverers {
		if _, _, err := rc.open(t, "/data/new", Options{FS: mem, SyncGroup: g}); !errors.Is(err, ErrSyncFailed) {
			t.Fatalf("%s with a poisoned group: %v, want ErrSyncFailed", rc.name, err)
		}
	}
}

// A log joins only a group of its own file system.
func TestSyncGroupRefusesAnotherFileSystem(t *testing.T) {
	s := newFakeSyncer(false)
	s.others = map[string]bool{"/elsewhere": true}
	g := newFakeGroup(t, s)
	mem := syncerFS{FS: faultfs.NewCrashFS(), s: s}
	for _, rc := range recoverers {
		_, _, err := rc.open(t, "/elsewhere", Options{FS: mem, SyncGroup: g})
		if err == nil || errors.Is(err, ErrSyncFailed) {
			t.Fatalf("%s of a log on another file system: %v, want a refusal", rc.name, err)
		}
	}
	l := mustOpen(t, "/data/p0", Options{FS: mem, SyncGroup: g})
	mustAppend(t, l, fixedBatch(1, 2, 10))
}

// On the operating system: a group over a real directory syncs with syncfs(2), refuses a
// directory of another file system (procfs, tmpfs), and its logs are durable without
// fdatasync of their segments.
func TestSyncGroupOnTheOperatingSystem(t *testing.T) {
	root := t.TempDir()
	fsys := faultfs.Wrap(vfs.OS(), nil)
	g, err := NewSyncGroup(zaptest.NewLogger(t), root, SyncGroupOptions{FS: fsys})
	if err != nil {
		t.Fatalf("NewSyncGroup: %v (this test needs Linux 5.8 or later)", err)
	}
	defer g.Close()
	if err := g.join("/proc"); err == nil {
		t.Fatal("a log on procfs joined a group of another file system")
	}
	if _, err := NewSyncGroup(zaptest.NewLogger(t), filepath.Join(root, "missing"), SyncGroupOptions{}); err == nil {
		t.Fatal("NewSyncGroup of a missing directory succeeded")
	}

	var fileSyncs, fsSyncs int
	var mu sync.Mutex
	logs := make([]*Log, 3)
	for i := range logs {
		logs[i] = mustOpen(t, filepath.Join(root, "p", string(rune('a'+i))), Options{FS: fsys, SyncGroup: g})
	}
	fsys.SetInjector(faultfs.InjectorFunc(func(op faultfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case op.Kind == faultfs.OpSync:
			fileSyncs++
		case op.Kind == faultfs.OpSyncFS:
			fsSyncs++
		}
		return nil
	}))
	var model [3][][]byte
	for i := range 30 {
		b := fixedBatch(uint64(i), 2, 50)
		mustAppend(t, logs[i%3], b)
		model[i%3] = append(model[i%3], b...)
	}
	fsys.SetInjector(nil)
	if fileSyncs != 0 || fsSyncs != 30 || g.Syncs() != 30 {
		t.Fatalf("30 sequential appends made %d file syncs and %d file-system syncs (group: %d), want 0 and 30", fileSyncs, fsSyncs, g.Syncs())
	}
	for i, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l2 := mustOpen(t, filepath.Join(root, "p", string(rune('a'+i))), Options{})
		checkRecords(t, readAll(t, l2, 0), want(model[i], 0))
	}
}

// What a power cut leaves: appends acknowledged through the group survive, though their
// segments were never synced on their own.
func TestSyncGroupAppendsSurviveACrash(t *testing.T) {
	mem := faultfs.NewCrashFS()
	if err := mem.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	if err := mem.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	g, err := NewSyncGroup(zaptest.NewLogger(t), "/data", SyncGroupOptions{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var model [2][][]byte
	logs := [2]*Log{mustOpen(t, "/data/a", Options{FS: mem, SyncGroup: g}), mustOpen(t, "/data/b", Options{FS: mem, SyncGroup: g})}
	for i := range 10 {
		b := fixedBatch(uint64(i), 3, 20)
		mustAppend(t, logs[i%2], b)
		model[i%2] = append(model[i%2], b...)
	}
	after := mem.CrashClone(faultfs.CrashOptions{})
	for i, dir := range []string{"/data/a", "/data/b"} {
		l := mustOpen(t, dir, Options{FS: after})
		checkRecords(t, readAll(t, l, 0), want(model[i], 0))
	}
}

// Close answers later calls with ErrClosed and is idempotent.
func TestSyncGroupClose(t *testing.T) {
	s := newFakeSyncer(false)
	g, err := NewSyncGroup(zaptest.NewLogger(t), "/data", SyncGroupOptions{FS: syncerFS{FS: faultfs.NewCrashFS(), s: s}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := g.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
	if !s.closed {
		t.Fatal("the syncer was not closed")
	}
}
