// Package datadir owns the layout of the data directory (--data-dir): every path under it is
// named here, and here is decided whether a directory is fit for a server to start on.
//
// # Layout
//
//	<data-dir>/
//	|-- LOCK                             flock held while a server runs on the directory
//	|-- config/
//	|   |-- store                        the config store: a snapshot and the changes since
//	|   |                                (format: package groupcfg)
//	|   `-- store.tmp                    a rewrite of the store in progress
//	|-- __share_group_state-0/           state partition 0's log (format: package statelog)
//	|   |-- 00000000000000000000-0000000000000001.seg
//	|   |-- start-offset
//	|   |-- clean-end
//	|   `-- LOCK
//	|-- __share_group_state-1/
//	|   ...
//	`-- __share_group_state-<N-1>/       N = share.coordinator.state.topic.num.partitions
//
// A node of a cluster (--initial-cluster) keeps no config store: its configuration is the
// cluster's, replicated. It keeps the Raft engine's state in raft/, and in each partition
// directory it holds a replica of, next to the log, what the replica applied (package raftlog):
//
//	<data-dir>/
//	|-- LOCK
//	|-- raft/                            the Raft engine's log, snapshots and node identity
//	`-- __share_group_state-<p>/         the replica's log, as above, plus
//	    |-- applied                      the Raft index the log holds durably, with its end offset
//	    `-- recovering                   present while the log is replaced by the leader's
//
// A state partition's directory is PartitionPrefix followed by the partition number in decimal,
// Kafka's topic-partition directory layout for __share_group_state. The names are part of the
// format: operators back up, restore, inspect (dump-log) and repair (repair-log) partitions by
// them, and a server finds its state by them.
//
// # Starting on a data directory
//
// A server takes the directory in this order, before any partition loads:
//
//  1. Check refuses what cannot be a data directory (a file, a symbolic link to nothing) and
//     warns about one that does not exist yet; CheckMode refuses a single node's directory to a
//     cluster node and a cluster node's to a single node.
//  2. Lock creates the directory durably and takes its lock: a second server is refused before
//     it reads anything.
//  3. If HasConfigStore says there is no config store yet, CheckPartitionCount holds the
//     configured partition count to the partition directories already there, and
//     CheckMissingPartitions refuses a missing partition directory while another holds records
//     (a partial restore).
//  4. The config store is opened at ConfigStore; it records the partition count on first start
//     and refuses another later. If it was there already, CheckMissingPartitions runs now,
//     against the recorded count.
//  5. CreatePartitionDirs creates every partition's directory, durably, so that none can be
//     missing next to another's acknowledged records at the next start.
//
// The refusals name the directory as the operator gave it, --data-dir.
//
// Nothing else knows the layout: the config store (package groupcfg) and each partition's shard
// and log (packages shard, statelog) are given their paths.
package datadir
