package shard

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// openReal opens a shard the way the server does (on a LocalLog) and closes it at the end.
func openReal(t *testing.T, logger *zap.Logger, opts testOpts) *Shard {
	t.Helper()
	return openHooked(t, logger, opts, nil)
}

// openHooked is openReal with prepare, which sets test hooks, run before the shard goroutine
// starts.
func openHooked(t *testing.T, logger *zap.Logger, opts testOpts, prepare func(*Shard)) *Shard {
	t.Helper()
	if opts.Now == nil {
		opts.Now = newFakeClock().Now
	}
	s := start(logger, newLimits(500), opts.Options, opts.localLog(logger), prepare)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// failNth fails the n-th (1-based) operation that p selects with err, and no other.
func failNth(n int64, p faultfs.Predicate, err error) faultfs.Injector {
	var seen atomic.Int64
	return faultfs.InjectorFunc(func(op faultfs.Op) error {
		if p(op) && seen.Add(1) == n {
			return err
		}
		return nil
	})
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func segmentSizes(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".seg" {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
	}
	return n
}

// summaryWhenServing asks for k's summary until the shard answers it (it may be reloading).
func summaryWhenServing(t *testing.T, s *Shard, k Key) SummaryResult {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		r := s.ReadSummary(context.Background(), SummaryRequest{Key: k})
		if r.Code == kafkaerr.None {
			return r
		}
		if !retriable(r.Result) {
			t.Fatalf("summary of %v: %+v", k, r)
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the shard did not serve again: %+v", r)
		}
	}
}

// waitState waits until s is in state want (after a reload or a retried load, say); it fails if s
// closes first.
func waitState(t *testing.T, s *Shard, want State) {
	t.Helper()
	waitStatus(t, s, want.String(), func(st Status) bool { return st.State == want })
}

// waitStatus waits, on the shard's status changes, until s's status satisfies cond (what says
// what cond wants); it fails if s closes first.
func waitStatus(t *testing.T, s *Shard, what string, cond func(Status) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		st, changed := s.status, s.changed
		s.mu.Unlock()
		if cond(st) {
			return
		}
		if st.State == Closed {
			t.Fatalf("shard closed, want %s", what)
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("shard status %+v, want %s", st, what)
		}
	}
}

// nextChange returns a channel that is closed at the next change of s's status.
func nextChange(s *Shard) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// waitReloaded waits for the reload that a failed append of an Active shard makes at once:
// changed, taken from nextChange before the failing call, closes when the reload starts (the
// status before it may still read Active), then the shard turns Active again.
func waitReloaded(t *testing.T, s *Shard, changed <-chan struct{}) {
	t.Helper()
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatalf("no reload after the failed append: status %+v", s.Status())
	}
	waitState(t, s, Active)
}

// nextWait returns the next wait before a load that the shard reports on its waits hook.
func nextWait(t *testing.T, waits <-chan time.Duration) time.Duration {
	t.Helper()
	select {
	case d := <-waits:
		return d
	case <-time.After(20 * time.Second):
		t.Fatal("the shard did not wait before a load")
		return 0
	}
}

