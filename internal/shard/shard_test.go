package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/record"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

// gatedLog wraps a real log so tests can hold appends or loads and count appends.
type gatedLog struct {
	Log
	mu         sync.Mutex
	appendGate chan struct{} // when set, Append waits for it to be closed
	replayGate chan struct{} // when set, the load that opens the log waits for it to be closed
	appendHeld chan struct{} // receives when an Append starts waiting at the gate
}

func (g *gatedLog) Append(records [][]byte) (int64, error) {
	g.mu.Lock()
	gate, held := g.appendGate, g.appendHeld
	g.mu.Unlock()
	if gate != nil {
		if held != nil {
			held <- struct{}{}
		}
		<-gate
	}
	return g.Log.Append(records)
}

// holdAppends makes every Append wait until release is called; held, when not nil, receives as
// each Append starts waiting.
func (g *gatedLog) holdAppends(held chan struct{}) (release func()) {
	gate := make(chan struct{})
	g.mu.Lock()
	g.appendGate, g.appendHeld = gate, held
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.appendGate, g.appendHeld = nil, nil
		g.mu.Unlock()
		close(gate)
	}
}

// replay reads the records of the log from offset from.
func (g *gatedLog) replay(from int64, fn func(int64, []byte) error) error {
	return g.Log.(*localLog).l.Replay(from, fn)
}

// testShard opens shards on one directory; gl is the gated wrapper of the latest log opened.
type testShard struct {
	t        *testing.T
	opts     testOpts
	provider Provider
	mu       sync.Mutex
	gl       *gatedLog
	newGate  func(*gatedLog) // configures each new gated log
	logger   *zap.Logger
}

func newTestShard(t *testing.T, opts testOpts) *testShard {
	if opts.LogDir == "" {
		opts.LogDir = t.TempDir()
	}
	if opts.Now == nil {
		opts.Now = newFakeClock().Now
	}
	return &testShard{t: t, opts: opts, provider: newLimits(500), logger: zaptest.NewLogger(t)}
}

// open starts a shard on the testShard's log, with the queue hook that waitQueued needs and
// prepare (when not nil) run before the shard goroutine starts.
func (ts *testShard) open(prepare func(*Shard)) *Shard {
	return start(ts.logger, ts.provider, ts.opts.Options, &gatedOpener{LocalLog: ts.opts.localLog(ts.logger), ts: ts}, func(s *Shard) {
		hookQueue(s)
		if prepare != nil {
			prepare(s)
		}
	})
}

// gatedOpener opens the testShard's log wrapped in a gatedLog configured by newGate.
type gatedOpener struct {
	*LocalLog
	ts *testShard
}

func (o *gatedOpener) Open(fn func(int64, []byte) error) (Log, error) {
	g := &gatedLog{}
	o.ts.mu.Lock()
	if o.ts.newGate != nil {
		o.ts.newGate(g)
	}
	o.ts.mu.Unlock()
	if g.replayGate != nil {
		<-g.replayGate
	}
	l, err := o.LocalLog.Open(fn)
	if err != nil {
		return nil, err
	}
	g.Log = l
	o.ts.mu.Lock()
	o.ts.gl = g
	o.ts.mu.Unlock()
	return g, nil
}

// active opens a shard, waits for it to load and closes it at the end of the test.
func (ts *testShard) active(prepare func(*Shard)) *Shard {
	ts.t.Helper()
	s := ts.open(prepare)
	ts.t.Cleanup(func() { _ = s.Close() })
	if err := s.WaitLoaded(context.Background()); err != nil {
		ts.t.Fatal(err)
	}
	return s
}

func (ts *testShard) log() *gatedLog {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.gl
}

func key(i int) Key {
	return Key{GroupID: "g" + strconv.Itoa(i%3), TopicID: testTopic, Partition: int32(i)}
}

func mustOK(t testing.TB, r Result) {
	t.Helper()
	if r.Code != kafkaerr.None {
		t.Fatalf("result %v: %s", r.Code, r.Message)
	}
}

// hookQueue sets the hook that signals each operation entering s's queue; waitQueued needs it. It
// is a prepare function for start.
func hookQueue(s *Shard) { s.queued = make(chan struct{}, 1) }

