package shard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// acked tracks, per key, the highest start offset of an acknowledged write (-2: none).
type acked struct {
	mu sync.Mutex
	so map[Key]int64
}

func (a *acked) note(k Key, so int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cur, ok := a.so[k]; !ok || so > cur {
		a.so[k] = so
	}
}

func (a *acked) copy() map[Key]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[Key]int64, len(a.so))
	for k, v := range a.so {
		out[k] = v
	}
	return out
}

// checkAcked verifies that every acknowledged write is reflected: start offsets never regress, so
// the stored one is at least the highest acknowledged.
func checkAcked(t *testing.T, s *Shard, want map[Key]int64) {
	t.Helper()
	for k, so := range want {
		got := s.ReadSummary(context.Background(), SummaryRequest{Key: k})
		if got.Code != kafkaerr.None || got.StartOffset < so {
			t.Fatalf("key %v: summary %+v, but a write with start offset %d was acknowledged", k, got, so)
		}
	}
}

// retriable reports whether r is an answer a failing shard may give.
func retriable(r Result) bool {
	return r.Code == kafkaerr.None || r.Code == kafkaerr.CoordinatorNotAvailable || r.Code == kafkaerr.CoordinatorLoadInProgress
}

// writeRandomly is worker w of a random write workload: until stop is closed it writes random
// requests with growing start offsets to keys, each through the shard route picks, and notes
// every acknowledged one in a.
func writeRandomly(t *testing.T, seed uint64, w int, keys []Key, route func(Key) *Shard, stop <-chan struct{}, a *acked) {
	r := rand.New(rand.NewPCG(seed, uint64(w)))
	for j := int64(1); ; j++ {
		select {
		case <-stop:
			return
		default:
		}
		k := keys[r.IntN(len(keys))]
		so := j*10 + int64(w)
		req := randomWrite(r, k, so)
		req.StateEpoch, req.LeaderEpoch, req.StartOffset = 1, 0, so
		if res := route(k).Write(context.Background(), req); res.Code == kafkaerr.None {
			a.note(k, so)
		} else if !retriable(res) {
			t.Errorf("write: %+v", res)
			return
		}
	}
}

// Fault injection through the statelog's filesystem seam, pebble errorfs style: fail filesystem
// operation #i for every i until the workload runs clean. Every failure surfaces as a retriable
// error, nothing panics, the shard serves again once the fault is gone, every acknowledged write is
// reflected both after the reload and after reopening, and the reopened state equals the live one.
func TestShardFaultInjection(t *testing.T) {
	for i := int64(0); ; i++ {
		inj := faultfs.OnIndex(i, syscall.EIO)
		if i%2 == 1 {
			inj = faultfs.OnIndex(i, syscall.ENOSPC)
		}
		fs := faultfs.Wrap(faultfs.NewCrashFS(), inj)
		ts := newTestShard(t, testOpts{LogDir: "/data", Log: statelog.Options{FS: fs, SegmentBytes: 600}, Options: Options{RetryBackoff: time.Millisecond, MaxRetryBackoff: 2 * time.Millisecond}})
		ts.provider = newLimits(3)
		s := ts.open(nil)
		ctx := context.Background()
		waitState(t, s, Active) // a failed load is retried
		a := &acked{so: map[Key]int64{}}
		for j := 0; j < 60; j++ {
			k := key(j % 4)
			var r Result
			if j < 4 {
				r = s.Initialize(ctx, InitializeRequest{Key: k, StateEpoch: 1, StartOffset: 0})
			} else {
				r = s.Write(ctx, WriteRequest{Key: k, StateEpoch: 1, StartOffset: int64(j), StateBatches: bs(sb(int64(j), int64(j)+2, 2, 1))})
				if r.Code == kafkaerr.InvalidRequest {
					continue // the key's initialize was not acknowledged
				}
				if r.Code == kafkaerr.None {
					a.note(k, int64(j))
				}
			}
			if !retriable(r) {
				t.Fatalf("fault %d, op %d: %+v", i, j, r)
			}
			if r.Code != kafkaerr.None {
				waitState(t, s, Active) // the batch failed: the shard reloads before serving again
			}
			if j == 30 {
				if _, err := s.Prune(ctx); err != nil && !errors.Is(err, ErrNotAvailable) && !errors.Is(err, ErrLoading) && !errors.Is(err, syscall.EIO) && !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fault %d: prune: %v", i, err)
				}
			}
		}
		_, fired := inj.Fired()
		fs.SetInjector(nil)
		waitState(t, s, Active)
		checkAcked(t, s, a.copy())
		// It serves writes again.
		probe := Key{"probe", testTopic, 0}
		mustOK(t, s.Initialize(ctx, InitializeRequest{Key: probe, StateEpoch: 1}))
		_ = s.Close()
		live := s.m

		s2 := ts.open(nil)
		if err := s2.WaitLoaded(ctx); err != nil {
			t.Fatalf("fault %d: reopen: %v", i, err)
		}
		checkAcked(t, s2, a.copy())
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
		assertSameMachine(t, s2.m, live)
		if !fired {
			if i < 20 {
				t.Fatalf("the workload performed only %d filesystem operations", i)
			}
			t.Logf("ran %d fault points", i)
			return
		}
	}
}

