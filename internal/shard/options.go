package shard

import (
	"time"
)

// Defaults for the zero values of Options.
const (
	DefaultWriteTimeout    = 5 * time.Second // share.coordinator.write.timeout.ms
	DefaultMaxBatchRecords = 4096
	DefaultMaxBatchBytes   = 4 << 20
	DefaultQueueSize       = 8192
	DefaultRetryBackoff    = 100 * time.Millisecond
	DefaultMaxRetryBackoff = 30 * time.Second
)

// Options configures a Shard. Zero values mean the defaults.
type Options struct {
	Partition            int              // state partition index (metrics label)
	AppendLingerMs       int              // -1 adaptive (drain what is queued), 0 flush each op, >0 linger up to that long
	WriteTimeout         time.Duration    // commit wait; exceeded → COORDINATOR_NOT_AVAILABLE (records stay applied); 0 → 5 s
	PruneInterval        time.Duration    // 0 → no prune timer (Prune can still be called)
	ColdSnapshotInterval time.Duration    // 0 → no cold-snapshot timer; also the age that makes a key cold (0: any age)
	MaxBatchRecords      int              // group-commit cap (0 → 4096)
	MaxBatchBytes        int              // group-commit cap (0 → 4 MiB)
	Metrics              *Metrics         // shared by all shards; nil → not recorded
	Now                  func() time.Time // clock for record timestamps and coldness (nil → time.Now)

	// QueueSize bounds the operations waiting for the shard (0 → 8192); a submitter waits for room.
	QueueSize int
	// RetryBackoff is the first wait before a failed load is retried (0 → 100 ms); it doubles up to
	// MaxRetryBackoff (0 → 30 s). A load that failed on log corruption, on a failed file-system
	// sync or with statelog.ErrNotDurable is not retried.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
}

func (o Options) withDefaults() Options {
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.MaxBatchRecords <= 0 {
		o.MaxBatchRecords = DefaultMaxBatchRecords
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = DefaultRetryBackoff
	}
	if o.MaxRetryBackoff <= 0 {
		o.MaxRetryBackoff = DefaultMaxRetryBackoff
	}
	if o.MaxRetryBackoff < o.RetryBackoff {
		o.MaxRetryBackoff = o.RetryBackoff
	}
	if o.AppendLingerMs < -1 {
		o.AppendLingerMs = -1
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}