// waitQueued waits until n operations wait in the shard's queue (the shard goroutine must be held
// meanwhile, so that none leaves it), checking the queue again after each signal of the queue hook.
func waitQueued(t *testing.T, s *Shard, n int) {
	t.Helper()
	if s.queued == nil {
		t.Fatal("waitQueued: the shard has no queue hook (hookQueue)")
	}
	deadline := time.After(10 * time.Second)
	for len(s.ops) < n {
		select {
		case <-s.queued:
		case <-deadline:
			t.Fatalf("only %d of %d operations queued", len(s.ops), n)
		}
	}
}

func TestShardServesAndReloads(t *testing.T) {
	ts := newTestShard(t, testOpts{Options: Options{Partition: 3}})
	s := ts.open(nil)
	ctx := context.Background()
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); st.State != Active || st.LoadDuration <= 0 {
		t.Fatalf("status %+v", st)
	}
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1, StartOffset: 0}))
	mustOK(t, s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, LeaderEpoch: 0, StartOffset: 5, DeliveryCompleteCount: 2, StateBatches: bs(sb(5, 9, 2, 1))}))
	rr := s.Read(ctx, ReadRequest{Key: testKey, LeaderEpoch: 4})
	if rr.Code != kafkaerr.None || rr.StartOffset != 5 || len(rr.StateBatches) != 1 {
		t.Fatalf("read %+v", rr)
	}
	if got := s.ReadSummary(ctx, SummaryRequest{Key: testKey}); got.LeaderEpoch != 4 || got.DeliveryCompleteCount != 2 {
		t.Fatalf("summary %+v", got)
	}
	if st := s.Stats(); st.Keys != 1 || st.LogEndOffset != 3 || st.Records.Snapshots != 1 || st.Records.Updates != 2 || st.Bytes.Updates == 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal("second close:", err)
	}
	if r := s.Write(ctx, WriteRequest{Key: testKey}); r.Code != kafkaerr.CoordinatorNotAvailable || !strings.Contains(r.Message, "closed") {
		t.Fatalf("write after close: %+v", r)
	}
	want := s.m

	s2 := ts.active(nil)
	if got := s2.Read(ctx, ReadRequest{Key: testKey, LeaderEpoch: 4}); got.StartOffset != 5 || got.StateEpoch != 1 {
		t.Fatalf("after reopen: %+v", got)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	assertSameMachine(t, s2.m, want)
}

func TestShardLoadingAnswersLoadInProgress(t *testing.T) {
	ts := newTestShard(t, testOpts{})
	gate := make(chan struct{})
	ts.newGate = func(g *gatedLog) { g.replayGate = gate }
	s := ts.open(nil)
	defer s.Close()
	ctx := context.Background()
	if r := s.Write(ctx, WriteRequest{Key: testKey}); r.Code != kafkaerr.CoordinatorLoadInProgress || r.Message != kafkaerr.CoordinatorLoadInProgress.DefaultMessage() {
		t.Fatalf("write while loading: %+v", r)
	}
	if _, err := s.Prune(ctx); !errors.Is(err, ErrLoading) {
		t.Fatalf("prune while loading: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := s.WaitLoaded(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitLoaded: %v", err)
	}
	close(gate)
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
}

func TestShardCloseWhileLoading(t *testing.T) {
	ts := newTestShard(t, testOpts{})
	gate := make(chan struct{})
	ts.newGate = func(g *gatedLog) { g.replayGate = gate }
	s := ts.open(nil)
	done := make(chan error)
	go func() { done <- s.Close() }()
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := s.WaitLoaded(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitLoaded after close: %v", err)
	}
}

