package shard

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/record"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

// run is the shard goroutine: load, serve, and after a failed commit reload (truncating the log
// to the durable end it had); a failed load is retried with backoff (not after corruption or a
// failed file-system sync, or a sync of what the load found) while queued operations are answered
// COORDINATOR_NOT_AVAILABLE.
func (s *Shard) run() {
	defer close(s.done)
	backoff := s.opts.RetryBackoff
	var appendBackoff time.Duration // wait before a reload after a failed append; 0: none
	var lastAppendFailure time.Time
	for {
		took, err := s.load()
		if errors.Is(err, errStopping) {
			s.shutdown()
			return
		}
		if err != nil {
			var corrupt *statelog.CorruptionError
			wait := backoff
			switch {
			case errors.Is(err, statelog.ErrSyncFailed):
				s.logSyncFailed(err)
				wait = -1
			case errors.Is(err, statelog.ErrNotDurable):
				// A retry would read the bytes whose sync failed from the page cache and trust
				// them; only dropping that cache tells what is on disk.
				s.logger.Error("state partition failed: its log could not be synced when it was loaded; "+
					"drop the page cache (or restart the machine) before restarting the process", zap.Error(err))
				wait = -1
			case errors.As(err, &corrupt):
				s.logger.Error("state partition load failed", zap.Error(err))
				wait = -1 // a damaged log needs an operator's repair; retrying cannot help
			case errors.Is(err, statelog.ErrUnsupportedFormat), errors.Is(err, record.ErrUnknownValueVersion):
				s.logger.Error("state partition load failed: its log holds data in a format this release does not read, "+
					"written by a newer coordinatord; run that release or a later one (repair-log does not apply)", zap.Error(err))
				wait = -1 // the same bytes would be read again
			default:
				s.logger.Error("state partition load failed", zap.Error(err))
			}
			s.setStatus(Failed, err, 0)
			if !s.waitFailed(wait) {
				s.shutdown()
				return
			}
			backoff = min(2*backoff, s.opts.MaxRetryBackoff)
			continue
		}
		backoff = s.opts.RetryBackoff
		s.setStatus(Active, nil, took)
		if s.serve() {
			return
		}
		if err := s.syncLost; err != nil {
			// Another partition's file-system sync failed while this one had nothing unsynced:
			// fail now, as every partition must until the restart, instead of at the next use
			// of the log, so that /readyz and the alerts name every partition at once. A
			// cold-snapshot job under way stops; its calls are told that the partition failed.
			s.logSyncFailed(err)
			s.setStatus(Failed, err, 0)
			r, _ := s.gate()
			s.abortCold(r)
			if o := s.carry; o != nil {
				s.carry = nil
				o.refuse(r)
			}
			s.waitFailed(-1)
			s.shutdown()
			return
		}
		// A cold-snapshot job does not survive the reload; its calls get the append's failure.
		s.abortCold(appendFailed(s.appendErr))
		// A commit failed: the batch may be on disk (even only in the page cache, its
		// write-back failed) without having been acknowledged. The reload cuts the log back to
		// where it was last durable, so that the batch can never reappear.
		end := s.log.EndOffset()
		s.durableEnd = &end
		if s.metrics != nil {
			s.metrics.reloads.Inc()
		}
		// A first failure reloads at once. Failures that keep coming (a full or failing disk)
		// space the reloads out, each a replay of the whole log, while calls are answered
		// COORDINATOR_LOAD_IN_PROGRESS naming the failure.
		appendBackoff = s.nextAppendBackoff(appendBackoff, lastAppendFailure)
		lastAppendFailure = time.Now()
		if appendBackoff > 0 {
			s.setStatus(Loading, s.appendErr, 0)
			if !s.waitFailed(appendBackoff) {
				s.shutdown() // it makes the cut
				return
			}
		}
	}
}

