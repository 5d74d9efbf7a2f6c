// Package raftlog keeps one replica of a state partition's log in a Raft shard: the dragonboat
// state machine (StateMachine) that appends the records of every committed entry to the
// replica's own statelog, and the view of that log its shard uses (Replica) to load it, follow
// what other leaders append and propose its own records.
//
// # Entries and agreement
//
// A state partition's leader proposes each group commit as one entry: its records and the end
// offset of the log it built them on (the expected end). A replica appends an entry's records
// only if its log ends exactly there, and refuses the entry otherwise, so that records decided
// on one state never land on another: a deposed leader's entry, or one built before records
// it had not followed, changes no replica. Since every replica applies the same committed
// entries, in the same order, to logs that start alike, every replica refuses and appends the
// same ones, and their logs stay identical, offset for offset.
//
// A cluster import proposes entries of no replica (ImportEntry): the first seeds logs that were
// never written, at the source's log-start offset, the rest append as a leader's would.
//
// # Durability
//
// An entry is acknowledged once Raft committed it, that is once it is in the Raft logs of a
// majority of replicas, on disk. The replica's statelog therefore defers its syncs
// (statelog.Options.DeferSync): a Sync, asked for by dragonboat before each of its snapshots or
// made by the replica every SyncInterval, syncs the statelog and then records the index of the
// last entry applied together with the log's end offset in the applied file. dragonboat
// compacts its Raft log only up to a synced index, and a replica that restarts reopens its
// statelog truncated to the recorded end and has the entries after the recorded index applied
// again. The log-start offset never moves past the synced end, so the truncation never cuts
// below it.
//
// # Snapshots
//
// A replica too far behind for the leader's Raft log receives the leader's statelog, from its
// log-start offset, as a Raft snapshot, and replaces its own with it (statelog.Reset, then the
// records at their offsets). The recovering file marks the replacement until it is complete;
// a replica that finds it when it starts empties its log and has the snapshot sent again.
package raftlog