// A load that keeps failing leaves the shard Failed (operations get COORDINATOR_NOT_AVAILABLE with
// the cause); the load is retried with backoff and the shard serves once the fault clears.
func TestShardFailedLoadRetries(t *testing.T) {
	fs := faultfs.Wrap(vfs.OS(), faultfs.Match(faultfs.OnKinds(faultfs.OpOpen, faultfs.OpOpenReadWrite, faultfs.OpCreate), syscall.EIO))
	ts := newTestShard(t, testOpts{Log: statelog.Options{FS: fs}, Options: Options{RetryBackoff: time.Millisecond, MaxRetryBackoff: time.Millisecond}})
	s := ts.open(nil)
	defer s.Close()
	ctx := context.Background()
	if err := s.WaitLoaded(ctx); err == nil || !errors.Is(err, syscall.EIO) {
		t.Fatalf("WaitLoaded: %v, want the load error", err)
	}
	r := s.Write(ctx, WriteRequest{Key: testKey})
	if r.Code != kafkaerr.CoordinatorNotAvailable && r.Code != kafkaerr.CoordinatorLoadInProgress {
		t.Fatalf("write on a failed shard: %+v", r)
	}
	fs.SetInjector(nil)
	waitState(t, s, Active)
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
}

// An append failure fails every operation of the batch, drops the state and reloads it from disk:
// the failed operation's effect is not visible afterwards.
func TestShardAppendFailureReloads(t *testing.T) {
	fs := faultfs.Wrap(vfs.OS(), nil)
	ts := newTestShard(t, testOpts{Log: statelog.Options{FS: fs}, Options: Options{}})
	s := ts.active(nil)
	ctx := context.Background()
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	fs.SetInjector(faultfs.Match(faultfs.OnKinds(faultfs.OpWrite), syscall.EIO))
	r := s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 42})
	if r.Code != kafkaerr.CoordinatorNotAvailable || r.Message == "" {
		t.Fatalf("write during an append failure: %+v", r)
	}
	fs.SetInjector(nil)
	waitState(t, s, Active)
	if got := s.ReadSummary(ctx, SummaryRequest{Key: testKey}); got.StartOffset != 0 {
		t.Fatalf("the failed write is visible after the reload: %+v", got)
	}
	mustOK(t, s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 43}))
}