// logSyncFailed logs why a partition failed after a failed file-system sync of its sync group.
func (s *Shard) logSyncFailed(err error) {
	// The kernel reported a lost write-back once; nothing in this process can tell which writes
	// of which partition it took.
	s.logger.Error("state partition failed: a file-system sync of the data directory failed; "+
		"drop the page cache (or restart the machine), then restart the process to reload every state partition from disk", zap.Error(err))
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

// load (re)opens the log and replays it into a fresh state (as Kafka's ShareCoordinatorShard
// replays it), in one pass over the log: each frame is verified and its records applied as it is
// read. It returns how long that took.
func (s *Shard) load() (time.Duration, error) {
	s.setStatus(Loading, s.appendErr, 0) // a reload after a failed append says why
	s.closeLog()
	s.m.reset()
	started := time.Now()
	var n int64
	cut := s.durableEnd
	l, err := s.loadLog(cut, func(offset int64, record []byte) error {
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
		if errors.Is(err, errStopping) {
			return 0, err
		}
		return 0, fmt.Errorf("load state log %s: %w", s.dir, err)
	}
	s.durableEnd, s.appendErr = nil, nil
	s.mu.Lock()
	s.log = l
	s.mu.Unlock()
	from := l.StartOffset()
	if cut != nil {
		s.logger.Warn("state partition reloaded after a failed append, its log truncated to the last durable offset",
			zap.Int64("durable_end", *cut))
	}
	took := time.Since(started)
	for t, c := range s.m.skipped {
		s.logger.Warn("skipped records of unknown type during load", zap.Int16("type", int16(t)), zap.Int64("records", c))
	}
	s.lastPruned = from
	s.pruned.Store(s.lastPruned)
	s.metrics.loaded(took, s.lastPruned)
	s.publish() // sets the keys gauge
	s.logger.Info("state partition loaded", zap.Int64("records", n), zap.Int("keys", len(s.m.states)),
		zap.Int64("start_offset", from), zap.Int64("end_offset", l.EndOffset()), zap.Duration("took", took))
	return max(took, time.Nanosecond), nil
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

// cutToDurableEnd is the reload after a failed commit for a shard that is closing before that
// reload happened (s.durableEnd set): it reopens the log truncated to the durable end the failed
// log had, reading its records without applying them, so that the unacknowledged batch
// (written, perhaps only to the page cache) is not found by whoever opens the log next.
// shutdown then closes it.
func (s *Shard) cutToDurableEnd() {
	if s.durableEnd == nil {
		return
	}
	end := *s.durableEnd
	s.closeLog()
	l, err := s.loadLog(&end, func(int64, []byte) error { return nil })
	if err != nil {
		s.logger.Error("closing after a failed commit: could not cut the state log back to its durable end; "+
			"the unacknowledged batch may be found when the log is next opened", zap.Int64("durable_end", end), zap.Error(err))
		return
	}
	s.durableEnd, s.appendErr = nil, nil
	s.mu.Lock()
	s.log = l
	s.mu.Unlock()
	s.logger.Warn("closing after a failed commit: cut the state log back to its durable end", zap.Int64("durable_end", end))
}

// waitFailed answers queued operations while Failed, until the backoff elapses or the log's sync
// group fails (true: load again, which then fails for good) or the shard is closed (false). A
// negative wait never elapses.
func (s *Shard) waitFailed(wait time.Duration) bool {
	var retry <-chan time.Time
	var syncFailed <-chan struct{} // a failed sync group makes the retry fail for good at once
	if wait >= 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		retry = t.C
		syncFailed = s.opts.Log.SyncGroup.Failed()
	}
	for {
		select {
		case o := <-s.ops:
			r, _ := s.gate()
			o.refuse(r)
		case <-retry:
			return true
		case <-syncFailed:
			return true
		case <-s.drain:
			return false
		}
	}
}

// shutdown answers whatever is still queued, makes the cut a failed commit left pending, closes
// the log and marks the shard Closed (with the error of closing the log).
func (s *Shard) shutdown() {
	s.failQueued()
	s.cutToDurableEnd()
	s.setStatus(Closed, s.closeLog(), 0)
}

// serve applies operations until the shard is closed (true) or a commit failed or the log's
// sync group failed (false: reload, or fail for good when s.syncLost is set).
// The prune and cold-snapshot jobs run on this goroutine between batches and are rescheduled once
// they finish, as Kafka's timers are. A cold-snapshot job commits a chunk of its snapshots at a
// time (see coldChunk), and the operations queued meanwhile get a group commit between chunks.
func (s *Shard) serve() bool {
	pruneT := newJobTimer(s.opts.PruneInterval)
	coldT := newJobTimer(s.opts.ColdSnapshotInterval)
	defer pruneT.stop()
	defer coldT.stop()
	syncFailed := s.opts.Log.SyncGroup.Failed()
	for {
		// Checked before any commit too, not only by the selects below: a select that finds an
		// operation and the failure ready at once may take the operation, whose append the failed
		// group would refuse, and the shard would reload as if an append of its own had failed.
		if s.lostSync(syncFailed) {
			return false
		}
		if s.coldTimerDone {
			s.coldTimerDone = false
			s.jobFinished(opCold)
			coldT.reset()
		}
		if s.cold != nil {
			select {
			case <-syncFailed:
				continue // between chunks everything the job appended is durable: as when idle
			case o := <-s.ops:
				if !s.commitReceived(o, syncFailed) {
					return false
				}
			case <-s.drain:
				return s.drainQueued()
			default:
			}
			if s.cold != nil && !s.coldChunk() {
				return false
			}
			continue
		}
		select {
		case <-syncFailed:
			continue // between commits everything appended is durable: there is nothing to cut
		case o := <-s.ops:
			if !s.commitReceived(o, syncFailed) {
				return false
			}
		case <-pruneT.c():
			if _, err := s.prune(); err != nil {
				s.logger.Warn("prune failed", zap.Error(err))
			}
			s.jobFinished(opPrune)
			pruneT.reset()
		case <-coldT.c():
			if s.lostSync(syncFailed) {
				return false
			}
			if !s.startCold(nil, true) {
				return false
			}
		case <-s.drain:
			return s.drainQueued()
		}
	}
}

// commitReceived commits o, just received by serve, unless the log's sync group failed
// meanwhile: then o is kept (s.carry) to be answered with the partition's failure. false: serve
// must return.
func (s *Shard) commitReceived(o *op, syncFailed <-chan struct{}) bool {
	if s.lostSync(syncFailed) {
		s.carry = o
		return false
	}
	return s.commitOps(o, false)
}

// lostSync reports, without waiting, whether the log's sync group has failed (failed closed),
// and then records its error in s.syncLost.
func (s *Shard) lostSync(failed <-chan struct{}) bool {
	select {
	case <-failed:
		s.syncLost = s.opts.Log.SyncGroup.Err()
		return true
	default:
		return false
	}
}

// drainQueued is the end of serve once the shard is closing: it commits what is queued and
// finishes a cold-snapshot job that calls wait for, then shuts down.
func (s *Shard) drainQueued() bool {
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
		case s.cold != nil && (len(s.coldWaiters) > 0 || len(s.coldNext) > 0):
			ok = s.coldChunk()
		default:
			s.logColdStopped("no call waits for it, and the partition is closing")
			s.cold, s.coldByTimer = nil, false // a job that no call waits for is dropped
			s.shutdown()
			return true
		}
	}
	end := s.log.EndOffset()
	s.durableEnd = &end
	s.abortCold(appendFailed(s.appendErr))
	s.shutdown() // it answers what is left and makes the cut
	return true
}