// Group commit: operations queued behind a commit in flight share the next append (one fsync).
func TestShardGroupCommit(t *testing.T) {
	tests := []struct {
		name        string
		linger      int
		maxRecords  int
		n           int
		wantCommits int64
	}{
		{"adaptive drains the queue", -1, 0, 64, 2},
		{"linger 0 commits each operation", 0, 0, 16, 16},
		{"linger waits for more until the batch is full", 60_000, 8, 8, 1},
		{"batch record cap", -1, 4, 10, 1 + 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			ts := newTestShard(t, testOpts{Options: Options{MaxBatchRecords: tt.maxRecords}})
			s := ts.active(nil)
			ctx := context.Background()
			for i := 0; i < tt.n; i++ {
				mustOK(t, s.Initialize(ctx, InitializeRequest{Key: key(i), StateEpoch: 1}))
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			ts.opts.AppendLingerMs, ts.opts.Metrics = tt.linger, NewMetrics(reg, 10)
			s = ts.active(nil)
			base := s.Stats().Commits
			held := make(chan struct{}, tt.n)
			release := ts.log().holdAppends(held)

			var wg sync.WaitGroup
			results := make([]Result, tt.n)
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[0] = s.Write(ctx, WriteRequest{Key: key(0), StateEpoch: 1, StartOffset: 1})
			}()
			if tt.linger == 0 || tt.linger == -1 {
				<-held // the first write's commit is in flight
			}
			for i := 1; i < tt.n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					results[i] = s.Write(ctx, WriteRequest{Key: key(i), StateEpoch: 1, StartOffset: 1})
				}(i)
			}
			if tt.linger > 0 {
				// With a long linger the batch fills up without any append yet.
				<-held
			} else {
				waitQueued(t, s, tt.n-1)
			}
			release()
			wg.Wait()
			for i, r := range results {
				if r.Code != kafkaerr.None {
					t.Fatalf("write %d: %+v", i, r)
				}
			}
			if got := s.Stats().Commits - base; got != tt.wantCommits {
				t.Fatalf("commits = %d, want %d", got, tt.wantCommits)
			}
			// The histogram saw every commit, including the initializes.
			if got := seriesCount(t, reg, "sharecoord_commit_batch_records"); got != 1 {
				t.Fatalf("histogram series %d", got)
			}
		})
	}
}

// Writes started from one goroutine are queued before any is answered: with the first one's
// commit held, the others queue behind it and share the next commit, and none is answered
// before its append returned.
func TestShardStartedWritesShareACommit(t *testing.T) {
	ts := newTestShard(t, testOpts{Options: Options{AppendLingerMs: -1}}) // a commit takes what is queued
	s := ts.active(nil)
	ctx := context.Background()
	const n = 8
	for i := range n {
		mustOK(t, s.Initialize(ctx, InitializeRequest{Key: key(i), StateEpoch: 1}))
	}
	base := s.Stats().Commits
	held := make(chan struct{}, n)
	release := ts.log().holdAppends(held)
	first := s.StartWrite(ctx, WriteRequest{Key: key(0), StateEpoch: 1, StartOffset: 1})
	<-held // the first write's commit is in flight
	pending := []*Pending{first}
	for i := 1; i < n; i++ {
		pending = append(pending, s.StartWrite(ctx, WriteRequest{Key: key(i), StateEpoch: 1, StartOffset: 1}))
	}
	waitQueued(t, s, n-1)
	answered := make(chan Result, 1)
	go func() { answered <- first.Wait() }()
	select {
	case r := <-answered:
		t.Fatalf("answered before its append returned: %+v", r)
	case <-time.After(20 * time.Millisecond):
	}
	release()
	if r := <-answered; r.Code != kafkaerr.None {
		t.Fatalf("write 0: %+v", r)
	}
	for i, p := range pending[1:] {
		mustOK(t, p.Wait())
		if got := s.ReadSummary(ctx, SummaryRequest{Key: key(i + 1)}); got.StartOffset != 1 {
			t.Fatalf("write %d not applied: %+v", i+1, got)
		}
	}
	if got := s.Stats().Commits - base; got != 2 {
		t.Fatalf("commits = %d, want 2 (the held one, then the seven queued behind it)", got)
	}
	if r := Answered(Result{Code: kafkaerr.InvalidRequest}).Wait(); r.Code != kafkaerr.InvalidRequest {
		t.Fatalf("Answered(...).Wait() = %+v", r)
	}
}

