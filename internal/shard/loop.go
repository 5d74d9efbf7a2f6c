package shard

import (
	"errors"
	"time"

	"go.uber.org/zap"
)

// run is the shard goroutine. It moves between four modes, each a method of its own:
//
//	runLoading   open the log and replay it into a fresh state
//	runActive    serve operations and the prune and cold-snapshot jobs, until the shard closes,
//	             an append fails, or the log fails while the shard is idle
//	runFailed    answer operations COORDINATOR_NOT_AVAILABLE while a failed load waits for its
//	             retry (or forever, when no retry can help: see Action)
//	runDraining  commit what is queued once the shard is closing, then shut down
//
// After a failed append the shard loads the log again (the log cuts the failed batch off), at
// once the first time and with a growing wait when failures keep coming.
func (s *Shard) run() {
	defer close(s.done)
	loadBackoff := s.opts.RetryBackoff
	var reloadWait time.Duration // wait before a reload after a failed append; 0: none
	var lastAppendFailure time.Time
	for {
		took, err := s.runLoading()
		if errors.Is(err, errStopping) {
			s.shutdown()
			return
		}
		if err != nil {
			if !s.runFailed(err, loadBackoff) {
				s.shutdown()
				return
			}
			loadBackoff = min(2*loadBackoff, s.opts.MaxRetryBackoff)
			continue
		}
		loadBackoff = s.opts.RetryBackoff
		s.setStatus(Active, nil, took)
		switch s.runActive() {
		case endClosed:
			return
		case endLost:
			s.runLost()
			return
		case endReload:
			s.abortCold(notAvailable("The coordinator is not available: the state partition's log was replaced by its leader's; retry."))
			continue
		}
		// An append failed: the batch may be on disk (even only in the page cache, its
		// write-back failed) without having been acknowledged; the log cuts it off when it is
		// opened again. A cold-snapshot job does not survive the reload; its calls get the
		// append's failure.
		s.abortCold(appendFailed(s.appendErr))
		if s.metrics != nil {
			s.metrics.reloads.Inc()
		}
		// A first failure reloads at once. Failures that keep coming (a full or failing disk)
		// space the reloads out, each a replay of the whole log, while calls are answered
		// COORDINATOR_LOAD_IN_PROGRESS naming the failure.
		reloadWait = s.nextAppendBackoff(reloadWait, lastAppendFailure)
		lastAppendFailure = time.Now()
		if reloadWait > 0 {
			s.setStatus(Loading, s.appendErr, 0)
			if !s.waitFailed(reloadWait) {
				s.shutdown()
				return
			}
		}
	}
}

// maxAppendBackoff bounds the wait between reloads after failed appends, so that a partition
// serves again soon after its disk recovers.
const maxAppendBackoff = 5 * time.Second

// nextAppendBackoff is the wait before the reload after a failed append, given the previous
// wait and when the previous append failure happened: none after an isolated failure, else
// RetryBackoff doubling up to min(MaxRetryBackoff, maxAppendBackoff).
func (s *Shard) nextAppendBackoff(prev time.Duration, lastFailure time.Time) time.Duration {
	limit := min(s.opts.MaxRetryBackoff, maxAppendBackoff)
	if lastFailure.IsZero() || time.Since(lastFailure) > limit+prev {
		return 0
	}
	return min(max(2*prev, s.opts.RetryBackoff), limit)
}

