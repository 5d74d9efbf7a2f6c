package shard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
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

// coldAnswer is what a SnapshotColdPartitions call returned.
type coldAnswer struct {
	n   int
	err error
}

// afterAppendLog holds the shard after an Append that succeeded, before it returns: the shard is
// then between two commits, everything it appended durable.
type afterAppendLog struct {
	Log
	mu   sync.Mutex
	gate chan struct{} // when set, a successful Append waits for it to be closed
	held chan struct{} // receives as such an Append starts waiting
}

// wrapOpener opens its LocalLog and hands what it opened to wrap.
type wrapOpener struct {
	*LocalLog
	wrap func(Log) Log
}

func (o wrapOpener) Open(fn func(int64, []byte) error) (Log, error) {
	l, err := o.LocalLog.Open(fn)
	if err != nil {
		return nil, err
	}
	return o.wrap(l), nil
}

func (l *afterAppendLog) Append(records [][]byte) (int64, error) {
	first, err := l.Log.Append(records)
	l.mu.Lock()
	gate, held := l.gate, l.held
	l.mu.Unlock()
	if err == nil && gate != nil {
		held <- struct{}{}
		<-gate
	}
	return first, err
}

// A failed file-system sync of the sync group (another partition's) finds a partition between two
// chunks of a cold-snapshot job, with a write queued: it fails at once, as an idle one does,
// without another append or a reload, and the job's call and the write are told that the
// partition failed.
func TestShardSyncGroupFailsBetweenColdChunks(t *testing.T) {
	dataDir, fsys, g := newOSSyncGroup(t)
	metrics := NewMetrics(prometheus.NewRegistry(), 10)
	clock := newFakeClock()
	opts := func(p int) testOpts {
		return testOpts{LogDir: partitionLogDir(dataDir, p), Log: statelog.Options{FS: fsys, SyncGroup: g}, Options: Options{Partition: p, Now: clock.Now, MaxBatchRecords: 1, Metrics: metrics, RetryBackoff: time.Millisecond, MaxRetryBackoff: time.Millisecond}}
	}
	a := openReal(t, zaptest.NewLogger(t), opts(0))
	bl := &afterAppendLog{}
	bopts := opts(1)
	b := start(zaptest.NewLogger(t), newLimits(500), bopts.Options, wrapOpener{bopts.localLog(zaptest.NewLogger(t)), func(l Log) Log {
		bl.Log = l
		return bl
	}}, hookQueue)
	t.Cleanup(func() { _ = b.Close() })
	ctx := context.Background()
	for _, s := range []*Shard{a, b} {
		if err := s.WaitLoaded(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mustOK(t, a.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	for i := 0; i < 3; i++ {
		mustOK(t, b.Initialize(ctx, InitializeRequest{Key: key(i), StateEpoch: 1}))
	}
	clock.advance(time.Second)
	gate, held := make(chan struct{}), make(chan struct{}, 1)
	bl.mu.Lock()
	bl.gate, bl.held = gate, held
	bl.mu.Unlock()
	cold := make(chan coldAnswer, 1)
	go func() { n, err := b.SnapshotColdPartitions(ctx); cold <- coldAnswer{n, err} }()
	<-held // the job's first chunk is durable; two chunks to go
	fsys.SetInjector(failNth(1, faultfs.OnKinds(faultfs.OpSyncFS), syscall.EIO))
	if r := a.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 5}); r.Code != kafkaerr.CoordinatorNotAvailable {
		t.Fatalf("write whose sync failed: %+v", r)
	}
	fsys.SetInjector(nil)
	<-g.Failed()
	wrote := make(chan Result, 1)
	go func() { wrote <- b.Write(ctx, WriteRequest{Key: key(0), StateEpoch: 1, StartOffset: 5}) }()
	waitQueued(t, b, 1)
	bl.mu.Lock()
	bl.gate, bl.held = nil, nil
	bl.mu.Unlock()
	close(gate)
	c := <-cold
	if c.err == nil || !strings.Contains(c.err.Error(), "file-system sync") {
		t.Fatalf("cold call: %d, %v; want the sync failure", c.n, c.err)
	}
	if r := <-wrote; r.Code != kafkaerr.CoordinatorNotAvailable || !strings.Contains(r.Message, "file-system sync") {
		t.Fatalf("write queued when the sync group failed: %+v, want the sync failure", r)
	}
	waitState(t, b, Failed)
	if err := b.WaitLoaded(ctx); !errors.Is(err, statelog.ErrSyncFailed) {
		t.Fatalf("%v, want ErrSyncFailed", err)
	}
	if n := metricValue(t, b.metrics.reloads); n != 0 {
		t.Fatalf("partition 1 reloaded %v times; it had nothing unsynced to cut", n)
	}
	if st := b.Stats(); st.Commits != 4 {
		t.Fatalf("partition 1 made %d commits, want its 3 initializes and the job's first chunk", st.Commits)
	}
}

// Concurrent random operations, on-demand and timer-driven cold-snapshot jobs committed a couple
// of records at a time, and prunes between their chunks, for each linger setting: no call hangs,
// and the state the log holds after a restart (from the pruned log) is the live state.
func TestShardColdJobChunksStress(t *testing.T) {
	for _, linger := range []int{-1, 0, 2} {
		t.Run(fmt.Sprintf("linger=%d", linger), func(t *testing.T) {
			clock := newFakeClock()
			ts := newTestShard(t, testOpts{Log: statelog.Options{SegmentBytes: 1024}, Options: Options{Now: clock.Now, MaxBatchRecords: 2, AppendLingerMs: linger, WriteTimeout: time.Minute, ColdSnapshotInterval: time.Millisecond, PruneInterval: time.Millisecond}})
			ts.provider = newLimits(3)
			s := ts.active(nil)
			ctx := context.Background()
			stop := make(chan struct{})
			var hung atomic.Int64
			check := func(r Result) {
				if strings.Contains(r.Message, "write timeout") {
					hung.Add(1)
				}
			}
			var wg, writers sync.WaitGroup
			for w := range 4 {
				writers.Go(func() {
					ro := newRandomOps(uint64(w)+uint64(linger+1)*100, 24)
					for i := 0; i < 400; i++ {
						ro.step(
							func(r InitializeRequest) { check(s.Initialize(ctx, r)) },
							func(r WriteRequest) { check(s.Write(ctx, r)) },
							func(k Key, le int32) { check(s.Read(ctx, ReadRequest{Key: k, LeaderEpoch: le}).Result) },
							func(k Key) { check(s.Delete(ctx, DeleteRequest{Key: k})) },
							func() {
								if _, err := s.SnapshotColdPartitions(ctx); err != nil {
									t.Error(err)
								}
							},
							func() {
								if _, err := s.Prune(ctx); err != nil {
									t.Error(err)
								}
							},
						)
					}
				})
			}
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(200 * time.Microsecond): // not a wait: the pace at which keys turn cold
						clock.advance(time.Second)
					}
				}
			})
			wg.Go(func() {
				r := rand.New(rand.NewPCG(7, 7))
				for {
					select {
					case <-stop:
						return
					default:
					}
					if r.IntN(2) == 0 {
						if _, err := s.SnapshotColdPartitions(ctx); err != nil {
							t.Error(err)
						}
					} else if _, err := s.Prune(ctx); err != nil {
						t.Error(err)
					}
				}
			})
			writers.Wait()
			close(stop)
			wg.Wait()
			if n := hung.Load(); n > 0 {
				t.Fatalf("%d calls timed out", n)
			}
			st := s.Stats()
			t.Logf("keys %d, log %d..%d, commits %d, snapshots %d, updates %d, tombstones %d",
				st.Keys, st.LogStartOffset, st.LogEndOffset, st.Commits, st.Records.Snapshots, st.Records.Updates, st.Records.Tombstones)
			assertSameOffsets(t, reloaded(t, ts, s), s.m)
		})
	}
}

