package shard

import "time"

// Test hooks, as jobDone (jobFinished) is one. Each is a channel that a test sets before the shard
// goroutine starts (start's prepare) and that is nil otherwise; it is signalled without blocking,
// so an unset or full hook costs a nil check and never holds the shard or a caller up.

// opQueued tells a test that an operation entered the queue. The hook holds one signal at most:
// a test that waits for the queue to reach a length checks it again after each signal.
func (s *Shard) opQueued() {
	if s.queued != nil {
		select {
		case s.queued <- struct{}{}:
		default:
		}
	}
}

// waiting tells a test how long the shard waits before it loads the log again (-1: until it is
// closed), when a load failed or before a reload after failed appends.
func (s *Shard) waiting(d time.Duration) {
	if s.waits != nil {
		select {
		case s.waits <- d:
		default:
		}
	}
}