// TestShardLoadLogLevels: a first load is logged at DEBUG (the caller of WaitLoaded sums the
// partitions up), a reload after a failed append at INFO; Stats reports what the last load
// replayed and how long it took.
func TestShardLoadLogLevels(t *testing.T) {
	fs := faultfs.Wrap(vfs.OS(), nil)
	ts := newTestShard(t, testOpts{Log: statelog.Options{FS: fs}, Options: Options{}})
	core, logs := observer.New(zapcore.DebugLevel)
	ts.logger = zap.New(core)
	s := ts.active(nil)
	loads := func() []observer.LoggedEntry { return logs.FilterMessage("state partition loaded").All() }
	if l := loads(); len(l) != 1 || l[0].Level != zapcore.DebugLevel || l[0].ContextMap()["reload"] != false {
		t.Fatalf("first load logged as %v, want one DEBUG line", l)
	}
	if st := s.Stats(); st.LoadedRecords != 0 || st.LoadTime <= 0 {
		t.Fatalf("after the first load: %+v", st)
	}
	ctx := context.Background()
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	fs.SetInjector(faultfs.Match(faultfs.OnKinds(faultfs.OpWrite), syscall.EIO))
	s.mu.Lock()
	changed := s.changed
	s.mu.Unlock()
	if r := s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 42}); r.Code != kafkaerr.CoordinatorNotAvailable {
		t.Fatalf("write during an append failure: %+v", r)
	}
	fs.SetInjector(nil)
	waitReloaded(t, s, changed)
	l := loads()
	if len(l) != 2 || l[1].Level != zapcore.InfoLevel || l[1].ContextMap()["reload"] != true || l[1].ContextMap()["records"] != int64(1) {
		t.Fatalf("reload logged as %v, want an INFO line with reload=true and 1 record", l)
	}
	if st := s.Stats(); st.LoadedRecords != 1 || st.Keys != 1 {
		t.Fatalf("after the reload: %+v", st)
	}
}

// Power cuts at random moments of a concurrent random workload: the log left behind loads, and
// every write acknowledged before the cut is reflected.
func TestShardCrashRecovery(t *testing.T) {
	for seed := uint64(0); seed < 12; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			crash := faultfs.NewCrashFS()
			ts := newTestShard(t, testOpts{LogDir: "/data", Log: statelog.Options{FS: crash, SegmentBytes: 2048}, Options: Options{}})
			ts.provider = newLimits(4)
			s := ts.active(nil)
			ctx := context.Background()
			keys := []Key{key(0), key(1), key(2), key(3), key(4), key(5)}
			for _, k := range keys {
				mustOK(t, s.Initialize(ctx, InitializeRequest{Key: k, StateEpoch: 1}))
			}
			a := &acked{so: map[Key]int64{}}
			stop := make(chan struct{})
			route := func(Key) *Shard { return s }
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() { writeRandomly(t, seed, w, keys, route, stop, a) })
			}
			r := rand.New(rand.NewPCG(seed, 99))
			for cut := 0; cut < 3; cut++ {
				// Let some writes through, then cut the power while writes are in flight.
				for n := s.Stats().Commits + int64(5+r.IntN(30)); s.Stats().Commits < n; {
					s.ReadSummary(ctx, SummaryRequest{Key: keys[0]})
				}
				want := a.copy()
				clone := crash.CrashClone(faultfs.CrashOptions{Rand: rand.New(rand.NewPCG(seed, uint64(cut))), ZeroFill: cut%2 == 1})
				after := newTestShard(t, testOpts{LogDir: "/data", Log: statelog.Options{FS: clone}, Options: Options{}})
				after.provider = ts.provider
				s2 := after.open(nil)
				if err := s2.WaitLoaded(ctx); err != nil {
					t.Fatalf("cut %d: the log left by the power cut does not load: %v", cut, err)
				}
				checkAcked(t, s2, want)
				if err := s2.Close(); err != nil {
					t.Fatal(err)
				}
			}
			close(stop)
			wg.Wait()
		})
	}
}