// StartWrite does not wait for room in a full queue: the write is queued by a goroutine of its
// own, so the caller goes on to its other keys, and is answered once it was committed.
func TestShardStartWriteDoesNotWaitForAFullQueue(t *testing.T) {
	ts := newTestShard(t, testOpts{Options: Options{QueueSize: 1, AppendLingerMs: -1}})
	s := ts.active(nil)
	ctx := context.Background()
	for i := range 3 {
		mustOK(t, s.Initialize(ctx, InitializeRequest{Key: key(i), StateEpoch: 1}))
	}
	held := make(chan struct{}, 3)
	release := ts.log().holdAppends(held)
	first := s.StartWrite(ctx, WriteRequest{Key: key(0), StateEpoch: 1, StartOffset: 1})
	<-held // the shard is in the first commit
	second := s.StartWrite(ctx, WriteRequest{Key: key(1), StateEpoch: 1, StartOffset: 1})
	waitQueued(t, s, 1) // the queue of one is full
	started := make(chan *Pending, 1)
	go func() { started <- s.StartWrite(ctx, WriteRequest{Key: key(2), StateEpoch: 1, StartOffset: 1}) }()
	var third *Pending
	select {
	case third = <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("StartWrite waited for room in the full queue")
	}
	if third.queuing == nil {
		t.Fatal("the third write was queued at once, into a full queue")
	}
	release()
	for i, p := range []*Pending{first, second, third} {
		mustOK(t, p.Wait())
		if got := s.ReadSummary(ctx, SummaryRequest{Key: key(i)}); got.StartOffset != 1 {
			t.Fatalf("write %d not applied: %+v", i, got)
		}
	}
}

// Reads and summaries are answered only after earlier writes are durable.
func TestShardReadWaitsForEarlierWrites(t *testing.T) {
	ts := newTestShard(t, testOpts{})
	s := ts.active(nil)
	ctx := context.Background()
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	held := make(chan struct{}, 1)
	release := ts.log().holdAppends(held)
	writeDone := make(chan Result, 1)
	go func() { writeDone <- s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 9}) }()
	<-held
	readDone := make(chan SummaryResult, 1)
	go func() { readDone <- s.ReadSummary(ctx, SummaryRequest{Key: testKey}) }()
	waitQueued(t, s, 1)
	select {
	case r := <-readDone:
		t.Fatalf("summary answered before the earlier write was durable: %+v", r)
	default:
	}
	release()
	mustOK(t, <-writeDone)
	if r := <-readDone; r.StartOffset != 9 {
		t.Fatalf("summary %+v", r)
	}
}

// A read with Take hands the key's batches to it instead of copying them into the result; one
// that Take refuses is answered with Take's result and raises no leader epoch.
func TestShardReadTake(t *testing.T) {
	ts := newTestShard(t, testOpts{})
	s := ts.active(nil)
	ctx := context.Background()
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	want := bs(sb(0, 4, 2, 1), sb(5, 9, 0, 1))
	mustOK(t, s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, LeaderEpoch: 1, StateBatches: want}))

	before := s.ReadSummary(ctx, SummaryRequest{Key: testKey}).LeaderEpoch
	busy := Result{Code: kafkaerr.CoordinatorNotAvailable, Message: "no room"}
	calls := 0
	r := s.Read(ctx, ReadRequest{Key: testKey, LeaderEpoch: 5, Take: func(b []StateBatch) *Result {
		calls++
		if !slices.Equal(b, want) {
			t.Errorf("Take got %v, want %v", b, want)
		}
		return &busy
	}})
	if r.Result != busy || calls != 1 {
		t.Fatalf("refused read: %+v after %d calls, want %+v after 1", r, calls, busy)
	}
	if sum := s.ReadSummary(ctx, SummaryRequest{Key: testKey}); sum.LeaderEpoch != before {
		t.Fatalf("leader epoch %d after a refused read, want %d (unchanged)", sum.LeaderEpoch, before)
	}

	var got []StateBatch
	r = s.Read(ctx, ReadRequest{Key: testKey, LeaderEpoch: 5, Take: func(b []StateBatch) *Result {
		got = slices.Clone(b)
		return nil
	}})
	mustOK(t, r.Result)
	if r.StateBatches != nil || !slices.Equal(got, want) || r.StateEpoch != 1 {
		t.Fatalf("read %+v, Take got %v: want no copy in the result and %v given to Take", r, got, want)
	}
	if sum := s.ReadSummary(ctx, SummaryRequest{Key: testKey}); sum.LeaderEpoch != 5 {
		t.Fatalf("leader epoch %d after an accepted read, want 5", sum.LeaderEpoch)
	}
}

