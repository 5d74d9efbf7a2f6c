package shard

import (
	"go.uber.org/zap"
)

// syncer is the second goroutine of a serving shard. The shard goroutine writes each batch to
// the log and hands its operations over; the syncer makes the log durable past the batch (one
// Sync covers every batch written before it began, so batches queued behind a sync share the
// next one) and then answers the operations, in the order they were handed over. Meanwhile the
// shard goroutine applies and writes the next batches: its state runs ahead of the durable log,
// but no answer that depends on a record leaves before the record is durable.
//
// A failed sync fails the log for good (statelog's errors are sticky): every operation not yet
// durable is answered COORDINATOR_NOT_AVAILABLE, and failed is closed so that the shard
// goroutine reloads the log truncated to its durable end.
type syncer struct {
	log    stateLog
	logger *zap.Logger
	q      chan handover
	failed chan struct{} // closed at the first failed sync
	done   chan struct{} // closed when the goroutine has exited
	err    error         // the first failed sync; read by the shard goroutine after done
}

// handover is a batch given to the syncer: operations to answer once the log is durable up to
// end, and, for a barrier, a channel to close at that point.
type handover struct {
	ops     []*op
	end     int64
	barrier chan struct{}
}

// startSyncer starts the syncer of l; depth bounds the batches waiting for it (the shard
// goroutine waits when they are that many).
func startSyncer(logger *zap.Logger, l stateLog, depth int) *syncer {
	y := &syncer{
		log:    l,
		logger: logger,
		q:      make(chan handover, depth),
		failed: make(chan struct{}),
		done:   make(chan struct{}),
	}
	go y.run()
	return y
}

func (y *syncer) run() {
	defer close(y.done)
	for h := range y.q {
		if y.err == nil && y.log.DurableOffset() < h.end {
			if err := y.log.Sync(); err != nil {
				y.logger.Error("syncing the state log failed; reloading the state partition", zap.Error(err))
				y.err = err
				close(y.failed)
			}
		}
		durable := y.log.DurableOffset() >= h.end
		var r Result
		if !durable {
			why := "the state log is not durable past the operation"
			if y.err != nil {
				why = "syncing the state log failed: " + y.err.Error()
			}
			r = notAvailable("The coordinator is not available: " + why)
		}
		for _, o := range h.ops {
			if !durable {
				o.fail(r)
			}
			close(o.done)
		}
		if h.barrier != nil {
			close(h.barrier)
		}
	}
}

// stop waits until every batch handed over is answered and the goroutine has exited; it
// reports whether a sync failed.
func (y *syncer) stop() (failed bool) {
	close(y.q)
	<-y.done
	return y.err != nil
}