// After an append whose sync failed, and whose own cut of the failed frame failed too, the reload
// cuts the log back to its durable end: the unacknowledged batch is gone from disk and from the
// state, although its write reached the file (and a plain reopen would find it). A load that
// fails in between keeps the cut pending.
func TestShardReloadTruncatesToDurableEnd(t *testing.T) {
	tests := []struct {
		name string
		// alsoFail fails something of the first reload, which is then retried.
		alsoFail faultfs.Predicate
	}{
		{name: "reload succeeds"},
		{name: "first reload fails", alsoFail: faultfs.OnKinds(faultfs.OpLock)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := faultfs.Wrap(vfs.OS(), nil)
			reg := prometheus.NewRegistry()
			opts := testOpts{LogDir: t.TempDir(), Log: statelog.Options{FS: fsys, Metrics: statelog.NewMetrics(reg)}, Options: Options{RetryBackoff: time.Millisecond, MaxRetryBackoff: time.Millisecond}}
			s := openReal(t, zaptest.NewLogger(t), opts)
			ctx := context.Background()
			if err := s.WaitLoaded(ctx); err != nil {
				t.Fatal(err)
			}
			dir := opts.LogDir
			mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
			mustOK(t, s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 10, StateBatches: bs(sb(10, 19, 2, 1))}))
			durableEnd, durableBytes := s.Stats().LogEndOffset, segmentSizes(t, dir)

			syncFails := faultfs.Any(failNth(1, faultfs.OnKinds(faultfs.OpSync).And(faultfs.OnPath("*.seg")), syscall.EIO),
				failNth(1, faultfs.OnKinds(faultfs.OpTruncate), syscall.EIO))
			inj := syncFails
			if tc.alsoFail != nil {
				inj = faultfs.Any(syncFails, failNth(1, tc.alsoFail, syscall.EIO))
			}
			fsys.SetInjector(inj)
			r := s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 42, StateBatches: bs(sb(42, 50, 2, 1))})
			if r.Code != kafkaerr.CoordinatorNotAvailable {
				t.Fatalf("write whose sync failed: %+v", r)
			}
			got := summaryWhenServing(t, s, testKey)
			fsys.SetInjector(nil)

			if got.StartOffset != 10 {
				t.Fatalf("after the reload: %+v, want the last acknowledged start offset 10", got)
			}
			if st := s.Stats(); st.LogEndOffset != durableEnd {
				t.Fatalf("log end %d after the reload, want the durable end %d", st.LogEndOffset, durableEnd)
			}
			if got := segmentSizes(t, dir); got != durableBytes {
				t.Fatalf("segments hold %d bytes after the reload, want the %d durable ones", got, durableBytes)
			}
			if got := counterValue(t, reg, "sharecoord_state_log_durable_end_truncations_total"); got != 1 {
				t.Fatalf("durable-end truncations = %v, want 1", got)
			}
			// It serves and persists again; a fresh open sees the same.
			mustOK(t, s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 43}))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2 := openReal(t, zaptest.NewLogger(t), testOpts{LogDir: opts.LogDir, Options: Options{}})
			if err := s2.WaitLoaded(ctx); err != nil {
				t.Fatal(err)
			}
			if got := s2.ReadSummary(ctx, SummaryRequest{Key: testKey}); got.StartOffset != 43 {
				t.Fatalf("after reopening: %+v, want start offset 43", got)
			}
		})
	}
}