// An operation whose commit is not done within WriteTimeout answers COORDINATOR_NOT_AVAILABLE;
// its record stays applied (as in Kafka's coordinator runtime).
func TestShardWriteTimeout(t *testing.T) {
	ts := newTestShard(t, testOpts{Options: Options{WriteTimeout: 30 * time.Millisecond}})
	s := ts.active(nil)
	ctx := context.Background()
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	release := ts.log().holdAppends(nil)
	r := s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 7})
	if r.Code != kafkaerr.CoordinatorNotAvailable || !strings.Contains(r.Message, "write timeout") || !strings.Contains(r.Message, "may still be applied") {
		t.Fatalf("timed-out write: %+v", r)
	}
	release()
	if got := s.ReadSummary(ctx, SummaryRequest{Key: testKey}); got.StartOffset != 7 {
		t.Fatalf("the timed-out write should stay applied: %+v", got)
	}
}

func TestShardContextCancelledBeforeApply(t *testing.T) {
	ts := newTestShard(t, testOpts{})
	s := ts.active(nil)
	ctx := context.Background()
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	held := make(chan struct{}, 1)
	release := ts.log().holdAppends(held)
	first := make(chan Result, 1)
	go func() { first <- s.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 1}) }()
	<-held
	cctx, cancel := context.WithCancel(ctx)
	second := make(chan Result, 1)
	go func() { second <- s.Write(cctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 50}) }()
	waitQueued(t, s, 1)
	cancel()
	r := <-second
	if r.Code != kafkaerr.CoordinatorNotAvailable || !strings.Contains(r.Message, "not applied") {
		t.Fatalf("cancelled write: %+v", r)
	}
	release()
	mustOK(t, <-first)
	if got := s.ReadSummary(ctx, SummaryRequest{Key: testKey}); got.StartOffset != 1 {
		t.Fatalf("a cancelled write was applied: %+v", got)
	}
	if r := s.Write(cctx, WriteRequest{Key: testKey}); r.Code != kafkaerr.CoordinatorNotAvailable {
		t.Fatalf("write with a done context: %+v", r)
	}
}

// Close finishes and commits every accepted operation, answers them, then closes the log.
func TestShardCloseWithOperationsInFlight(t *testing.T) {
	ts := newTestShard(t, testOpts{})
	s := ts.open(nil)
	ctx := context.Background()
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 32
	for i := 0; i < n; i++ {
		mustOK(t, s.Initialize(ctx, InitializeRequest{Key: key(i), StateEpoch: 1}))
	}
	held := make(chan struct{}, n)
	release := ts.log().holdAppends(held)
	results := make([]Result, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = s.Write(ctx, WriteRequest{Key: key(i), StateEpoch: 1, StartOffset: 100})
		}(i)
	}
	<-held
	waitQueued(t, s, n-1)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// Close has stopped accepting and told the shard goroutine to drain once s.drain is closed;
	// all it has left to do is wait for the goroutine, which cannot finish while the held append
	// is in flight.
	select {
	case <-s.drain:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not start draining")
	}
	// Not a wait for an event: the window in which a Close that did not wait for the held commit
	// would return. Nothing signals that it keeps waiting.
	select {
	case err := <-closed:
		t.Fatalf("Close returned before committing: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	wg.Wait()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		mustOK(t, r)
	}
	s2 := ts.active(nil)
	for i := 0; i < n; i++ {
		if got := s2.ReadSummary(ctx, SummaryRequest{Key: key(i)}); got.StartOffset != 100 {
			t.Fatalf("key %d after reopen: %+v", i, got)
		}
	}
}