// runLoading (re)opens the log and replays it into a fresh state (as Kafka's
// ShareCoordinatorShard replays it), in one pass over the log: each frame is verified and its
// records applied as it is read. It returns how long that took.
func (s *Shard) runLoading() (time.Duration, error) {
	s.setStatus(Loading, s.appendErr, 0) // a reload after a failed append says why
	s.loads++
	s.closeLog()
	s.m.reset()
	started := time.Now()
	var n int64
	l, err := s.opener.Open(func(offset int64, record []byte) error {
		n++
		if n&4095 == 0 {
			select {
			case <-s.drain:
				return errStopping
			default:
			}
		}
		return s.m.replayRaw(offset, record)
	})
	if err != nil {
		s.m.reset() // records before the failure were applied: drop them
		return 0, err
	}
	s.appendErr = nil
	s.mu.Lock()
	s.log = l
	s.mu.Unlock()
	from := l.StartOffset()
	took := time.Since(started)
	for t, c := range s.m.skipped {
		s.logger.Warn("skipped records of unknown type during load", zap.Int16("type", int16(t)), zap.Int64("records", c))
	}
	s.lastPruned = from
	s.pruned.Store(s.lastPruned)
	s.metrics.loaded(took, s.lastPruned)
	s.publish() // sets the keys gauge
	s.loaded.Store(n)
	s.loadTook.Store(int64(took))
	// A first load that met nothing unusual is summed up with the others by the caller of
	// WaitLoaded; a reload, or a load that skipped records, is worth a line of its own.
	level := zap.DebugLevel
	if s.loads > 1 || len(s.m.skipped) > 0 {
		level = zap.InfoLevel
	}
	s.logger.Log(level, "state partition loaded", zap.Int64("records", n), zap.Int("keys", len(s.m.states)),
		zap.Int64("start_offset", from), zap.Int64("end_offset", l.EndOffset()), zap.Duration("took", took),
		zap.Bool("reload", s.loads > 1))
	return max(took, time.Nanosecond), nil
}

// runFailed logs why a load failed, marks the shard Failed and answers operations until the
// retry after backoff, unless the error says no retry can help (see Action): then until the
// shard closes. It reports whether to load again.
func (s *Shard) runFailed(err error, backoff time.Duration) bool {
	action, _, advice := failure(err)
	msg := "state partition load failed"
	if advice != "" {
		msg += ": " + advice
	}
	s.logger.Error(msg, zap.Error(err))
	wait := backoff
	if action != ActionRetry {
		wait = -1
	}
	s.setStatus(Failed, err, 0)
	return s.waitFailed(wait)
}

// runLost fails the shard for good after its log failed while the shard was idle (another
// partition's file-system sync failed while this one had nothing unsynced): at once, as every
// partition must until the restart, instead of at the next use of the log, so that /readyz and
// the alerts name every partition at once. A cold-snapshot job under way stops; its calls are
// told that the partition failed.
func (s *Shard) runLost() {
	_, _, advice := failure(s.lost)
	s.logger.Error("state partition failed: "+advice, zap.Error(s.lost))
	s.setStatus(Failed, s.lost, 0)
	r, _ := s.gate()
	s.abortCold(r)
	if o := s.carry; o != nil {
		s.carry = nil
		o.refuse(r)
	}
	s.waitFailed(-1)
	s.shutdown()
}

// publish refreshes the mirrors that other goroutines read.
func (s *Shard) publish() {
	s.keys.Store(int64(len(s.m.states)))
	if v, ok := s.m.offsets.lastRedundant(); ok {
		s.lro.Store(v)
	} else {
		s.lro.Store(-1)
	}
	s.metrics.setKeys(len(s.m.states))
}

func (s *Shard) closeLog() error {
	s.mu.Lock()
	l := s.log
	s.log = nil
	s.mu.Unlock()
	if l == nil {
		return nil
	}
	if err := l.Close(); err != nil {
		s.logger.Warn("closing the state log failed", zap.Error(err))
		return err
	}
	return nil
}

// waitFailed answers queued operations while Failed, until the backoff elapses or the log fails
// (true: load again, which then fails for good) or the shard is closed (false). A negative wait
// never elapses.
func (s *Shard) waitFailed(wait time.Duration) bool {
	s.waiting(wait)
	var retry <-chan time.Time
	var logFailed <-chan struct{} // a failed log makes the retry fail for good at once
	if wait >= 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		retry = t.C
		logFailed = s.opener.Failed()
	}
	for {
		select {
		case o := <-s.ops:
			r, _ := s.gate()
			o.refuse(r)
		case <-retry:
			return true
		case <-logFailed:
			return true
		case <-s.drain:
			return false
		}
	}
}