// newOSSyncGroup makes a sync group over a fresh data directory of the operating system's file
// system, wrapped for fault injection; the group is closed at the end of the test.
func newOSSyncGroup(t *testing.T) (dataDir string, fsys *faultfs.FS, g *statelog.SyncGroup) {
	t.Helper()
	dataDir = t.TempDir()
	fsys = faultfs.Wrap(vfs.OS(), nil)
	g, err := statelog.NewSyncGroup(zaptest.NewLogger(t), dataDir, statelog.SyncGroupOptions{FS: fsys})
	if err != nil {
		t.Fatalf("NewSyncGroup: %v (needs Linux 5.8 or later)", err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return dataDir, fsys, g
}

// A commit that fails while the shard is closing (an operation queued before Close, committed by
// the drain) gets the same cut as the reload after a failed commit: the unacknowledged batch, whose
// write reached the file although its sync failed, is gone when the log is next opened.
func TestShardCloseAfterFailedCommitCutsToDurableEnd(t *testing.T) {
	ctx := context.Background()
	segSync := faultfs.OnKinds(faultfs.OpSync).And(faultfs.OnPath("*.seg"))
	// Whether the queued write is committed by the drain or before it is up to the shard's
	// select; try until the drain took it.
	for attempt := 1; ; attempt++ {
		if attempt > 50 {
			t.Fatal("the drain never committed the queued write")
		}
		fsys := faultfs.Wrap(vfs.OS(), nil)
		core, logs := observer.New(zapcore.WarnLevel)
		opts := testOpts{LogDir: t.TempDir(), Log: statelog.Options{FS: fsys}, Options: Options{}}
		s := openHooked(t, zap.New(core), opts, hookQueue)
		if err := s.WaitLoaded(ctx); err != nil {
			t.Fatal(err)
		}
		mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))

		// The first write's sync waits for the test; the second write's sync fails.
		blocked, release := make(chan struct{}), make(chan struct{})
		var syncs atomic.Int64
		fsys.SetInjector(faultfs.InjectorFunc(func(op faultfs.Op) error {
			if !segSync(op) {
				return nil
			}
			switch syncs.Add(1) {
			case 1:
				close(blocked)
				<-release
			case 2:
				return syscall.EIO
			}
			return nil
		}))
		first := make(chan Result, 1)
		go func() {
			first <- s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 10, StateBatches: bs(sb(10, 19, 2, 1))})
		}()
		<-blocked
		second := make(chan Result, 1)
		go func() {
			second <- s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 20, StateBatches: bs(sb(20, 29, 2, 1))})
		}()
		waitQueued(t, s, 1)
		closed := make(chan error, 1)
		go func() { closed <- s.Close() }()
		<-s.drain // Close has told the shard to drain before the first write's sync returns
		close(release)
		<-closed
		fsys.SetInjector(nil)
		mustOK(t, <-first)
		if r := <-second; r.Code != kafkaerr.CoordinatorNotAvailable {
			t.Fatalf("write whose sync failed: %+v", r)
		}
		if logs.FilterMessageSnippet("reloaded after a failed append").Len() > 0 {
			continue // committed before the drain: the reload cut it, which another test covers
		}
		if n := logs.FilterMessageSnippet("closing after a failed commit: cut the state log").Len(); n != 1 {
			t.Errorf("%d cuts logged on close, want 1:\n%v", n, logs.All())
		}
		s2 := openReal(t, zaptest.NewLogger(t), testOpts{LogDir: opts.LogDir, Options: Options{}})
		if err := s2.WaitLoaded(ctx); err != nil {
			t.Fatal(err)
		}
		if got := s2.ReadSummary(ctx, SummaryRequest{Key: testKey}); got.Code != kafkaerr.None || got.StartOffset != 10 {
			t.Fatalf("after reopening: %+v, want the acknowledged start offset 10", got)
		}
		t.Logf("the drain committed the queued write on attempt %d", attempt)
		return
	}
}