// assertSameOffsets compares the share-partition state (ShareGroupOffset) of every key; the
// epochs maps and update counts can differ after pruning dropped the records they came from.
func assertSameOffsets(t testing.TB, got, want *machine) {
	t.Helper()
	g, _, _ := got.dump()
	w, _, _ := want.dump()
	for k, wv := range w {
		gv, ok := g[k]
		if !ok {
			t.Fatalf("key %v lost on restart; live %+v", k, wv.Offset)
		}
		if !reflect.DeepEqual(gv.Offset, wv.Offset) {
			t.Fatalf("key %v after restart %+v, live %+v", k, gv.Offset, wv.Offset)
		}
	}
	if len(g) != len(w) {
		t.Fatalf("key sets differ: %d after restart, %d live", len(g), len(w))
	}
}

// stepAppends makes every Append of g wait for a value on step; held receives as each starts
// waiting. The shard goroutine is blocked in that Append until the test sends on step.
func stepAppends(g *gatedLog) (step, held chan struct{}) {
	step, held = make(chan struct{}), make(chan struct{}, 64)
	g.mu.Lock()
	g.appendGate, g.appendHeld = step, held
	g.mu.Unlock()
	return step, held
}

func unstep(g *gatedLog, step chan struct{}) {
	g.mu.Lock()
	g.appendGate, g.appendHeld = nil, nil
	g.mu.Unlock()
	close(step)
}