func TestShardTimersPruneAndColdSnapshot(t *testing.T) {
	clock := newFakeClock()
	ts := newTestShard(t, testOpts{Log: statelog.Options{SegmentBytes: 512}, Options: Options{PruneInterval: time.Millisecond, ColdSnapshotInterval: time.Millisecond, Now: clock.Now}})
	jobs := make(chan opKind, 64)
	s := ts.active(func(s *Shard) { s.jobDone = jobs })
	ctx := context.Background()
	k1, k2 := Key{"g", testTopic, 1}, Key{"g", testTopic, 2}
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: k1, StateEpoch: 1}))
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: k2, StateEpoch: 1}))
	for i := 0; i < 20; i++ {
		mustOK(t, s.Write(ctx, WriteRequest{Key: k1, StateEpoch: 1, StartOffset: int64(i), StateBatches: bs(sb(int64(i), int64(i)+5, 0, 1))}))
	}
	if lro, ok := s.LastRedundantOffset(); ok {
		t.Fatalf("last redundant offset %d before any cold snapshot", lro)
	}
	clock.advance(time.Second)
	// The cold job re-snapshots both keys at offsets 22 and 23, then a prune round moves the
	// log start to 22, the oldest snapshot still needed.
	for rounds := 0; ; rounds++ {
		if rounds > 100000 {
			t.Fatal("the timers never pruned the log")
		}
		if <-jobs != opPrune {
			continue
		}
		if st := s.Stats(); st.LastPrunedOffset == 22 && st.LogStartOffset == 22 {
			break
		}
	}
	if lro, ok := s.LastRedundantOffset(); !ok || lro != 22 {
		t.Fatalf("last redundant offset %d/%v, want 22", lro, ok)
	}
	// Quiet now: further cold rounds write nothing.
	before := s.Stats().Records.Snapshots
	for rounds := 0; rounds < 3; {
		if <-jobs == opCold {
			rounds++
		}
	}
	if after := s.Stats().Records.Snapshots; after != before {
		t.Fatalf("a quiet shard kept snapshotting: %d → %d", before, after)
	}
}

func TestShardPruneOnDemand(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := newTestShard(t, testOpts{Log: statelog.Options{SegmentBytes: 256}, Options: Options{Partition: 5, Metrics: NewMetrics(reg, 10)}})
	s := ts.active(nil)
	ctx := context.Background()
	if got := metricValue(t, s.metrics.lastPruned); got != 0 {
		t.Fatalf("last pruned gauge starts at %v", got)
	}
	if start, err := s.Prune(ctx); err != nil || start != 0 {
		t.Fatalf("prune of an empty shard: %d, %v", start, err)
	}
	k1, k2 := Key{"g", testTopic, 1}, Key{"g", testTopic, 2}
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: k1, StateEpoch: 1})) // 0
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: k2, StateEpoch: 1})) // 1
	for i := 0; i < 10; i++ {
		mustOK(t, s.Write(ctx, WriteRequest{Key: k1, StateEpoch: 1, StartOffset: int64(i)})) // 2..11
	}
	mustOK(t, s.Initialize(ctx, InitializeRequest{Key: k1, StateEpoch: 2})) // 12
	if start, err := s.Prune(ctx); err != nil || start != 1 {
		t.Fatalf("prune: %d, %v; want 1 (k2's snapshot pins it)", start, err)
	}
	mustOK(t, s.Delete(ctx, DeleteRequest{Key: k2})) // 13: the tombstone releases k2
	sizeBefore := s.Stats().LogSize
	start, err := s.Prune(ctx)
	if err != nil || start != 12 {
		t.Fatalf("prune after tombstone: %d, %v; want 12", start, err)
	}
	if s.Stats().LogSize >= sizeBefore {
		t.Fatal("pruning deleted no segment")
	}
	if got := metricValue(t, s.metrics.lastPruned); got != 12 {
		t.Fatalf("last pruned gauge %v", got)
	}
	want := s.Read(ctx, ReadRequest{Key: k1, LeaderEpoch: 0})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := ts.active(nil)
	if got := s2.Read(ctx, ReadRequest{Key: k1, LeaderEpoch: 0}); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after pruning and reopening: %+v, want %+v", got, want)
	}
	if got := s2.ReadSummary(ctx, SummaryRequest{Key: k2}); got.StartOffset != -1 {
		t.Fatalf("deleted key came back: %+v", got)
	}
	if got := metricValue(t, s2.metrics.lastPruned); got != 12 {
		t.Fatalf("last pruned gauge after reopen %v, want the log-start offset 12", got)
	}
}

func TestShardMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, 2)
	ts := newTestShard(t, testOpts{Options: Options{Partition: 7, Metrics: m}})
	s := ts.active(nil)
	ctx := context.Background()
	// Groups unfit for a label value count as __other__ and take no label slot.
	for i, g := range []string{strings.Repeat("x", maxGroupLabelBytes+1), "a\x00b", "a", "b", "c", "d"} {
		k := Key{g, testTopic, int32(i)}
		mustOK(t, s.Initialize(ctx, InitializeRequest{Key: k, StateEpoch: 1}))
		mustOK(t, s.Write(ctx, WriteRequest{Key: k, StateEpoch: 1}))
	}
	mustOK(t, s.Delete(ctx, DeleteRequest{Key: Key{"d", testTopic, 5}}))
	checks := []struct {
		c    prometheus.Collector
		lv   []string
		want float64
	}{
		{m.records, []string{"7", "snapshot"}, 6},
		{m.records, []string{"7", "update"}, 6},
		{m.records, []string{"7", "tombstone"}, 1},
		{m.groups, []string{"a", "snapshot"}, 1},
		{m.groups, []string{"b", "update"}, 1},
		{m.groups, []string{otherGroup, "snapshot"}, 4},
		{m.groups, []string{otherGroup, "tombstone"}, 1},
		{m.keys, []string{"7"}, 5},
	}
	for _, c := range checks {
		var got float64
		switch v := c.c.(type) {
		case *prometheus.CounterVec:
			got = metricValue(t, v.WithLabelValues(c.lv...))
		case *prometheus.GaugeVec:
			got = metricValue(t, v.WithLabelValues(c.lv...))
		}
		if got != c.want {
			t.Errorf("%v: got %v, want %v", c.lv, got, c.want)
		}
	}
	// Group ids past the cap are counted, not remembered: a client inventing group ids cannot grow
	// the shard's memory through its metrics.
	if n := len(s.metrics.groups); n != 2 {
		t.Errorf("the shard remembers %d groups' counters, want the 2 labeled ones", n)
	}
	if got := metricValue(t, m.bytes.WithLabelValues("7", "tombstone")); got <= 0 {
		t.Errorf("tombstone bytes %v", got)
	}
	if n := seriesCount(t, reg, "sharecoord_group_records_appended_total"); n != (2+1)*int(numKinds) {
		t.Errorf("group series %d: the label set must stay bounded", n)
	}
	for _, name := range []string{"sharecoord_partition_load_seconds", "sharecoord_last_pruned_offset", "sharecoord_share_partitions"} {
		if n := seriesCount(t, reg, name); n != 1 {
			t.Errorf("%s has %d series, want 1 as soon as the partition loaded", name, n)
		}
	}
}

// metricValue reads a counter or gauge.
func metricValue(t testing.TB, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if c := d.GetCounter(); c != nil {
		return c.GetValue()
	}
	return d.GetGauge().GetValue()
}

// seriesCount returns how many series the metric family name has in reg.
func seriesCount(t testing.TB, reg *prometheus.Registry, name string) int {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}

// The status gauge has one series per state for every partition, 1 for the current state only.
func TestShardStatusMetric(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), 10)
	ts := newTestShard(t, testOpts{Options: Options{Partition: 3, Metrics: m}})
	s := ts.active(nil)
	want := func(current State) {
		t.Helper()
		for st := range State(numStates) {
			got := metricValue(t, m.status.WithLabelValues("3", st.String()))
			if (st == current) != (got == 1) || (got != 0 && got != 1) {
				t.Errorf("sharecoord_partition_status{status=%q} = %v with the shard %s", st, got, current)
			}
		}
	}
	want(Active)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want(Closed)
}