// Many partitions share one file-system sync group: writes spread over them are all durable,
// without a single fdatasync of a segment, and survive reopening.
func TestShardSyncGroupManyPartitions(t *testing.T) {
	const partitions = 16
	dataDir, fsys, g := newOSSyncGroup(t)
	shards := make([]*Shard, partitions)
	for p := range shards {
		shards[p] = openReal(t, zaptest.NewLogger(t), testOpts{LogDir: partitionLogDir(dataDir, p), Log: statelog.Options{FS: fsys, SyncGroup: g}, Options: Options{Partition: p}})
	}
	ctx := context.Background()
	for _, s := range shards {
		if err := s.WaitLoaded(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var fileSyncs atomic.Int64
	fsys.SetInjector(faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpSync {
			fileSyncs.Add(1)
		}
		return nil
	}))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 64 {
		wg.Go(func() {
			s := shards[w%partitions]
			k := Key{GroupID: "g", TopicID: testTopic, Partition: int32(w)}
			if r := s.Initialize(ctx, InitializeRequest{Key: k, StateEpoch: 1}); r.Code != kafkaerr.None {
				errs <- fmt.Errorf("initialize %v: %+v", k, r)
				return
			}
			for j := int64(1); j <= 20; j++ {
				if r := s.Write(ctx, WriteRequest{Key: k, StateEpoch: 1, StartOffset: j, StateBatches: bs(sb(j, j+1, 2, 1))}); r.Code != kafkaerr.None {
					errs <- fmt.Errorf("write %v: %+v", k, r)
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
	fsys.SetInjector(nil)
	var commits int64
	for _, s := range shards {
		commits += s.Stats().Commits
	}
	if fileSyncs.Load() != 0 {
		t.Fatalf("%d fdatasyncs of segments; a sync group makes none", fileSyncs.Load())
	}
	if g.Syncs() == 0 || g.Syncs() > commits {
		t.Fatalf("%d file-system syncs for %d commits", g.Syncs(), commits)
	}
	t.Logf("%d commits over %d partitions made durable by %d file-system syncs", commits, partitions, g.Syncs())
	for _, s := range shards {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for w := range 64 {
		p := w % partitions
		s := openReal(t, zaptest.NewLogger(t), testOpts{LogDir: partitionLogDir(dataDir, p), Options: Options{Partition: p}})
		if err := s.WaitLoaded(ctx); err != nil {
			t.Fatal(err)
		}
		k := Key{GroupID: "g", TopicID: testTopic, Partition: int32(w)}
		if got := s.ReadSummary(ctx, SummaryRequest{Key: k}); got.Code != kafkaerr.None || got.StartOffset != 20 {
			t.Fatalf("key %v after reopening: %+v", k, got)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A failed file-system sync fails every partition of the group for good, the idle ones at once
// rather than at their next use of the log: the write in flight and every later call get
// COORDINATOR_NOT_AVAILABLE, the partitions end Failed without retrying, and each logs at ERROR
// that the process must be restarted.
func TestShardSyncGroupFailure(t *testing.T) {
	dataDir, fsys, g := newOSSyncGroup(t)
	core, logs := observer.New(zapcore.ErrorLevel)
	shards := make([]*Shard, 3)
	for p := range shards {
		shards[p] = openReal(t, zap.New(core), testOpts{LogDir: partitionLogDir(dataDir, p), Log: statelog.Options{FS: fsys, SyncGroup: g}, Options: Options{Partition: p, RetryBackoff: time.Millisecond, MaxRetryBackoff: time.Millisecond}})
	}
	ctx := context.Background()
	for _, s := range shards {
		if err := s.WaitLoaded(ctx); err != nil {
			t.Fatal(err)
		}
		mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	}
	fsys.SetInjector(failNth(1, faultfs.OnKinds(faultfs.OpSyncFS), syscall.EIO))
	if r := shards[0].Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 5}); r.Code != kafkaerr.CoordinatorNotAvailable {
		t.Fatalf("write whose sync failed: %+v", r)
	}
	fsys.SetInjector(nil) // later syncs would succeed: the group must not trust them
	for p, s := range shards[1:] {
		waitState(t, s, Failed) // without a call of their own
		if err := s.WaitLoaded(ctx); !errors.Is(err, statelog.ErrSyncFailed) {
			t.Fatalf("partition %d: %v, want it failed with ErrSyncFailed", p+1, err)
		}
	}
	for p, s := range shards {
		if p > 0 {
			if r := s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 5}); r.Code != kafkaerr.CoordinatorNotAvailable {
				t.Fatalf("partition %d: write after the failure: %+v", p, r)
			}
		}
		waitState(t, s, Failed)
		if err := s.WaitLoaded(ctx); !errors.Is(err, statelog.ErrSyncFailed) {
			t.Fatalf("partition %d: %v, want it failed with ErrSyncFailed", p, err)
		}
		if r := s.ReadSummary(ctx, SummaryRequest{Key: testKey}); r.Code != kafkaerr.CoordinatorNotAvailable {
			t.Fatalf("partition %d: summary after the failure: %+v", p, r)
		}
	}
	restart := logs.FilterMessageSnippet("restart the process").Len()
	if restart != len(shards) {
		t.Fatalf("%d ERROR entries ask for a restart, want one per partition:\n%v", restart, logs.All())
	}
}

// Power cuts under a concurrent workload over partitions of one sync group (on the crash
// filesystem, whose file-system sync makes every file's data durable): every acknowledged write
// survives.
func TestShardSyncGroupCrashRecovery(t *testing.T) {
	for seed := uint64(0); seed < 6; seed++ {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			crash := faultfs.NewCrashFS()
			if err := crash.MkdirAll("/data"); err != nil {
				t.Fatal(err)
			}
			if err := crash.SyncDir("/"); err != nil {
				t.Fatal(err)
			}
			g, err := statelog.NewSyncGroup(zaptest.NewLogger(t), "/data", statelog.SyncGroupOptions{FS: crash})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			const partitions = 3
			shards := make([]*Shard, partitions)
			for p := range shards {
				shards[p] = openReal(t, zaptest.NewLogger(t), testOpts{LogDir: partitionLogDir("/data", p), Log: statelog.Options{FS: crash, SegmentBytes: 2048, SyncGroup: g}, Options: Options{Partition: p}})
			}
			ctx := context.Background()
			keys := []Key{key(0), key(1), key(2), key(3), key(4), key(5)}
			route := func(k Key) *Shard { return shards[int(k.Partition)%partitions] }
			for _, k := range keys {
				if err := route(k).WaitLoaded(ctx); err != nil {
					t.Fatal(err)
				}
				mustOK(t, route(k).Initialize(ctx, InitializeRequest{Key: k, StateEpoch: 1}))
			}
			a := &acked{so: map[Key]int64{}}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() { writeRandomly(t, seed, w, keys, route, stop, a) })
			}
			r := rand.New(rand.NewPCG(seed, 99))
			for cut := range 3 {
				for n := g.Syncs() + int64(5+r.IntN(30)); g.Syncs() < n; {
					shards[0].ReadSummary(ctx, SummaryRequest{Key: keys[0]})
				}
				want := a.copy()
				clone := crash.CrashClone(faultfs.CrashOptions{Rand: rand.New(rand.NewPCG(seed, uint64(cut))), ZeroFill: cut%2 == 1})
				for p := range partitions {
					s2 := openReal(t, zaptest.NewLogger(t), testOpts{LogDir: partitionLogDir("/data", p), Log: statelog.Options{FS: clone}, Options: Options{Partition: p}})
					if err := s2.WaitLoaded(ctx); err != nil {
						t.Fatalf("cut %d, partition %d: the log left by the power cut does not load: %v", cut, p, err)
					}
					for k, so := range want {
						if route(k) != shards[p] {
							continue
						}
						if got := s2.ReadSummary(ctx, SummaryRequest{Key: k}); got.Code != kafkaerr.None || got.StartOffset < so {
							t.Fatalf("cut %d: key %v: %+v, but a write with start offset %d was acknowledged", cut, k, got, so)
						}
					}
					if err := s2.Close(); err != nil {
						t.Fatal(err)
					}
				}
			}
			close(stop)
			wg.Wait()
		})
	}
}

// After a failed file-system sync the shard cannot reopen its log (the group refuses it) to cut
// it back to its durable end; the restart the error asks for must still not load the batch whose
// sync failed, which the page cache holds. The failed append cut it off itself.
func TestRestartAfterFailedGroupSyncDropsTheBatch(t *testing.T) {
	dataDir, fsys, g := newOSSyncGroup(t)
	ctx := context.Background()
	s := openReal(t, zaptest.NewLogger(t), testOpts{LogDir: dataDir, Log: statelog.Options{FS: fsys, SyncGroup: g}, Options: Options{RetryBackoff: 1, MaxRetryBackoff: 1}})
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	fsys.SetInjector(failNth(1, faultfs.OnKinds(faultfs.OpSyncFS), syscall.EIO))
	if r := s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 5}); r.Code != kafkaerr.CoordinatorNotAvailable {
		t.Fatalf("write whose sync failed: %+v", r)
	}
	waitState(t, s, Failed)
	_ = s.Close()
	_ = g.Close()
	// the process restarts
	restartServesOnlyTheInitialState(t, dataDir, "the write whose sync failed (never acknowledged, its pages' write-back failed)")
}

