package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors of TransferLeader, for a request that names what the cluster does not have.
var (
	// ErrNoSuchPartition is a state partition outside [0, Partitions).
	ErrNoSuchPartition = errors.New("cluster: no such state partition")
	// ErrNotAReplica is a node that holds no replica of the partition.
	ErrNotAReplica = errors.New("cluster: the node holds no replica of the state partition")
)

// peerSilence is how long without a Raft message from a node makes it unreachable, as this node
// sees it: a node hears from each peer many times a second while they share partitions.
const peerSilence = 5 * time.Second

// PeerState is whether this node hears from another.
type PeerState int

// Peer states.
const (
	PeerSelf PeerState = iota + 1
	PeerUp
	PeerUnreachable
)

// NodeStatus is one node of the cluster as this node sees it.
type NodeStatus struct {
	ID          uint64
	GRPCAddress string // "" until the node has registered
	RaftAddress string
	State       PeerState
	// LastContact is how long ago a Raft message arrived from the node (0 for this node); -1
	// when none has since this node started, or it cannot tell.
	LastContact time.Duration
	Replicas    int // state partitions it holds a replica of
	Leaders     int // state partitions it leads, as this node knows
}

// Partitions returns the number of state partitions.
func (n *Node) Partitions() int { return n.cfg.Partitions }

// Nodes returns every member of the cluster, in id order.
func (n *Node) Nodes() []NodeStatus {
	leaders := map[uint64]int{}
	for p := range n.cfg.Partitions {
		if c := n.Coordinator(p); c.State == CoordinatorKnown {
			leaders[c.Node]++
		}
	}
	registered := n.meta.nodes()
	var out []NodeStatus
	for _, id := range n.placement.members {
		st := NodeStatus{ID: id, RaftAddress: n.cfg.InitialMembers[id], GRPCAddress: registered[id].GRPCAddress,
			Leaders: leaders[id], LastContact: -1}
		for p := range n.cfg.Partitions {
			if n.placement.holds(p, id) {
				st.Replicas++
			}
		}
		st.State, st.LastContact = n.peerState(id)
		out = append(out, st)
	}
	return out
}

// peerState says whether this node hears from node id, and since when.
func (n *Node) peerState(id uint64) (PeerState, time.Duration) {
	if id == n.cfg.NodeID {
		return PeerSelf, 0
	}
	if n.cfg.PeerContact == nil {
		return PeerUnreachable, -1
	}
	last, ok := n.cfg.PeerContact(n.cfg.InitialMembers[id])
	if !ok {
		return PeerUnreachable, -1
	}
	since := time.Since(last)
	if since < peerSilence {
		return PeerUp, since
	}
	return PeerUnreachable, since
}

// preferredLeader is the node that should lead partition p: the one an operator chose, while it
// holds a replica, else the placement's.
func (n *Node) preferredLeader(p int) uint64 {
	if id, ok := n.meta.preferred(p); ok && n.placement.holds(p, id) {
		return id
	}
	return n.placement.preferred(p)
}

// TransferLeader makes node the preferred leader of partition p (0: the placement's again),
// records it in the cluster metadata, and waits until node leads p or ctx ends; it returns the
// partition's leader then. The balancer moves the leadership (see balance), so the preference
// lasts across restarts and failovers.
func (n *Node) TransferLeader(ctx context.Context, p int, node uint64) (uint64, error) {
	if p < 0 || p >= n.cfg.Partitions {
		return 0, fmt.Errorf("%w: %d, want [0, %d)", ErrNoSuchPartition, p, n.cfg.Partitions)
	}
	if node != 0 && !n.placement.holds(p, node) {
		return 0, fmt.Errorf("%w: node %d does not hold state partition %d; its replicas are on nodes %v",
			ErrNotAReplica, node, p, n.placement.replicas(p))
	}
	if _, err := n.proposeMetadata(ctx, metadataCommand{Prefer: &p, PreferNode: node}); err != nil {
		return 0, fmt.Errorf("cluster: record the preferred leader of state partition %d: %w", p, err)
	}
	want := n.preferredLeader(p)
	tick := time.NewTicker(n.cfg.Timing.RTT)
	defer tick.Stop()
	for {
		c := n.Coordinator(p)
		if c.State == CoordinatorKnown && c.Node == want {
			return want, nil
		}
		select {
		case <-ctx.Done():
			return c.Node, fmt.Errorf("cluster: state partition %d is led by node %d, not yet by node %d (it takes over once its replica is caught up): %w",
				p, c.Node, want, ctx.Err())
		case <-tick.C:
		}
	}
}