// The cold-partition snapshot job commits its snapshots a group commit's worth at a time, and an
// operation queued while it runs is committed between two of its chunks instead of waiting for
// the whole job.
func TestShardColdJobYieldsBetweenChunks(t *testing.T) {
	const n = 6
	ts, s, held, release, cold := startHeldColdJob(t, 2, n) // keys at offsets 0..5
	ctx := context.Background()
	commits := s.Stats().Commits // the job's first chunk is held at the log, not counted yet
	<-held                       // the first chunk waits at the log
	wrote := make(chan Result, 1)
	go func() {
		wrote <- s.Write(ctx, WriteRequest{Key: key(n - 1), StateEpoch: 1, StartOffset: 3, StateBatches: bs(sb(3, 9, 2, 1))})
	}()
	waitQueued(t, s, 1) // the write waits behind the held chunk
	release()
	mustOK(t, <-wrote)
	if got := <-cold; got != n {
		t.Fatalf("%d cold snapshots, want %d", got, n)
	}
	if c := s.Stats().Commits - commits; c != n/2+1 {
		t.Fatalf("%d commits, want %d chunks of 2 and the write's", c, n/2+1)
	}
	var got []string
	if err := ts.log().replay(n, func(off int64, raw []byte) error {
		r, err := record.Decode(raw)
		if err != nil {
			return err
		}
		got = append(got, fmt.Sprintf("%d:%d:%d", off, int16(r.Type), r.Key.Partition))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"6:0:0", "7:0:1", "8:1:5", "9:0:2", "10:0:3", "11:0:4", "12:0:5"}
	if !slices.Equal(got, want) {
		t.Fatalf("records (offset:type:partition) %v, want %v", got, want)
	}
	if r := s.Read(ctx, ReadRequest{Key: key(n - 1)}); r.StartOffset != 3 || len(r.StateBatches) != 1 {
		t.Fatalf("read %+v", r)
	}
}

// Close finishes a cold-partition snapshot job that a call waits for, then closes.
func TestShardCloseFinishesColdJob(t *testing.T) {
	ts, s, held, release, cold := startHeldColdJob(t, 1, 3)
	<-held
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	<-s.drain // Close asked the shard to finish while the job's first chunk is held
	if st := s.Status(); st.State == Closed {
		t.Fatalf("status %+v with a chunk of the job still held", st)
	}
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if n := <-cold; n != 3 {
		t.Fatalf("%d cold snapshots, want 3", n)
	}
	s2 := ts.active(nil)
	if st := s2.Stats(); st.LogEndOffset != 6 {
		t.Fatalf("log end %d, want 6", st.LogEndOffset)
	}
}

// startHeldColdJob starts a shard committing at most maxBatch records at a time, with n keys
// initialized and then cold, and a SnapshotColdPartitions call whose appends wait at the log:
// each reports on held and waits for release. The call's result arrives on cold.
func startHeldColdJob(t *testing.T, maxBatch, n int) (ts *testShard, s *Shard, held chan struct{}, release func(), cold chan int) {
	t.Helper()
	clock := newFakeClock()
	ts = newTestShard(t, testOpts{Options: Options{Now: clock.Now, MaxBatchRecords: maxBatch}})
	s = ts.active(nil)
	ctx := context.Background()
	for i := 0; i < n; i++ {
		mustOK(t, s.Initialize(ctx, InitializeRequest{Key: key(i), StateEpoch: 1, StartOffset: 0}))
	}
	clock.advance(time.Second)
	held = make(chan struct{}, 16)
	release = ts.log().holdAppends(held)
	cold = make(chan int, 1)
	go func() {
		n, err := s.SnapshotColdPartitions(ctx)
		if err != nil {
			t.Error(err)
		}
		cold <- n
	}()
	return ts, s, held, release, cold
}

// reloaded closes s, opens its log again in a new shard of ts, closes that too and returns the
// state the reload built, to compare with s's.
func reloaded(t *testing.T, ts *testShard, s *Shard) *machine {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := ts.active(nil)
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	return s2.m
}