// TestRepeatedAppendFailuresBackOff: a first failed append reloads the partition at once; when
// appends keep failing, the next reload waits, calls meanwhile are answered
// COORDINATOR_LOAD_IN_PROGRESS naming the failure, and closing the shard does not wait for it.
func TestRepeatedAppendFailuresBackOff(t *testing.T) {
	fsys := faultfs.Wrap(faultfs.NewCrashFS(), nil)
	ts := newTestShard(t, testOpts{LogDir: "/data", Log: statelog.Options{FS: fsys}, Options: Options{RetryBackoff: time.Hour, MaxRetryBackoff: time.Hour}}) // the wait is then maxAppendBackoff
	waits := make(chan time.Duration, 4)
	s := ts.open(func(s *Shard) { s.waits = waits })
	waitState(t, s, Active)
	ctx := context.Background()
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	fsys.SetInjector(faultfs.Match(faultfs.OnKinds(faultfs.OpWrite), syscall.ENOSPC))

	write := func() Result {
		return s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 0, StateBatches: bs(sb(0, 1, 2, 1))})
	}
	firstLog := ts.log()
	reload := nextChange(s)
	if r := write(); r.Code != kafkaerr.CoordinatorNotAvailable {
		t.Fatalf("first failed append: %+v", r)
	}
	// Reloaded at once: a new log is open and the shard is active again, without a wait.
	waitReloaded(t, s, reload)
	if ts.log() == firstLog {
		t.Fatal("active again after the first failure without opening the log again")
	}
	select {
	case w := <-waits:
		t.Fatalf("the reload after the first failure waited %v", w)
	default:
	}
	failed := ts.log()
	if r := write(); r.Code != kafkaerr.CoordinatorNotAvailable {
		t.Fatalf("second failed append: %+v", r)
	}
	// Now it waits before reloading (the longest wait, RetryBackoff being longer), and says why.
	if w := nextWait(t, waits); w != maxAppendBackoff {
		t.Fatalf("the reload after a second failure in a row waits %v, want %v", w, maxAppendBackoff)
	}
	st := s.Status()
	if st.State != Loading || !errors.Is(st.Err, syscall.ENOSPC) {
		t.Fatalf("status after a second failure in a row: %+v, want Loading with the failure", st)
	}
	if r := write(); r.Code != kafkaerr.CoordinatorLoadInProgress || !strings.Contains(r.Message, "no space left on device") {
		t.Fatalf("a call while the reload waits: %+v, want LOAD_IN_PROGRESS naming the failure", r)
	}
	if st := s.Status(); st.State != Loading || ts.log() != failed {
		t.Fatalf("the reload did not wait: status %+v, log reopened %v", st, ts.log() != failed)
	}
	fsys.SetInjector(nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// None of the refused writes is there (closing during the wait with a batch in the file is
	// TestCloseCutsAfterFailedSync's case).
	s2 := ts.active(nil)
	if got := s2.Read(ctx, ReadRequest{Key: testKey}); got.Code != kafkaerr.None || len(got.StateBatches) != 0 {
		t.Fatalf("after the failures and a reopen: %+v, want the initialized state only", got)
	}
}

// syncFailsAfterWrite fails the first sync that follows a write, once armed, and the truncation
// with which the failed append then cuts its own frame: the batch stays in the file (perhaps only
// in the page cache) but was never acknowledged, for the shard's reload or close to cut. After it
// fires it calls then.
func syncFailsAfterWrite(armed *atomic.Bool, then func()) faultfs.Injector {
	var mu sync.Mutex
	var last faultfs.OpKind
	var cutFails atomic.Bool
	return faultfs.InjectorFunc(func(op faultfs.Op) error {
		mu.Lock()
		prev := last
		last = op.Kind
		mu.Unlock()
		if op.Kind == faultfs.OpTruncate && cutFails.CompareAndSwap(true, false) {
			return syscall.EIO
		}
		if op.Kind == faultfs.OpSync && prev == faultfs.OpWrite && armed.CompareAndSwap(true, false) {
			cutFails.Store(true)
			if then != nil {
				then()
			}
			return syscall.EIO
		}
		return nil
	})
}