// restartServesOnlyTheInitialState opens a new shard on the log in logDir, as a restarted process
// does: testKey must hold only its initial state, not the write named what.
func restartServesOnlyTheInitialState(t *testing.T, logDir, what string) {
	t.Helper()
	ctx := context.Background()
	s := openReal(t, zaptest.NewLogger(t), testOpts{LogDir: logDir, Options: Options{}})
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.ReadSummary(ctx, SummaryRequest{Key: testKey}); got.StartOffset != 0 {
		t.Fatalf("after restart: %+v; %s is served as durable state", got, what)
	}
}

// The same with per-file fdatasync, where the shard keeps the durable end in memory: while the
// reload that would cut the failed batch keeps failing (a sick disk), the process is killed. The
// next process must not serve the unacknowledged batch.
func TestRestartWhileReloadFailsDropsTheBatch(t *testing.T) {
	dataDir := t.TempDir()
	fsys := faultfs.Wrap(vfs.OS(), nil)
	ctx := context.Background()
	s := openReal(t, zaptest.NewLogger(t), testOpts{LogDir: dataDir, Log: statelog.Options{FS: fsys}, Options: Options{RetryBackoff: time.Hour, MaxRetryBackoff: time.Hour}})
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	var n atomic.Int64
	fsys.SetInjector(faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpSync && n.Add(1) == 1 {
			return syscall.EIO // the append's fdatasync
		}
		if op.Kind == faultfs.OpReadDir {
			return syscall.EIO // the reload fails too
		}
		return nil
	}))
	if r := s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 5}); r.Code != kafkaerr.CoordinatorNotAvailable {
		t.Fatalf("write whose sync failed: %+v", r)
	}
	waitState(t, s, Failed)
	// kill -9 and restart: a new process opens the directory (the failed shard holds no lock).
	restartServesOnlyTheInitialState(t, dataDir, "the write whose fdatasync failed")
}