// shutdown answers whatever is still queued, closes the log and the opener (which makes the cut
// a failed append left pending) and marks the shard Closed (with the error of closing the log).
func (s *Shard) shutdown() {
	s.failQueued()
	err := s.closeLog()
	if cerr := s.opener.Close(); cerr != nil {
		s.logger.Warn("closing the state log's opener failed", zap.Error(cerr))
	}
	s.setStatus(Closed, err, 0)
}

// activeEnd is why runActive returned.
type activeEnd int

const (
	endClosed       activeEnd = iota // the shard closed (and shut down)
	endAppendFailed                  // an append failed: reload
	endLost                          // the log failed while the shard was idle: fail for good
	endReload                        // a replicated log was replaced, or could not be followed: load it again
)

// runActive applies operations until the shard is closed, a commit fails or the log fails.
// The prune and cold-snapshot jobs run on this goroutine between batches and are rescheduled once
// they finish, as Kafka's timers are. A cold-snapshot job commits a chunk of its snapshots at a
// time (see coldChunk), and the operations queued meanwhile get a group commit between chunks.
func (s *Shard) runActive() activeEnd {
	a := activeLoop{s: s, prune: newJobTimer(s.opts.PruneInterval), cold: newJobTimer(s.opts.ColdSnapshotInterval),
		logFailed: s.opener.Failed()}
	defer a.prune.stop()
	defer a.cold.stop()
	if s.repl != nil {
		a.changes = s.repl.Changes()
	}
	for {
		// Checked before any commit too, not only by the selects below: a select that finds an
		// operation and the failure ready at once may take the operation, whose append the failed
		// log would refuse, and the shard would reload as if an append of its own had failed.
		if s.logLost(a.logFailed) {
			return endLost
		}
		if s.cold.takeTimerDone() {
			s.jobFinished(opCold)
			a.cold.reset()
		}
		step := a.idle
		if s.cold.running() {
			step = a.betweenChunks
		}
		if end, done := step(); done {
			return end
		}
	}
}

// activeLoop is what runActive waits on: the timers of the prune and cold-snapshot jobs, the
// log's failure, and a replicated log's changes.
type activeLoop struct {
	s           *Shard
	prune, cold jobTimer
	logFailed   <-chan struct{}
	changes     <-chan struct{} // a replicated log's: records to follow, or a new role
}

// betweenChunks takes what came while a cold-snapshot job runs, without waiting, then commits
// the job's next chunk. done: runActive returns end.
func (a *activeLoop) betweenChunks() (end activeEnd, done bool) {
	s := a.s
	select {
	case <-a.logFailed:
		return 0, false // between chunks everything the job appended is durable: as when idle
	case <-a.changes:
		if !s.follow() {
			return endReload, true
		}
	case o := <-s.ops:
		if !s.commitReceived(o, a.logFailed) {
			return s.failedEnd(), true
		}
	case <-s.drain:
		return s.runDraining(), true
	default:
	}
	if s.cold.running() && !s.coldChunk() {
		return s.failedEnd(), true
	}
	return 0, false
}

// idle waits for the next operation, job or change and runs it. done: runActive returns end.
func (a *activeLoop) idle() (end activeEnd, done bool) {
	s := a.s
	select {
	case <-a.logFailed:
		return 0, false // between commits everything appended is durable: there is nothing to cut
	case <-a.changes:
		if !s.follow() {
			return endReload, true
		}
	case o := <-s.ops:
		if !s.catchUp(a.changes) {
			s.requeue(o)
			return endReload, true
		}
		if !s.commitReceived(o, a.logFailed) {
			return s.failedEnd(), true
		}
	case <-a.prune.c():
		if _, err := s.prune(); err != nil {
			s.logger.Warn("prune failed", zap.Error(err))
		}
		s.jobFinished(opPrune)
		a.prune.reset()
	case <-a.cold.c():
		return a.coldTimer()
	case <-s.drain:
		return s.runDraining(), true
	}
	return 0, false
}