// TestCloseCutsAfterFailedSync: a batch whose sync failed is in the log file but was never
// acknowledged; whenever the shard closes before its reload has cut it — while it waits to
// reload after repeated failures, or in the middle of that reload — the close makes the cut, so
// the batch never reappears.
func TestCloseCutsAfterFailedSync(t *testing.T) {
	t.Run("during the wait before the reload", func(t *testing.T) {
		var armed atomic.Bool
		fsys := faultfs.Wrap(faultfs.NewCrashFS(), syncFailsAfterWrite(&armed, nil))
		ts := newTestShard(t, testOpts{LogDir: "/data", Log: statelog.Options{FS: fsys}, Options: Options{RetryBackoff: time.Hour, MaxRetryBackoff: time.Hour}})
		s := openLocal(ts.logger, ts.provider, ts.opts)
		waitState(t, s, Active)
		ctx := context.Background()
		mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
		for i := range 2 { // the second failure in a row makes the reload wait
			armed.Store(true)
			reload := nextChange(s)
			if r := s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 0, StateBatches: bs(sb(0, 1, 2, 1))}); r.Code != kafkaerr.CoordinatorNotAvailable {
				t.Fatalf("write %d whose sync fails: %+v", i, r)
			}
			if i == 0 {
				waitReloaded(t, s, reload) // the first failure reloads at once
			}
		}
		waitState(t, s, Loading)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2 := openLocal(ts.logger, ts.provider, ts.opts)
		defer s2.Close()
		waitState(t, s2, Active)
		if got := s2.Read(ctx, ReadRequest{Key: testKey}); got.Code != kafkaerr.None || len(got.StateBatches) != 0 {
			t.Fatalf("the unacknowledged batch reappeared: %+v", got)
		}
	})
	t.Run("during the reload", func(t *testing.T) {
		var armed, blockReads atomic.Bool
		release, blocked := make(chan struct{}), make(chan struct{})
		var once sync.Once
		inj := syncFailsAfterWrite(&armed, func() { blockReads.Store(true) })
		fsys := faultfs.Wrap(faultfs.NewCrashFS(), faultfs.InjectorFunc(func(op faultfs.Op) error {
			if err := inj.MaybeError(op); err != nil {
				return err
			}
			if op.Kind == faultfs.OpRead && blockReads.Load() {
				once.Do(func() { close(blocked) })
				<-release // the reload's replay waits here until the shard is closing
			}
			return nil
		}))
		ts := newTestShard(t, testOpts{LogDir: "/data", Log: statelog.Options{FS: fsys}, Options: Options{}})
		s := openLocal(ts.logger, ts.provider, ts.opts)
		waitState(t, s, Active)
		ctx := context.Background()
		mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
		// Enough records that the replay checks for a close (every 4096 records) before it ends.
		for i := range int64(5000) {
			mustOK(t, s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: -1, StateBatches: bs(sb(i, i, 0, 1))}))
		}
		armed.Store(true)
		if r := s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 9000, StateBatches: bs(sb(9000, 9001, 2, 1))}); r.Code != kafkaerr.CoordinatorNotAvailable {
			t.Fatalf("write whose sync fails: %+v", r)
		}
		closed := make(chan error, 1)
		go func() { closed <- s.Close() }()
		<-blocked // the reload's replay waits at a read
		if st := s.Status(); st.State != Loading {
			t.Fatalf("status %+v with the replay held, want Loading", st)
		}
		<-s.drain // Close has asked the shard to stop while the replay waits
		blockReads.Store(false)
		close(release)
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		s2 := openLocal(ts.logger, ts.provider, ts.opts)
		defer s2.Close()
		waitState(t, s2, Active)
		if got := s2.Read(ctx, ReadRequest{Key: testKey}); got.Code != kafkaerr.None || got.StartOffset == 9000 {
			t.Fatalf("the unacknowledged write reappeared: %+v", got)
		}
	})
}