// A load whose sync of what it found fails is not retried: the retry would find the same bytes in
// the page cache and a sync that no longer reports the failure. The partition stays failed, saying
// what to do, until the process is restarted.
func TestLoadSyncFailureIsNotRetried(t *testing.T) {
	dir := logOfOneKey(t)
	ctx := context.Background()
	// A kill -9, not a clean close: no clean-end file (statelog's format) vouches for the log.
	if err := os.Remove(filepath.Join(dir, "clean-end")); err != nil {
		t.Fatal(err)
	}
	var syncs atomic.Int64
	fsys := faultfs.Wrap(vfs.OS(), faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpSync && filepath.Ext(op.Path) == ".seg" {
			syncs.Add(1)
			return syscall.EIO
		}
		return nil
	}))
	waits := make(chan time.Duration, 1)
	s2 := openHooked(t, zaptest.NewLogger(t), testOpts{LogDir: dir, Log: statelog.Options{FS: fsys}, Options: Options{RetryBackoff: time.Millisecond, MaxRetryBackoff: time.Millisecond}},
		func(s *Shard) { s.waits = waits })
	if err := s2.WaitLoaded(ctx); !errors.Is(err, statelog.ErrNotDurable) {
		t.Fatalf("load = %v, want ErrNotDurable", err)
	}
	// The shard's wait after the failed load, instead of a millisecond's backoff, never ends: no
	// load follows, and the one that failed made the only sync.
	if w := nextWait(t, waits); w >= 0 {
		t.Fatalf("the failed load is retried after %v", w)
	}
	if n := syncs.Load(); n != 1 {
		t.Fatalf("%d syncs of the loaded log, want 1: the load was retried", n)
	}
	if r := s2.ReadSummary(ctx, SummaryRequest{Key: testKey}); r.Code != kafkaerr.CoordinatorNotAvailable ||
		!strings.Contains(r.Message, "could not be made durable when it was loaded (input/output error); it waits for an operator") {
		t.Fatalf("summary of a failed partition: %+v", r)
	}
}

// A first load on a new data directory whose syncs fail twice (the first leaving a segment that
// holds only its header) is retried as any I/O failure: nothing was found to mistake for durable.
func TestNewLogSyncFailuresAreRetried(t *testing.T) {
	var syncs atomic.Int64
	fsys := faultfs.Wrap(vfs.OS(), faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpSync && filepath.Ext(op.Path) == ".seg" && syncs.Add(1) <= 2 {
			return syscall.EIO
		}
		return nil
	}))
	s := openReal(t, zaptest.NewLogger(t), testOpts{LogDir: t.TempDir(), Log: statelog.Options{FS: fsys}, Options: Options{RetryBackoff: time.Millisecond, MaxRetryBackoff: time.Millisecond}})
	waitState(t, s, Active)
	mustOK(t, s.Initialize(context.Background(), InitializeRequest{Key: testKey, StateEpoch: 1}))
}