// coldTimer starts the timer's cold-snapshot job, on a leader.
func (a *activeLoop) coldTimer() (end activeEnd, done bool) {
	s := a.s
	if s.logLost(a.logFailed) {
		return endLost, true
	}
	if _, leading := s.leading(); !leading {
		a.cold.reset() // only a leader writes cold snapshots; its followers copy them
		return 0, false
	}
	if !s.startCold(nil, true) {
		return s.failedEnd(), true
	}
	return 0, false
}

// leading reports whether the shard may apply operations: always on a local log, while its
// replica leads on a replicated one. r is the answer to operations otherwise.
func (s *Shard) leading() (r Result, ok bool) {
	if s.repl == nil {
		return Result{}, true
	}
	role := s.repl.Role()
	if role.Leading {
		return Result{}, true
	}
	return roleResult(s.opts.Partition, role), false
}

// follow applies the records other replicas' leaders appended to a replicated log, as a load
// replays them. false: the log was replaced, or a record could not be applied (the state may
// then be partly updated): the shard loads the log again.
func (s *Shard) follow() bool {
	n := 0
	reload, err := s.repl.Follow(func(offset int64, record []byte) error {
		n++
		return s.m.replayRaw(offset, record)
	})
	if err != nil {
		s.logger.Warn("following the replicated log failed; loading it again", zap.Error(err))
		return false
	}
	if reload {
		s.logger.Info("the replicated log was replaced; loading it again")
		return false
	}
	if n > 0 {
		s.publish()
	}
	return true
}

// catchUp follows what is pending before a leader builds on its state: records appended by
// others while it led (none while it keeps leading), or the ones a new leader had not followed
// yet when it took office. false: load the log again.
func (s *Shard) catchUp(changes <-chan struct{}) bool {
	select {
	case <-changes:
		return s.follow()
	default:
		return true
	}
}

// failedEnd is why a commit failed: the log failed while the shard held the operation (lost), or
// an append failed.
func (s *Shard) failedEnd() activeEnd {
	if s.lost != nil {
		return endLost
	}
	return endAppendFailed
}

// commitReceived commits o, just received by runActive, unless the log failed meanwhile: then o
// is kept (s.carry) to be answered with the partition's failure. false: runActive must return.
func (s *Shard) commitReceived(o *op, logFailed <-chan struct{}) bool {
	if s.logLost(logFailed) {
		s.carry = o
		return false
	}
	return s.commitOps(o, false)
}

// logLost reports, without waiting, whether the log has failed (failed closed), and then records
// its error in s.lost.
func (s *Shard) logLost(failed <-chan struct{}) bool {
	select {
	case <-failed:
		s.lost = s.opener.Err()
		return true
	default:
		return false
	}
}

// runDraining is the end of runActive once the shard is closing: it commits what is queued and
// finishes a cold-snapshot job that calls wait for, then shuts down.
func (s *Shard) runDraining() activeEnd {
	ok := true
	for ok {
		var o *op
		select {
		case o = <-s.ops:
		default:
		}
		switch {
		case o != nil:
			ok = s.commitOps(o, true)
		case s.cold.awaited():
			ok = s.coldChunk()
		default:
			s.dropCold() // a job that no call waits for is dropped
			s.shutdown()
			return endClosed
		}
	}
	s.abortCold(appendFailed(s.appendErr))
	s.shutdown() // it answers what is left; the opener makes the cut
	return endClosed
}

// jobFinished tells a test that a timer-driven job ran; it never blocks the shard.
func (s *Shard) jobFinished(k opKind) {
	if s.jobDone != nil {
		select {
		case s.jobDone <- k:
		default:
		}
	}
}

// jobTimer is an optional periodic timer (interval 0: never fires).
type jobTimer struct {
	t *time.Timer
	d time.Duration
}

func newJobTimer(d time.Duration) jobTimer {
	if d <= 0 {
		return jobTimer{}
	}
	return jobTimer{t: time.NewTimer(d), d: d}
}

func (j jobTimer) c() <-chan time.Time {
	if j.t == nil {
		return nil
	}
	return j.t.C
}

func (j jobTimer) reset() {
	if j.t != nil {
		j.t.Reset(j.d)
	}
}

func (j jobTimer) stop() {
	if j.t != nil {
		j.t.Stop()
	}
}
