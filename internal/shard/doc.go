// Package shard is Kafka's share coordinator shard for one state partition of coordinatord: the
// share-state machine (Kafka's ShareCoordinatorShard) on top of the log that holds the
// partition's records, run by a single goroutine.
//
// # Operations
//
// Initialize, Read, Write, Delete and ReadSummary behave as Kafka's ShareCoordinatorShard: the
// same validation order, error codes and messages, the same record choice (an update, or a
// snapshot once a key has had Provider.SnapshotUpdateRecordsPerSnapshot(group) updates since its
// last snapshot, the limit read at the moment of each decision), the same batch combining and the
// same replay rules. Deliberate differences, all documented where they are made: no metadata checks
// (a standalone coordinator has no cluster metadata); INVALID_REQUEST for malformed writes Kafka
// would store (start offset or delivery complete count below -1, a state batch with a negative
// first offset, first > last, a delivery state outside {0, 1, 2, 4} or a negative delivery count);
// and the last redundant offset kept in O(1) per snapshot instead of a scan.
//
// # Commit model
//
// Operations wait in a bounded queue. The shard goroutine takes one, then drains more according to
// AppendLingerMs (-1: whatever is already queued; 0: none; >0: keep collecting up to that long),
// capped by MaxBatchRecords and MaxBatchBytes. It applies them in order against the current state
// (later operations see earlier ones' effects, as Kafka's uncommitted timeline state), appends all
// their records as one batch of the log (records past the caps go in further batches), and only
// then answers every operation of the batch, including reads and summaries, which therefore never
// return state that is not durable; a batch without records waits for the log to confirm that the
// shard holds all of it. The offsets of the records, which the offsets manager keeps for pruning,
// are learned from the append.
//
// # The log
//
// The shard reads and appends through two small interfaces, Log and LogOpener: LocalLog, a
// statelog on one node, or a replica's view of a replicated log. The log decides, by the error it
// returns, what the shard does after a failure (Action documents the whole table). If an append
// fails, every operation of the batch gets COORDINATOR_NOT_AVAILABLE, and the shard drops its
// state and loads the log again before serving (the log cuts the unacknowledged batch off);
// meanwhile operations get COORDINATOR_LOAD_IN_PROGRESS. A load that fails leaves the shard
// Failed (COORDINATOR_NOT_AVAILABLE with the cause) and is retried with exponential backoff
// (RetryBackoff up to MaxRetryBackoff), unless the log says no retry can help: a damaged log
// needs an operator's repair, and a failed sync of the file system (LocalLog's SyncGroup), or a
// load that could not sync what it found, needs the page cache dropped and the process
// restarted. A log that fails while the shard is idle (LogOpener.Failed: the SyncGroup's failure)
// fails the shard at once. An operation whose commit takes longer than WriteTimeout answers
// COORDINATOR_NOT_AVAILABLE; its records stay applied, as in Kafka.
//
// The prune job (Kafka's setupRecordPruning) and the cold-partition snapshot job (Kafka's
// snapshotColdPartitions) run on the shard goroutine between batches every PruneInterval and
// ColdSnapshotInterval, and on demand through Prune and SnapshotColdPartitions. Kafka writes all
// of a cold-snapshot job's records as one operation; here the job commits them at most one group
// commit's worth (MaxBatchRecords, MaxBatchBytes) at a time, and operations queued meanwhile are
// committed between those chunks, so that a state partition of many keys neither stalls its
// writes past the write timeout nor holds every snapshot in memory at once. A key that an
// operation between chunks deleted or gave a fresh snapshot is skipped; the others get a copy of
// their state as it is when their chunk is written.
//
// # Records
//
// The shard writes and replays Kafka's records of __share_group_state, whose encoding and on-disk
// layout package record defines. Replay skips records of unknown type with a warning and fails on
// an unknown value version, as Kafka's loader does.
package shard
