package shard

import "go.uber.org/zap"

// coldRun schedules the cold-partition snapshot jobs of a shard (Kafka's snapshotColdPartitions)
// on the shard goroutine: the job under way, the calls it answers when done, the calls that came
// while it ran (they get the next job), whether the timer started it, and whether a job the
// timer started has ended (the active loop then reschedules the timer). A job commits a chunk of
// its snapshots at a time (see Shard.coldChunk).
type coldRun struct {
	job       *coldJob
	waiters   []*op
	next      []*op
	byTimer   bool
	timerDone bool
}

// running reports a job under way.
func (c *coldRun) running() bool { return c.job != nil }

// awaited reports a job under way that a call waits for, or calls waiting for the next one.
func (c *coldRun) awaited() bool { return c.job != nil && (len(c.waiters) > 0 || len(c.next) > 0) }

// takeTimerDone reports, once, that a job the timer started has ended.
func (c *coldRun) takeTimerDone() bool {
	done := c.timerDone
	c.timerDone = false
	return done
}

// startCold starts a cold-partition snapshot job for the calls waiters (and the timer, byTimer)
// and commits its first chunk. A job with nothing to write answers them at once.
func (s *Shard) startCold(waiters []*op, byTimer bool) bool {
	job := s.m.startCold()
	if job == nil {
		for _, o := range waiters {
			close(o.done)
		}
		s.cold.timerDone = s.cold.timerDone || byTimer
		return true
	}
	s.cold.job, s.cold.waiters, s.cold.byTimer = job, waiters, byTimer
	return s.coldChunk()
}

// queueCold takes a cold-snapshot call: it starts a job, or waits for the next one if a job
// started before it is under way.
func (s *Shard) queueCold(o *op) bool {
	if s.cold.running() {
		s.cold.next = append(s.cold.next, o)
		return true
	}
	return s.startCold([]*op{o}, false)
}

// coldChunk commits the next chunk of the cold-snapshot job, at most one group commit's worth of
// records (MaxBatchRecords, MaxBatchBytes), so that the operations queued behind a job over many
// keys wait for one chunk rather than the whole job, and the job never holds more than a chunk
// of records in memory. The job's calls are answered with its last chunk; calls that came while
// it ran then get a job of their own. After a failed append every call of the job, and every
// call waiting for the next one, gets COORDINATOR_NOT_AVAILABLE.
func (s *Shard) coldChunk() bool {
	c := &s.cold
	job := c.job
	s.pend.reset()
	s.batch = s.batch[:0]
	done := s.m.coldStep(job, &s.pend, s.opts.MaxBatchRecords, s.opts.MaxBatchBytes)
	if done {
		for _, o := range c.waiters {
			o.n = int64(job.written)
			s.batch = append(s.batch, o)
		}
		c.waiters = nil
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
	c.job = nil
	c.timerDone = c.timerDone || c.byTimer
	c.byTimer = false
	if next := c.next; len(next) > 0 {
		c.next = nil
		return s.startCold(next, false)
	}
	return true
}

// abortCold drops the cold-snapshot job under way, if any, answering its calls, and those waiting
// for the next job, with r.
func (s *Shard) abortCold(r Result) {
	s.logColdStopped("stopped by a failure")
	c := &s.cold
	for _, o := range append(c.waiters, c.next...) {
		o.fail(r)
		close(o.done)
	}
	// The next active loop starts its timers afresh: no finished timer job is left to report.
	*c = coldRun{}
}

// dropCold drops a job no call waits for (the shard is closing).
func (s *Shard) dropCold() {
	s.logColdStopped("no call waits for it, and the partition is closing")
	s.cold.job, s.cold.byTimer = nil, false
}

// logColdStopped logs what a cold-snapshot job that will not finish wrote before it stopped.
func (s *Shard) logColdStopped(why string) {
	if j := s.cold.job; j != nil && j.written > 0 {
		s.logger.Info("cold-partition snapshots written by a job that did not finish: "+why, zap.Int("records", j.written))
	}
}
