package shard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
)

// State is the lifecycle state of a shard.
type State int32

// The shard states. Loading → Active; a failed load → Failed (retried with backoff, or not, as
// the log's error says: see Action) → Loading → Active; a failed append → Loading (reload) →
// Active; Close → Closed.
const (
	Loading State = iota
	Active
	Failed
	Closed

	numStates = iota // the number of states (sizes per-state arrays)
)

// String returns "loading", "active", "failed" or "closed".
func (s State) String() string {
	switch s {
	case Loading:
		return "loading"
	case Active:
		return "active"
	case Failed:
		return "failed"
	case Closed:
		return "closed"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Status is a snapshot of a shard's lifecycle: its State, the error that made it Failed (or, while
// Loading, the failed append it reloads after), and the duration of its last completed load.
type Status struct {
	State        State
	Err          error
	LoadDuration time.Duration
}

// Stats are counters and sizes of a shard, safe to read at any time.
type Stats struct {
	Keys             int64 // share-partition keys held
	LogStartOffset   int64
	LogEndOffset     int64
	LogSize          int64
	LastPrunedOffset int64
	Commits          int64 // appends (group commits) made
	Records          RecordCounts
	Bytes            RecordCounts
	LoadedRecords    int64         // records the last successful load replayed
	LoadTime         time.Duration // how long that load took
}

// RecordCounts counts appended records (or their bytes) per record type.
type RecordCounts struct {
	Snapshots  int64
	Updates    int64
	Tombstones int64
}

// Shard is Kafka's share coordinator shard for one state partition: the share-state machine plus
// its log, run by a single goroutine that applies operations in arrival order and group-commits
// their records. All methods are safe for concurrent use.
type Shard struct {
	logger  *zap.Logger
	opts    Options
	opener  LogOpener
	repl    Replicated // the opener's, for a replicated log; nil otherwise
	m       *machine
	metrics *shardMetrics
	ops     chan *op

	mu         sync.Mutex // guards status, changed, closed, log
	status     Status
	changed    chan struct{} // closed and replaced on every status change
	closed     bool
	log        Log
	state      atomic.Int32
	stopAccept chan struct{} // closed by Close: submitters stop waiting for queue room
	submitters sync.WaitGroup
	drain      chan struct{} // closed by Close once no submitter is left: commit what is queued, exit
	done       chan struct{} // closed when the shard goroutine has exited

	// Owned by the shard goroutine.
	pend       pending
	batch      []*op
	records    [][]byte
	lastPruned int64
	carry      *op           // a control operation met while collecting a batch
	cold       coldRun       // the cold-partition snapshot jobs
	jobDone    chan<- opKind // tests: told after each timer-driven job
	// appendErr is the failure of the last append, shown in the Loading status while the log is
	// loaded again after it (nil once a load succeeded).
	appendErr error
	// lost is the error of a log that failed while this shard was idle (LogOpener.Failed): the
	// shard fails for good without a reload.
	lost error
	// loads counts the loads begun; every one after the first is a reload (after a failed load
	// or append, or a replaced log), which is logged at INFO where a first load is logged at DEBUG.
	loads int

	// Mirrors for Stats and LastRedundantOffset, updated after each commit.
	keys       atomic.Int64
	lro        atomic.Int64 // -1: none
	pruned     atomic.Int64
	commits    atomic.Int64
	appended   [numKinds]atomic.Int64
	appendedSz [numKinds]atomic.Int64
	loaded     atomic.Int64 // records replayed by the last successful load
	loadTook   atomic.Int64 // its duration, in nanoseconds

	// Test hooks (hooks.go), like jobDone: nil unless a test sets them before the goroutine starts.
	queued chan struct{}        // signalled after an operation entered the queue (the test receives)
	waits  chan<- time.Duration // told of each wait before a load (-1: until closed)
}

// Open starts the shard over the log that log opens: it returns at once in state Loading and
// replays the log in the background; operations meanwhile get COORDINATOR_LOAD_IN_PROGRESS. A
// failed load leaves it Failed: operations get COORDINATOR_NOT_AVAILABLE with a message carrying
// the cause, and the load is retried with backoff or not, as the log's error says (see Action).
func Open(logger *zap.Logger, provider Provider, opts Options, log LogOpener) *Shard {
	return start(logger, provider, opts, log, nil)
}

// start is Open with prepare (tests) run before the goroutine starts.
func start(logger *zap.Logger, provider Provider, opts Options, log LogOpener, prepare func(*Shard)) *Shard {
	if logger == nil {
		logger = zap.NewNop()
	}
	opts = opts.withDefaults()
	logger = logger.With(zap.Int("state_partition", opts.Partition))
	s := &Shard{
		logger:     logger,
		opts:       opts,
		opener:     log,
		repl:       replicated(log),
		m:          newMachine(logger, provider, opts.Now, opts.ColdSnapshotInterval, log.MaxRecordBytes()),
		metrics:    newShardMetrics(opts.Metrics, opts.Partition),
		ops:        make(chan *op, opts.QueueSize),
		changed:    make(chan struct{}),
		stopAccept: make(chan struct{}),
		drain:      make(chan struct{}),
		done:       make(chan struct{}),
	}
	s.lro.Store(-1)
	s.metrics.setStatus(Loading)
	if prepare != nil {
		prepare(s)
	}
	go s.run()
	return s
}

// Status returns the shard's lifecycle state.
func (s *Shard) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

func (s *Shard) setStatus(st State, err error, loadDuration time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.State, s.status.Err = st, err
	if loadDuration > 0 {
		s.status.LoadDuration = loadDuration
	}
	s.state.Store(int32(st))
	s.metrics.setStatus(st)
	close(s.changed)
	s.changed = make(chan struct{})
}

// Changed returns a channel that is closed at the shard's next status change; Status then tells
// the new one.
func (s *Shard) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// WaitLoaded waits until the shard is Active (nil), Failed (the load error), Closed (ErrClosed) or
// ctx ends (its error).
func (s *Shard) WaitLoaded(ctx context.Context) error {
	for {
		s.mu.Lock()
		st, changed := s.status, s.changed
		s.mu.Unlock()
		switch st.State {
		case Active:
			return nil
		case Failed:
			return st.Err
		case Closed:
			return ErrClosed
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// LastRedundantOffset returns the lowest log offset still needed (Kafka's
// ShareCoordinatorOffsetsManager) as of the last commit; false when there is none (no snapshot yet,
// or ≤ 0).
func (s *Shard) LastRedundantOffset() (int64, bool) {
	v := s.lro.Load()
	return v, v >= 0
}

// Stats returns the shard's counters and log sizes.
func (s *Shard) Stats() Stats {
	st := Stats{
		Keys:             s.keys.Load(),
		LastPrunedOffset: s.pruned.Load(),
		Commits:          s.commits.Load(),
		Records:          RecordCounts{s.appended[kindSnapshot].Load(), s.appended[kindUpdate].Load(), s.appended[kindTombstone].Load()},
		Bytes:            RecordCounts{s.appendedSz[kindSnapshot].Load(), s.appendedSz[kindUpdate].Load(), s.appendedSz[kindTombstone].Load()},
		LoadedRecords:    s.loaded.Load(),
		LoadTime:         time.Duration(s.loadTook.Load()),
	}
	s.mu.Lock()
	l := s.log
	s.mu.Unlock()
	if l != nil {
		st.LogStartOffset, st.LogEndOffset, st.LogSize = l.StartOffset(), l.EndOffset(), l.Size()
	}
	return st
}

// Initialize is InitializeShareGroupState for one key (Kafka's initializeState).
func (s *Shard) Initialize(ctx context.Context, r InitializeRequest) Result {
	o := &op{kind: opInitialize, init: r}
	if res, ok := s.do(ctx, o); !ok {
		return res
	}
	return o.res
}

// Read is ReadShareGroupState for one key (Kafka's readStateAndMaybeUpdateLeaderEpoch); a higher
// leader epoch is claimed with a record and answered once that record is durable.
func (s *Shard) Read(ctx context.Context, r ReadRequest) ReadResult {
	o := &op{kind: opRead, read: r}
	if res, ok := s.do(ctx, o); !ok {
		return ReadResult{Result: res}
	}
	return o.readRes
}

// Write is WriteShareGroupState for one key (Kafka's writeState and generateShareStateRecord).
func (s *Shard) Write(ctx context.Context, r WriteRequest) Result {
	return s.StartWrite(ctx, r).Wait()
}

// StartWrite queues the write of r and returns its answer to come: Write(ctx, r) is
// StartWrite(ctx, r).Wait(). It does not wait: a write that finds the shard's queue full is
// queued by a goroutine of its own. A caller with writes for many keys therefore queues them all
// from one goroutine, where they share commits, before it waits for any; the write timeout
// counts from StartWrite.
func (s *Shard) StartWrite(ctx context.Context, r WriteRequest) *Pending {
	p := &Pending{s: s, o: &op{kind: opWrite, write: r}, began: time.Now()}
	switch res, st := s.submit(ctx, p.o, p.began, false); st {
	case submitRefused:
		p.o, p.res = nil, res
	case submitFull:
		p.queuing = make(chan struct{})
		go func() {
			defer close(p.queuing)
			if res, st := s.submit(ctx, p.o, p.began, true); st != submitQueued {
				p.o, p.res = nil, res
			}
		}()
	}
	return p
}

// Pending is the answer to come of a write StartWrite queued, or the answer it got at once.
type Pending struct {
	s       *Shard
	o       *op // nil: answered without the shard, with res
	began   time.Time
	res     Result
	queuing chan struct{} // closed once a goroutine queued o (or set res): the queue was full
}

// Answered is the Pending of a write answered without a shard, with r.
func Answered(r Result) *Pending { return &Pending{res: r} }

// Wait returns the write's answer once the shard gave it, or a failure once its context ended or
// the write timeout passed. It is called once.
func (p *Pending) Wait() Result {
	if p.queuing != nil {
		<-p.queuing
	}
	if p.o == nil {
		return p.res
	}
	if res, ok := p.s.await(p.o, p.began); !ok {
		return res
	}
	return p.o.res
}

// Delete is DeleteShareGroupState for one key (Kafka's deleteState).
func (s *Shard) Delete(ctx context.Context, r DeleteRequest) Result {
	o := &op{kind: opDelete, del: r}
	if res, ok := s.do(ctx, o); !ok {
		return res
	}
	return o.res
}

// ReadSummary is ReadShareGroupStateSummary for one key (Kafka's readStateSummary).
func (s *Shard) ReadSummary(ctx context.Context, r SummaryRequest) SummaryResult {
	o := &op{kind: opSummary, sum: r}
	if res, ok := s.do(ctx, o); !ok {
		return SummaryResult{Result: res}
	}
	return o.sumRes
}

// Prune does what the prune timer does (Kafka's prune job): after every earlier operation is
// durable (of an earlier SnapshotColdPartitions, only the chunks of its job committed so far: a
// Prune runs between a job's chunks), if the last redundant offset is present and differs from
// the last pruned one, it moves
// the log-start offset there (deleting superseded segments). It returns the log-start offset
// afterwards.
func (s *Shard) Prune(ctx context.Context) (int64, error) {
	o := &op{kind: opPrune}
	if res, ok := s.do(ctx, o); !ok {
		return 0, resultError(res)
	}
	return o.n, o.err
}

// SnapshotColdPartitions does what the cold-partition timer does (Kafka's snapshotColdPartitions)
// and returns the number of snapshot records written.
func (s *Shard) SnapshotColdPartitions(ctx context.Context) (int, error) {
	o := &op{kind: opCold}
	if res, ok := s.do(ctx, o); !ok {
		return 0, resultError(res)
	}
	return int(o.n), o.err
}

// resultError turns the failure of a control operation into an error.
func resultError(r Result) error {
	switch r.Code {
	case kafkaerr.CoordinatorLoadInProgress:
		return fmt.Errorf("%w: %s", ErrLoading, r.Message)
	default:
		return fmt.Errorf("%w: %s", ErrNotAvailable, r.Message)
	}
}

// Close stops accepting operations (new ones get COORDINATOR_NOT_AVAILABLE), finishes and commits
// every operation already accepted, answers them, then closes the log. It is idempotent and
// returns the error of closing the log.
func (s *Shard) Close() error {
	s.mu.Lock()
	already := s.closed
	if !already {
		s.closed = true
		close(s.stopAccept)
	}
	s.mu.Unlock()
	if !already {
		s.submitters.Wait()
		close(s.drain)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status.Err
}

// ---- operations ----

type opKind uint8

const (
	opInitialize opKind = iota
	opRead
	opWrite
	opDelete
	opSummary
	opPrune
	opCold
)

// Claim states of an op: the shard goroutine claims it before applying it; a caller that gives up
// first abandons it, so it is never applied.
const (
	opQueued int32 = iota
	opClaimed
	opAbandoned
)

// op is one operation travelling to the shard goroutine and back.
type op struct {
	kind  opKind
	ctx   context.Context
	claim atomic.Int32
	done  chan struct{}

	init  InitializeRequest
	read  ReadRequest
	write WriteRequest
	del   DeleteRequest
	sum   SummaryRequest

	res     Result
	readRes ReadResult
	sumRes  SummaryResult
	n       int64
	err     error
}

func (o *op) control() bool { return o.kind == opPrune || o.kind == opCold }

// fail sets the answer of o to r whatever its kind.
func (o *op) fail(r Result) {
	o.res, o.readRes, o.sumRes = r, ReadResult{Result: r}, SummaryResult{Result: r}
	if o.control() {
		o.err = resultError(r)
	}
}

// refuse answers a queued o with r without applying it, unless the shard claimed it or its caller
// abandoned it already.
func (o *op) refuse(r Result) {
	if o.claim.CompareAndSwap(opQueued, opClaimed) {
		o.fail(r)
		close(o.done)
	}
}

func notAvailable(msg string) Result {
	return Result{Code: kafkaerr.CoordinatorNotAvailable, Message: msg}
}

// storageFailure says in a few words, for a client, what kind of storage failure err is.
func storageFailure(err error) string {
	_, client, _ := failure(err)
	return client
}

// notApplied is the answer to an operation that was never applied, for the reason why.
func notApplied(why string) Result {
	return notAvailable("The operation was not applied: " + why + ".")
}

// replicated returns log's Replicated, if it has one.
func replicated(log LogOpener) Replicated {
	r, _ := log.(Replicated)
	return r
}

// gate answers for a shard that is not Active, or whose replica does not lead.
func (s *Shard) gate() (Result, bool) {
	switch State(s.state.Load()) {
	case Active:
		if s.repl != nil {
			if r := s.repl.Role(); !r.Leading {
				return roleResult(s.opts.Partition, r), false
			}
		}
		return Result{}, true
	case Loading:
		st := s.Status()
		switch {
		case st.State != Loading:
			return s.gate() // it changed meanwhile
		case st.Err != nil:
			return Result{Code: kafkaerr.CoordinatorLoadInProgress, Message: fmt.Sprintf(
				"The coordinator is loading: state partition %d is reloading its log after an append failed: %s.",
				s.opts.Partition, storageFailure(st.Err))}, false
		}
		return withDefault(kafkaerr.CoordinatorLoadInProgress), false
	case Closed:
		return s.closedResult(), false
	}
	st := s.Status()
	if st.State == Failed {
		return notAvailable(fmt.Sprintf("The coordinator is not available: state partition %d failed: %s.", s.opts.Partition, storageFailure(st.Err))), false
	}
	return s.gate()
}

// do submits o and waits for its answer. ok=false means o was not answered by the shard and r is
// the failure to report.
func (s *Shard) do(ctx context.Context, o *op) (Result, bool) {
	began := time.Now()
	if r, st := s.submit(ctx, o, began, true); st != submitQueued {
		return r, false
	}
	return s.await(o, began)
}

// submitted is what submit did with an operation.
type submitted int

const (
	submitQueued  submitted = iota
	submitRefused           // not queued: the Result says why
	submitFull              // not queued: the queue was full and submit was not to wait
)

// submit queues o; when the queue is full it waits for room until the write timeout (counted
// from began) passes, if block, and otherwise returns submitFull at once.
func (s *Shard) submit(ctx context.Context, o *op, began time.Time, block bool) (Result, submitted) {
	if err := ctx.Err(); err != nil {
		return notApplied(err.Error()), submitRefused
	}
	if r, ok := s.gate(); !ok {
		return r, submitRefused
	}
	o.ctx, o.done = ctx, make(chan struct{})

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.closedResult(), submitRefused
	}
	s.submitters.Add(1)
	s.mu.Unlock()
	defer s.submitters.Done()
	select {
	case s.ops <- o: // room in the queue: no timer needed (Close lets the shard answer what it holds)
		s.opQueued()
		return Result{}, submitQueued
	default:
		if !block {
			return Result{}, submitFull
		}
	}
	timer := time.NewTimer(s.opts.WriteTimeout - time.Since(began))
	defer timer.Stop()
	select {
	case s.ops <- o:
		s.opQueued()
		return Result{}, submitQueued
	case <-s.stopAccept:
		return s.closedResult(), submitRefused
	case <-ctx.Done():
		return notApplied(ctx.Err().Error()), submitRefused
	case <-timer.C:
		return notApplied(fmt.Sprintf("the shard did not accept it within the write timeout of %v", s.opts.WriteTimeout)), submitRefused
	}
}

// await waits for the answer of the queued o until its context ends or the write timeout
// (counted from began) passes. ok=false means o was not answered by the shard and r is the
// failure to report.
func (s *Shard) await(o *op, began time.Time) (Result, bool) {
	select {
	case <-o.done:
		return Result{}, true
	default:
	}
	timer := time.NewTimer(s.opts.WriteTimeout - time.Since(began))
	defer timer.Stop()
	select {
	case <-o.done:
		return Result{}, true
	case <-o.ctx.Done():
		return s.abandon(o, o.ctx.Err().Error()), false
	case <-timer.C:
		return s.abandon(o, fmt.Sprintf("the commit did not complete within the write timeout of %v", s.opts.WriteTimeout)), false
	}
}

// closedResult is the answer of a closed shard.
func (s *Shard) closedResult() Result {
	return notAvailable(fmt.Sprintf("The coordinator is not available: state partition %d is closed.", s.opts.Partition))
}

// abandon gives up waiting for o. If the shard had not claimed it yet it never will.
func (s *Shard) abandon(o *op, why string) Result {
	if o.claim.CompareAndSwap(opQueued, opAbandoned) || o.claim.Load() == opAbandoned {
		return notApplied(why)
	}
	return notAvailable("The coordinator did not confirm the operation: " + why + "; it may still be applied.")
}

// errStopping aborts a load when the shard is closed.
var errStopping = errors.New("shard closing")