// Answered operations are not kept reachable from the shard: a large request would otherwise stay
// in memory until a later commit of as many operations overwrote it.
func TestAnsweredOperationsAreReleased(t *testing.T) {
	s := openReal(t, zaptest.NewLogger(t), testOpts{LogDir: t.TempDir(), Options: Options{}})
	ctx := context.Background()
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	mustOK(t, s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 0, StateBatches: bs(sb(0, 9, 2, 1))}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i, o := range s.batch[:cap(s.batch)] {
		if o != nil {
			t.Fatalf("the shard still holds answered operation %d", i)
		}
	}
	for i, r := range s.records[:cap(s.records)] {
		if r != nil {
			t.Fatalf("the shard still holds the record slice %d of an append", i)
		}
	}
	if s.pend.len() != 0 || cap(s.pend.buf) > maxRetainedPending {
		t.Fatalf("the shard still holds %d pending records in a buffer of %d bytes", s.pend.len(), cap(s.pend.buf))
	}
	for i, k := range s.pend.keys[:cap(s.pend.keys)] {
		if k != "" {
			t.Fatalf("the shard still holds the key %d of the last commit's records", i)
		}
	}
}

// A commit of records larger than maxRetainedPending does not keep its buffer once answered.
func TestLargeCommitBufferIsReleased(t *testing.T) {
	s := openReal(t, zaptest.NewLogger(t), testOpts{LogDir: t.TempDir(), Options: Options{}})
	ctx := context.Background()
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	var many []StateBatch
	for i := range int64(100_000) {
		many = append(many, sb(2*i, 2*i, 2, 1))
	}
	mustOK(t, s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StateBatches: many}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if c := cap(s.pend.buf); c > maxRetainedPending {
		t.Fatalf("the shard keeps a %d-byte record buffer after a large commit", c)
	}
}

// A log holding a segment that a newer release wrote (its header checksum holds, its format
// version is unknown here: a downgrade) fails the load without a retry, since the same bytes
// would be read again, and tells clients why instead of calling the log damaged.
func TestNewerLogFormatIsNotRetried(t *testing.T) {
	dir := logOfOneKey(t)
	ctx := context.Background()
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v, %v; want one", segs, err)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint16(b[4:], 2) // the segment header's format version (statelog's format)
	binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	var listings atomic.Int64
	fsys := faultfs.Wrap(vfs.OS(), faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpReadDir && op.Path == dir {
			listings.Add(1)
		}
		return nil
	}))
	waits := make(chan time.Duration, 1)
	s2 := openHooked(t, zaptest.NewLogger(t), testOpts{LogDir: dir, Log: statelog.Options{FS: fsys}, Options: Options{RetryBackoff: time.Millisecond, MaxRetryBackoff: time.Millisecond}},
		func(s *Shard) { s.waits = waits })
	if err := s2.WaitLoaded(ctx); !errors.Is(err, statelog.ErrUnsupportedFormat) {
		t.Fatalf("load = %v, want ErrUnsupportedFormat", err)
	}
	n := listings.Load()
	// The shard's wait after the failed load, instead of a millisecond's backoff, never ends: no
	// load, and no listing of the log directory, follows the one that failed.
	if w := nextWait(t, waits); w >= 0 {
		t.Fatalf("the failed load is retried after %v", w)
	}
	if again := listings.Load(); again != n {
		t.Fatalf("the log directory was listed %d times after the failed load: the load was retried", again-n)
	}
	if r := s2.ReadSummary(ctx, SummaryRequest{Key: testKey}); r.Code != kafkaerr.CoordinatorNotAvailable ||
		!strings.Contains(r.Message, "holds data in a format this release does not read") {
		t.Fatalf("summary of a failed partition: %+v", r)
	}
}

// logOfOneKey makes a log that holds testKey, initialized, and was closed cleanly; it returns the
// log's directory.
func logOfOneKey(t *testing.T) (logDir string) {
	t.Helper()
	logDir = t.TempDir()
	ctx := context.Background()
	s := openReal(t, zaptest.NewLogger(t), testOpts{LogDir: logDir, Options: Options{}})
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return logDir
}

