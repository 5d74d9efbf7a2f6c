// Package cluster runs a coordinatord node of a cluster: the Raft engine (dragonboat v4, one Raft
// shard per state partition and one for the cluster's metadata), the replicas of the state
// partitions placed on this node, and what the node knows of each partition's leadership.
//
// # Placement and leadership
//
// The founding placement follows from --initial-cluster: partition p's replicas are the
// replication-factor members after and including the (p mod n)-th of the n members in id order,
// the first of them its preferred leader; the metadata records it on the cluster's first start.
// From then on the metadata holds the members and every partition's replicas, and membership
// changes (AddNode, RemoveNode, a replacement) are planned inside the metadata state machine, so
// that every node plans alike: replicas placed on new nodes, moved off removed ones, spread until
// no two nodes hold more than one apart, preferred leaderships likewise (membership.go). The
// partitions' leaders carry each plan out with Raft configuration changes, a new replica
// non-voting until it caught up; the nodes start and stop their replicas to match, and tell a
// ReplicaWatcher (reconcile.go). A replica's Raft id is its node id plus a generation, so that no
// id is used twice. A node starts the replicas on its disk, or its founding ones (Start), and
// follows the membership from Run; a replica whose log cannot be opened stays stopped, its partition failed on this node
// while the others serve it. dragonboat reports leader changes; a replica that won an election
// becomes Leading only once a read index showed that it applied everything committed before
// (Role.Confirming until then), so that its shard never builds on a state that misses a
// committed record. A caught-up preferred leader asks for its partition through the metadata,
// in the current leader's term, and that leader transfers the leadership: leaders spread evenly
// once all nodes are up, and again after one returns. TransferLeaderships empties a node of its
// leaderships before a planned stop.
//
// # The shard's log
//
// Partition.ShardLog is the shard's LogOpener for the replica (package raftlog holds the state
// machine and the log's format): the shard loads the replica's log, follows the records other
// leaders append while it does not lead, and appends through a proposal while it does. A node
// that holds no replica of a partition (more nodes than the replication factor) answers its keys
// with RemotePartition, naming the leader that partition's leader last announced.
//
// # Metadata
//
// The metadata shard, replicated on every member (voters; a joining node's replica is
// non-voting until it caught up), holds the membership, the nodes' addresses (each
// node records its own gRPC address, so that FindCoordinator on any node can name a partition's
// leader), the number of state partitions recorded on the cluster's first start (RecordPartitions:
// every node must use it, since it decides which partition a key belongs to), the leadership
// announcements and requests above, and the dynamic configuration, which a ConfigReplica (the
// config manager) applies on every node in commit order.
//
// # Engine
//
// Raft ticks every 20 ms (Timing); heartbeats go every 5 ticks and an election starts after 50 to
// 100 ticks without a leader, with CheckQuorum (a leader cut off from a majority steps down) and
// PreVote. The log store's shard counts (execShards, logDBShards) are fixed when a node first
// starts. dragonboat's own logs go to the node's logger, under "raft".
package cluster
