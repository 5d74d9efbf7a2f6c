package cluster

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lni/dragonboat/v4/config"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordinatord/coordinatord/internal/statelog"
)

// Config configures a Node.
type Config struct {
	// NodeID is this node's id, ≥ 1: its replica id in every Raft shard it is part of.
	NodeID uint64
	// ListenAddress is where this node listens for replication traffic (--raft-listen): its
	// address in InitialMembers, or one that reaches it (all interfaces, 0.0.0.0:PORT).
	ListenAddress string
	// InitialMembers are the founding members: node id → replication address, the same on
	// every founding node (--initial-cluster). It must name this node unless the node joins.
	InitialMembers map[uint64]string
	// RaftAddress is the replication address the other nodes dial for this node (empty: its
	// address in InitialMembers).
	RaftAddress string
	// Join, set for a node that joins a running cluster rather than founding one, is what the
	// cluster gave it when it was added. It matters only on the node's first start: a node
	// restarts with the replicas its engine holds.
	Join *Join
	// Dir is the directory of the Raft engine's own state (its log and snapshots).
	Dir string
	// Partitions is the number of state partitions.
	Partitions int
	// ReplicationFactor is the number of replicas of each state partition; a cluster of fewer
	// nodes replicates every partition on all of them.
	ReplicationFactor int
	// PartitionLog returns the directory and the log options of state partition p's log on
	// this node.
	PartitionLog func(p int) (dir string, opts statelog.Options)
	// ProposalTimeout bounds one proposal of a shard (its write timeout).
	ProposalTimeout time.Duration
	// Fatal is called when a replica's log fails under a committed entry, which the replica
	// can neither apply nor skip: the process must stop (nil: panic).
	Fatal func(error)
	// Timing is the Raft clock; the zero value is DefaultTiming.
	Timing Timing
	// GRPCAddress is the HOST:PORT this node gives clients (--advertised-listen); the cluster
	// metadata tells the other nodes.
	GRPCAddress string
	// Config applies the replicated dynamic configuration (nil: none).
	Config ConfigReplica
	// Registerer receives the cluster metrics (nil: not registered).
	Registerer prometheus.Registerer
	// Transport carries the Raft traffic between nodes (nil: dragonboat's TCP transport, which
	// has no connection bounds and no authentication of its own).
	Transport config.TransportFactory
	// PeerContact returns when a Raft message last arrived from the node at a replication
	// address, if one has (nil: not known). Nodes and the peer metrics report it.
	PeerContact func(raftAddress string) (time.Time, bool)
}

// Join is what a node added to a running cluster needs to start.
type Join struct {
	// MetaReplica is its replica id in the cluster metadata's Raft shard (AddNode's answer).
	MetaReplica uint64
}

// Timing is the Raft clock: a tick of RTT, heartbeats every HeartbeatTicks, an election after
// between ElectionTicks and twice that without hearing from a leader.
type Timing struct {
	RTT            time.Duration
	HeartbeatTicks uint64
	ElectionTicks  uint64
}

// DefaultTiming elects a new leader 1–2 s after the old one stopped answering: long enough that
// a loaded machine with several nodes on two cores does not call elections it does not need,
// short enough for a failover within the 3 s clients are promised at the 99th percentile.
var DefaultTiming = Timing{RTT: 20 * time.Millisecond, HeartbeatTicks: 5, ElectionTicks: 50}

// ParseInitialCluster parses --initial-cluster: comma-separated ID=HOST:PORT, ids ≥ 1 and
// unique, addresses unique.
func ParseInitialCluster(s string) (map[uint64]string, error) {
	members := map[uint64]string{}
	seen := map[string]uint64{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		idText, addr, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("member %q: want ID=HOST:PORT, such as 1=10.0.0.1:7072", item)
		}
		id, err := strconv.ParseUint(strings.TrimSpace(idText), 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("member %q: the id must be a whole number ≥ 1", item)
		}
		addr = strings.TrimSpace(addr)
		if err := checkHostPort(addr); err != nil {
			return nil, fmt.Errorf("member %q: %w", item, err)
		}
		if _, dup := members[id]; dup {
			return nil, fmt.Errorf("member id %d appears twice", id)
		}
		if other, dup := seen[addr]; dup {
			return nil, fmt.Errorf("members %d and %d have the same address %s", other, id, addr)
		}
		members[id], seen[addr] = addr, id
	}
	if len(members) == 0 {
		return nil, errors.New("no member: want ID=HOST:PORT,... such as 1=10.0.0.1:7072,2=10.0.0.2:7072,3=10.0.0.3:7072")
	}
	return members, nil
}

func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: want HOST:PORT", addr)
	}
	if host == "" {
		return fmt.Errorf("address %q: the host is missing (the other nodes dial it)", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("address %q: the port must be in [1, 65535]", addr)
	}
	return nil
}

// Validate checks the configuration and fills in the defaults of its zero values (Start calls
// it too).
func (c *Config) Validate() error {
	switch {
	case c.NodeID == 0 || c.NodeID > maxNodeID:
		return fmt.Errorf("cluster: node id %d: want [1, %d]", c.NodeID, uint64(maxNodeID))
	case c.Partitions <= 0:
		return fmt.Errorf("cluster: %d state partitions", c.Partitions)
	case c.ReplicationFactor <= 0:
		return fmt.Errorf("cluster: replication factor %d: want ≥ 1", c.ReplicationFactor)
	case c.PartitionLog == nil:
		return errors.New("cluster: no partition log locations")
	case c.Dir == "":
		return errors.New("cluster: no directory for the Raft engine")
	}
	if _, _, err := net.SplitHostPort(c.ListenAddress); err != nil {
		return fmt.Errorf("cluster: --raft-listen %q: want HOST:PORT", c.ListenAddress)
	}
	if _, ok := c.InitialMembers[c.NodeID]; !ok && c.Join == nil {
		return fmt.Errorf("cluster: --initial-cluster does not name this node (--node-id %d); it names %v", c.NodeID, c.memberIDs())
	}
	if c.RaftAddress == "" {
		c.RaftAddress = c.InitialMembers[c.NodeID]
	}
	if err := checkHostPort(c.RaftAddress); err != nil {
		return fmt.Errorf("cluster: this node's replication address: %w", err)
	}
	if c.Join != nil && nodeOf(c.Join.MetaReplica) != c.NodeID {
		return fmt.Errorf("cluster: metadata replica %d is not node %d's", c.Join.MetaReplica, c.NodeID)
	}
	if c.Timing == (Timing{}) {
		c.Timing = DefaultTiming
	}
	if c.Timing.RTT < time.Millisecond || c.Timing.HeartbeatTicks == 0 || c.Timing.ElectionTicks <= 2*c.Timing.HeartbeatTicks {
		return fmt.Errorf("cluster: Raft timing %+v: want a tick ≥ 1 ms and an election timeout over twice the heartbeat", c.Timing)
	}
	if c.ProposalTimeout <= 0 {
		c.ProposalTimeout = 5 * time.Second
	}
	return nil
}

// maxNodeID is the largest node id: a replica id holds it in its low 32 bits.
const maxNodeID = 1<<32 - 1

func (c *Config) memberIDs() []uint64 {
	ids := make([]uint64, 0, len(c.InitialMembers))
	for id := range c.InitialMembers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