// An append that fails in the middle of a cold-snapshot job answers the job's call and a call
// waiting for the next job with the failure (once: no double close), the shard reloads and
// serves, and the log holds the live state.
func TestShardColdJobAppendFailsMidJob(t *testing.T) {
	clock := newFakeClock()
	fs := faultfs.Wrap(vfs.OS(), nil)
	ts := newTestShard(t, testOpts{Log: statelog.Options{FS: fs}, Options: Options{Now: clock.Now, MaxBatchRecords: 1}})
	core, logs := observer.New(zapcore.InfoLevel)
	ts.logger = zap.New(zapcore.NewTee(core, ts.logger.Core()))
	s := ts.active(nil)
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		mustOK(t, s.Initialize(ctx, InitializeRequest{Key: key(i), StateEpoch: 1, StartOffset: 0}))
	}
	clock.advance(time.Second)
	g := ts.log()
	step, held := stepAppends(g)
	c1, c2 := make(chan coldAnswer, 1), make(chan coldAnswer, 1)
	wrote := make(chan Result, 1)
	go func() { n, err := s.SnapshotColdPartitions(ctx); c1 <- coldAnswer{n, err} }()
	<-held // the job's first chunk
	go func() {
		wrote <- s.Write(ctx, WriteRequest{Key: key(3), StateEpoch: 1, StartOffset: 2, StateBatches: bs(sb(2, 5, 2, 1))})
	}()
	go func() { n, err := s.SnapshotColdPartitions(ctx); c2 <- coldAnswer{n, err} }()
	waitQueued(t, s, 2)
	step <- struct{}{}
	for {
		<-held
		if len(s.ops) == 0 && len(s.cold.next) == 1 && s.cold.job != nil {
			break
		}
		step <- struct{}{}
	}
	fs.SetInjector(faultfs.Match(faultfs.OnKinds(faultfs.OpWrite), syscall.EIO))
	unstep(g, step)
	a1, a2 := <-c1, <-c2
	if a1.err == nil || a2.err == nil {
		t.Fatalf("answers %+v and %+v, want both failed", a1, a2)
	}
	if logs.FilterMessageSnippet("cold-partition snapshots written by a job that did not finish").Len() != 1 {
		t.Fatalf("the stopped job's partial work is not logged once:\n%v", logs.All())
	}
	fs.SetInjector(nil)
	waitState(t, s, Active)
	w := <-wrote
	t.Logf("write: %+v; calls: %v / %v", w, a1.err, a2.err)
	if n, err := s.SnapshotColdPartitions(ctx); err != nil {
		t.Fatalf("cold job after the reload: %d, %v", n, err)
	}
	assertSameMachine(t, reloaded(t, ts, s), s.m)
}