// A partition waiting to retry a failed load (an I/O error, a long backoff) when the sync group
// fails turns failed for good with the sync failure at once, not at its next retry.
func TestShardSyncGroupFailureCutsLoadBackoff(t *testing.T) {
	dataDir, fsys, g := newOSSyncGroup(t)
	dir1 := partitionLogDir(dataDir, 1)
	var breakLoad, breakSync atomic.Bool
	breakLoad.Store(true)
	fsys.SetInjector(faultfs.InjectorFunc(func(op faultfs.Op) error {
		switch {
		case breakLoad.Load() && op.Kind == faultfs.OpReadDir && op.Path == dir1:
			return syscall.EIO
		case op.Kind == faultfs.OpSyncFS && breakSync.CompareAndSwap(true, false):
			return syscall.EIO
		}
		return nil
	}))
	opts := func(p int) testOpts {
		return testOpts{LogDir: partitionLogDir(dataDir, p), Log: statelog.Options{FS: fsys, SyncGroup: g}, Options: Options{Partition: p, RetryBackoff: time.Hour, MaxRetryBackoff: time.Hour}}
	}
	a := openReal(t, zaptest.NewLogger(t), opts(0))
	b := openReal(t, zaptest.NewLogger(t), opts(1))
	ctx := context.Background()
	if err := a.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitLoaded(ctx); !errors.Is(err, syscall.EIO) {
		t.Fatalf("partition 1 loaded with %v, want EIO", err)
	}
	breakLoad.Store(false)
	breakSync.Store(true)
	if r := a.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}); r.Code != kafkaerr.CoordinatorNotAvailable {
		t.Fatalf("initialize whose sync failed: %+v", r)
	}
	waitStatus(t, b, "partition 1 failed with the sync failure", func(st Status) bool {
		return st.State == Failed && errors.Is(st.Err, statelog.ErrSyncFailed)
	})
}

// discardJournal is a statelog.Journal that takes every frame as durable and keeps none.
type discardJournal struct{}

func (discardJournal) Attach(*statelog.Log) error { return nil }
func (discardJournal) Write([]byte) error         { return nil }
func (discardJournal) Checkpointed() int64        { return 0 }

// A journaled log that cannot write out the writes it acknowledged is not loaded again: the
// reload would serve the log without them, which only the journal's recovery at the next start
// appends again. The partition stays failed, saying the server must be restarted.
func TestUnwrittenJournaledWritesAreNotReloaded(t *testing.T) {
	ctx := context.Background()
	var failing atomic.Bool
	fsys := faultfs.Wrap(vfs.OS(), faultfs.InjectorFunc(func(op faultfs.Op) error {
		if failing.Load() && op.Kind == faultfs.OpWrite && filepath.Ext(op.Path) == ".seg" {
			return syscall.EIO
		}
		return nil
	}))
	waits := make(chan time.Duration, 1)
	s := openHooked(t, zaptest.NewLogger(t), testOpts{LogDir: t.TempDir(), Log: statelog.Options{FS: fsys, Journal: discardJournal{}},
		Options: Options{RetryBackoff: time.Millisecond, MaxRetryBackoff: time.Millisecond}},
		func(s *Shard) { s.waits = waits })
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	failing.Store(true)
	acked := 0
	for {
		r := s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: int64(acked + 1)})
		if r.Code != kafkaerr.None {
			if r.Code != kafkaerr.CoordinatorNotAvailable {
				t.Fatalf("write whose log could not write out its tail: %+v", r)
			}
			break
		}
		if acked++; acked > 100_000 {
			t.Fatal("writes went on with every segment write failing")
		}
	}
	waitState(t, s, Failed)
	if w := nextWait(t, waits); w >= 0 {
		t.Fatalf("the failed partition is loaded again after %v", w)
	}
	if r := s.ReadSummary(ctx, SummaryRequest{Key: testKey}); r.Code != kafkaerr.CoordinatorNotAvailable ||
		!strings.Contains(r.Message, "could not write out acknowledged writes (input/output error); the server must be restarted") {
		t.Fatalf("summary of the failed partition: %+v", r)
	}
}
