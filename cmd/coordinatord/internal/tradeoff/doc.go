// Package tradeoff measures the snapshot-limit trade-off of the snapshot-frequency proposal
// ("Test Plan / Benchmark workstream"): for each value of the per-group limit
// share.snapshot.update.records.per.snapshot it runs a real shard on a real disk under a
// sustained write workload and reports what the limit costs and buys.
//
// # One run
//
// A run is one limit with cold-partition snapshots off or on. It opens a fresh shard (one state
// partition, its own log directory), initializes the workload's share partitions and then:
//
//  1. Stagger: share partition i receives ⌊i·limit/N⌋ writes, so that the N share partitions are
//     spread evenly over their snapshot cycles instead of snapshotting in lock-step, as real
//     share partitions are.
//  2. Warm-up: limit+1 round-robin rounds, after which every share partition has written at
//     least one snapshot chosen by the limit: the log is in its steady state.
//  3. Measurement: round-robin writes, as fast as possible or paced at a rate, for a number of
//     writes (by default one full snapshot cycle, N·(limit+1) writes) or a duration.
//  4. Observation tail: as many writes again, plus one segment's worth, during which the records
//     superseded in the measurement may see their segment become deletable.
//
// # Definitions (scenario 1, sustained write)
//
//   - Log growth: bytes appended to the log files during the measurement (the records, snapshots
//     and updates, with a length prefix each and a frame header per commit) per second and per
//     logical write (one WriteShareGroupState of one share partition).
//   - Write amplification: snapshot bytes ÷ update bytes (records alone) appended during the
//     measurement.
//   - Retained log: the log after pruning at the end of the run, after the observation tail (the log-start offset
//     moved to the shard's last redundant offset, as the prune job does): its bytes on disk and
//     records.
//   - Failover replay time: the shard is closed, the log pruned as above, and a new shard opened
//     on the same directory; the time from opening it to it being ACTIVE (every retained record
//     replayed). With DropCaches the page cache is dropped first, so the log is read from disk.
//
// # Definitions (scenario 2, pruning lag)
//
// A record of share partition k is superseded at offset s when k's next snapshot is written at
// offset s: from then on k's state no longer needs it. The segment holding the record becomes
// deletable at offset d when, after the record at d, the last redundant offset (the oldest
// latest snapshot over all share partitions) reaches the segment's end (the base offset of the
// next segment): moving the log-start offset there deletes the whole segment. The active
// segment is never deletable. The pruning lag of the record is d − s in offsets and
// t(d) − t(s) in seconds, t(x) being when offset x became durable. The lag is reported for the
// records superseded during the measurement, weighted by record; records whose segment was still
// not deletable at the end of the observation tail are counted separately ("pinned"): their lag
// is at least the time they have waited. The prune job's own period comes on top of the lag.
//
// With cold-partition snapshots on, the shard's timer re-snapshots every share partition whose
// latest snapshot is older than the cold interval (Kafka's snapshotColdPartitions), which bounds
// the lag in time whatever the limit; idle share partitions (IdleSharePartitions) are written once
// and never again, which without cold snapshots pins the last redundant offset for ever.
package tradeoff