// Close during a timer-driven cold-snapshot job that a call waits behind (for a job of its own)
// finishes the timer's job and the call's, answers the call and closes.
func TestShardCloseDuringTimerColdJobWithCallWaiting(t *testing.T) {
	clock := newFakeClock()
	ts := newTestShard(t, testOpts{Options: Options{Now: clock.Now, MaxBatchRecords: 1, ColdSnapshotInterval: 20 * time.Millisecond}})
	s := ts.active(nil)
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		mustOK(t, s.Initialize(ctx, InitializeRequest{Key: key(i), StateEpoch: 1, StartOffset: 0}))
	}
	g := ts.log()
	step, held := stepAppends(g)
	clock.advance(time.Second)
	<-held // the timer's job, first chunk
	c := make(chan coldAnswer, 1)
	go func() { n, err := s.SnapshotColdPartitions(ctx); c <- coldAnswer{n, err} }()
	waitQueued(t, s, 1)
	step <- struct{}{}
	<-held
	if len(s.cold.next) != 1 || !s.cold.byTimer {
		t.Fatalf("coldNext %d, byTimer %v", len(s.cold.next), s.cold.byTimer)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	<-s.drain
	unstep(g, step)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs")
	}
	a := <-c
	if a.err != nil {
		t.Fatalf("call: %+v", a)
	}
	if st := ts.active(nil).Stats(); st.LogEndOffset != 8 {
		t.Fatalf("log end %d, want the 4 keys and the timer job's 4 snapshots", st.LogEndOffset)
	}
}

// Random operations applied between the steps of cold-snapshot jobs: replaying the whole log
// gives the live machine, and replaying it from the last redundant offset (a pruned log) gives
// every live key's state.
func TestMachineColdStepsProperty(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		h := newHarness(t, 1+int(seed%5))
		ro := newRandomOps(seed, 8)
		var j *coldJob
		for i := 0; i < 500; i++ {
			if j != nil && ro.r.IntN(3) == 0 {
				h.begin()
				if h.m.coldStep(j, &h.p, 1+ro.r.IntN(2), 1<<20) {
					j = nil
				}
				h.end()
			}
			ro.step(
				func(r InitializeRequest) { h.initialize(r) },
				func(r WriteRequest) { h.write(r) },
				func(k Key, le int32) { h.read(k, le) },
				func(k Key) { h.delete(k) },
				func() {
					if j == nil {
						j = h.m.startCold()
					}
				},
				func() { h.clock.advance(time.Duration(1+ro.r.IntN(12)) * time.Second) },
			)
			lro, ok := h.m.offsets.lastRedundant()
			if !ok || i%20 != 0 {
				continue
			}
			m := newMachine(zap.NewNop(), h.limits, h.clock.Now, 10*time.Second, 8<<20)
			for off := lro; off < int64(len(h.log)); off++ {
				if err := m.replayRaw(off, h.log[off]); err != nil {
					t.Fatal(err)
				}
			}
			g, _, _ := m.dump()
			w, _, _ := h.m.dump()
			for k, wv := range w {
				if gv, found := g[k]; !found || !reflect.DeepEqual(gv.Offset, wv.Offset) {
					t.Fatalf("seed %d step %d: key %v from offset %d: %+v, live %+v", seed, i, k, lro, gv.Offset, wv.Offset)
				}
			}
			for k := range g {
				if _, found := w[k]; !found {
					t.Fatalf("seed %d step %d: deleted key %v is back when replayed from offset %d", seed, i, k, lro)
				}
			}
		}
		assertSameMachine(t, h.reopened(), h.m)
	}
}