// abortCold drops the cold-snapshot job under way, if any, answering its calls, and those waiting
// for the next job, with r.
func (s *Shard) abortCold(r Result) {
	s.logColdStopped("stopped by a failure")
	for _, o := range append(s.coldWaiters, s.coldNext...) {
		o.fail(r)
		close(o.done)
	}
	// The next serve starts its timers afresh: no finished timer job is left to report.
	s.cold, s.coldWaiters, s.coldNext, s.coldByTimer, s.coldTimerDone = nil, nil, nil, false, false
}

// logColdStopped logs what a cold-snapshot job that will not finish wrote before it stopped.
func (s *Shard) logColdStopped(why string) {
	if s.cold != nil && s.cold.written > 0 {
		s.logger.Info("cold-partition snapshots written by a job that did not finish: "+why, zap.Int("records", s.cold.written))
	}
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

// failQueued answers every queued operation that the shard is closed.
func (s *Shard) failQueued() {
	for {
		select {
		case o := <-s.ops:
			o.refuse(s.closedResult())
		default:
			return
		}
	}
}

// commitOps runs first, and any control operation met while collecting its batch, to completion.
func (s *Shard) commitOps(first *op, draining bool) bool {
	for o := first; o != nil; {
		var ok bool
		if o.control() {
			ok = s.runControl(o)
		} else {
			ok = s.commitBatch(o, draining)
		}
		if !ok {
			if c := s.carry; c != nil {
				// Not started: it runs after the reload.
				s.carry = nil
				s.requeue(c)
			}
			return false
		}
		o, s.carry = s.carry, nil
	}
	return true
}

// requeue puts back an operation that was received but not started.
func (s *Shard) requeue(o *op) {
	select {
	case s.ops <- o:
	default:
		o.refuse(notAvailable("The coordinator is not available: the state log is being reloaded."))
	}
}

// claim takes o for execution; false if its caller gave up (then it is never applied).
func claim(o *op) bool {
	if o.ctx.Err() != nil {
		o.claim.CompareAndSwap(opQueued, opAbandoned)
		return false
	}
	return o.claim.CompareAndSwap(opQueued, opClaimed)
}

// commitBatch is one group commit: apply first, collect more operations per the linger setting and
// the batch caps, append all their records at once, then answer them all.
func (s *Shard) commitBatch(first *op, draining bool) bool {
	s.pend.reset(s.log.EndOffset())
	s.batch = s.batch[:0]
	s.applyOp(first)
	linger := s.opts.AppendLingerMs
	if draining {
		linger = -1
	}
	if linger != 0 {
		var deadline <-chan time.Time
		if linger > 0 {
			t := time.NewTimer(time.Duration(linger) * time.Millisecond)
			defer t.Stop()
			deadline = t.C
		}
	collect:
		for s.pend.len() < s.opts.MaxBatchRecords && len(s.pend.buf) < s.opts.MaxBatchBytes && len(s.batch) < s.opts.MaxBatchRecords {
			var o *op
			if linger < 0 {
				select {
				case o = <-s.ops:
				default:
					break collect
				}
			} else {
				select {
				case o = <-s.ops:
				case <-deadline:
					break collect
				case <-s.drain:
					linger = -1 // closing: take what is queued, do not wait
					continue
				}
			}
			if o.control() {
				s.carry = o
				break
			}
			s.applyOp(o)
		}
	}
	return s.flush()
}

// applyOp runs one state operation against the current state, adding its records to s.pend.
func (s *Shard) applyOp(o *op) {
	if !claim(o) {
		return
	}
	switch o.kind {
	case opInitialize:
		o.res = s.m.initialize(&o.init, &s.pend)
	case opRead:
		o.readRes = s.m.read(&o.read, &s.pend)
	case opWrite:
		o.res = s.m.write(&o.write, &s.pend)
	case opDelete:
		o.res = s.m.delete(&o.del, &s.pend)
	case opSummary:
		o.sumRes = s.m.summary(&o.sum)
	}
	s.batch = append(s.batch, o)
}

// runControl runs a prune or cold-snapshot operation on its own.
func (s *Shard) runControl(o *op) bool {
	if !claim(o) {
		return true
	}
	if o.kind == opCold {
		if s.cold != nil {
			// A job is under way, started before o came: o gets a job of its own once it ends.
			s.coldNext = append(s.coldNext, o)
			return true
		}
		return s.startCold([]*op{o}, false)
	}
	o.n, o.err = s.prune()
	close(o.done)
	return true
}

// startCold starts a cold-partition snapshot job (Kafka's snapshotColdPartitions) for the calls
// waiters (and the timer, byTimer) and commits its first chunk. A job with nothing to write
// answers them at once.
func (s *Shard) startCold(waiters []*op, byTimer bool) bool {
	job := s.m.startCold()
	if job == nil {
		for _, o := range waiters {
			close(o.done)
		}
		s.coldTimerDone = s.coldTimerDone || byTimer
		return true
	}
	s.cold, s.coldWaiters, s.coldByTimer = job, waiters, byTimer
	return s.coldChunk()
}

// coldChunk commits the next chunk of the cold-snapshot job, at most one group commit's worth of
// records (MaxBatchRecords, MaxBatchBytes), so that the operations queued behind a job over many
// keys wait for one chunk rather than the whole job, and the job never holds more than a chunk
// of records in memory. The job's calls are answered with its last chunk; calls that came while
// it ran then get a job of their own. After a failed append every call of the job, and every
// call waiting for the next one, gets COORDINATOR_NOT_AVAILABLE.
func (s *Shard) coldChunk() bool {
	job := s.cold
	s.pend.reset(s.log.EndOffset())
	s.batch = s.batch[:0]
	done := s.m.coldStep(job, &s.pend, s.opts.MaxBatchRecords, s.opts.MaxBatchBytes)
	if done {
		for _, o := range s.coldWaiters {
			o.n = int64(job.written)
			s.batch = append(s.batch, o)
		}
		s.coldWaiters = nil
	}
	if !s.flush() {
		s.abortCold(appendFailed(s.appendErr))
		return false
	}
	if !done {
		return true
	}
	if job.written > 0 {
		s.logger.Info("cold-partition snapshots written", zap.Int("records", job.written))
	}
	s.cold = nil
	s.coldTimerDone = s.coldTimerDone || s.coldByTimer
	s.coldByTimer = false
	if next := s.coldNext; len(next) > 0 {
		s.coldNext = nil
		return s.startCold(next, false)
	}
	return true
}

// prune moves the log-start offset to the last redundant offset (Kafka's prune job).
func (s *Shard) prune() (int64, error) {
	v, ok := s.m.offsets.lastRedundant()
	if !ok || v == s.lastPruned {
		return s.log.StartOffset(), nil
	}
	if err := s.log.SetStartOffset(v); err != nil {
		return s.log.StartOffset(), fmt.Errorf("prune state log %s to offset %d: %w", s.dir, v, err)
	}
	s.lastPruned = v
	s.pruned.Store(v)
	s.metrics.setLastPruned(v)
	s.logger.Debug("state log pruned", zap.Int64("start_offset", v))
	return s.log.StartOffset(), nil
}

// flush appends the batch's records and answers its operations. On an append failure every
// operation of the batch gets COORDINATOR_NOT_AVAILABLE and false is returned: the in-memory state
// may be ahead of the log and must be reloaded.
func (s *Shard) flush() bool {
	if s.pend.len() > 0 {
		if err := s.appendPending(); err != nil {
			s.appendErr = err
			s.logger.Error("appending to the state log failed; reloading the state partition", zap.Error(err))
			r := appendFailed(err)
			for _, o := range s.batch {
				o.fail(r)
				close(o.done)
			}
			s.releaseBatch()
			return false
		}
	}
	s.publish()
	for _, o := range s.batch {
		close(o.done)
	}
	s.releaseBatch()
	return true
}

// appendFailed is the answer to the operations of a commit whose append failed with err.
func appendFailed(err error) Result {
	return notAvailable("The coordinator is not available: appending to the state log failed: " + storageFailure(err) + ".")
}

// releaseBatch empties the answered batch, dropping its operations (and their requests, which can
// be large), the record slices of its append and a large record buffer, so that nothing of them
// stays reachable from the shard until the next commit.
func (s *Shard) releaseBatch() {
	clear(s.batch)
	s.batch = s.batch[:0]
	clear(s.records)
	s.records = s.records[:0]
	s.pend.release()
}

// appendPending appends s.pend in chunks bounded by the batch caps (one fsync per chunk) and
// records the metrics of what became durable.
func (s *Shard) appendPending() error {
	n := s.pend.len()
	for i := 0; i < n; {
		j, size := i, 0
		for j < n && (j == i || (j-i < s.opts.MaxBatchRecords && size+len(s.pend.record(j)) <= s.opts.MaxBatchBytes)) {
			size += len(s.pend.record(j))
			j++
		}
		s.records = s.records[:0]
		for k := i; k < j; k++ {
			s.records = append(s.records, s.pend.record(k))
		}
		first, err := s.log.Append(s.records)
		if err != nil {
			return fmt.Errorf("append %d records at offset %d: %w", j-i, s.pend.first+int64(i), err)
		}
		if want := s.pend.first + int64(i); first != want {
			return fmt.Errorf("the log assigned offset %d to a batch expected at offset %d", first, want)
		}
		s.commits.Add(1)
		if s.metrics != nil {
			s.metrics.m.commitBatch.Observe(float64(j - i))
		}
		for k := i; k < j; k++ {
			kind, size := s.pend.kinds[k], int64(len(s.pend.record(k)))
			s.appended[kind].Add(1)
			s.appendedSz[kind].Add(size)
			if s.metrics != nil {
				s.metrics.records[kind].Inc()
				s.metrics.bytes[kind].Add(float64(size))
				s.metrics.group(record.GroupOf(s.pend.keys[k]))[kind].Inc()
			}
		}
		i = j
	}
	return nil
}
