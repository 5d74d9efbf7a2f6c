package shard

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/record"
)

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
// A replica that does not lead answers first with its role instead.
func (s *Shard) commitOps(first *op, draining bool) bool {
	if r, ok := s.leading(); !ok {
		first.refuse(r)
		return true
	}
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
	s.pend.reset()
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
		// A job under way, started before o came, makes o wait for a job of its own.
		return s.queueCold(o)
	}
	o.n, o.err = s.prune()
	close(o.done)
	return true
}

// prune moves the log-start offset to the last redundant offset (Kafka's prune job), or as far
// towards it as the log can go now (a replica's log not yet durable there); the next prune goes
// on from there.
func (s *Shard) prune() (int64, error) {
	v, ok := s.m.offsets.lastRedundant()
	if !ok || v == s.lastPruned {
		return s.log.StartOffset(), nil
	}
	start, err := s.log.SetStartOffset(v)
	if err != nil {
		return start, fmt.Errorf("prune the state log of partition %d to offset %d: %w", s.opts.Partition, v, err)
	}
	if start == s.lastPruned {
		return start, nil
	}
	s.lastPruned = start
	s.pruned.Store(start)
	s.metrics.setLastPruned(start)
	s.logger.Debug("state log pruned", zap.Int64("start_offset", start))
	return start, nil
}

// flush appends the batch's records and answers its operations; a batch without records (reads,
// summaries, refused operations) waits for the log to confirm that the shard holds all of it
// instead. On an append failure every operation of the batch gets COORDINATOR_NOT_AVAILABLE and
// false is returned: the in-memory state may be ahead of the log and must be reloaded.
func (s *Shard) flush() bool {
	if s.pend.len() > 0 || len(s.batch) > 0 {
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
	if n == 0 {
		if _, err := s.log.Append(nil); err != nil {
			return fmt.Errorf("confirm the state log: %w", err)
		}
		return nil
	}
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
			return fmt.Errorf("append %d records at offset %d: %w", j-i, s.log.EndOffset(), err)
		}
		s.m.placed(&s.pend, i, j, first)
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
