package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"
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
	Membership  MemberState
	// LastContact is how long ago a Raft message arrived from the node (0 for this node); -1
	// when none has since this node started, or it cannot tell.
	LastContact time.Duration
	Replicas    int // state partitions it holds a replica of (not being removed)
	Leaders     int // state partitions it leads, as this node knows
	// Moving counts its replicas being added or removed.
	Moving int
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
	held, moving := map[uint64]int{}, map[uint64]int{}
	for p := range n.cfg.Partitions {
		for _, r := range n.replicasOf(p) {
			if r.State != ReplicaRemoving {
				held[r.Node]++
			}
			if r.State != ReplicaVoter {
				moving[r.Node]++
			}
		}
	}
	registered := n.meta.nodes()
	members := n.memberList()
	ids := slices.Sorted(maps.Keys(members))
	out := make([]NodeStatus, 0, len(ids))
	for _, id := range ids {
		st := NodeStatus{ID: id, RaftAddress: members[id].RaftAddress, GRPCAddress: registered[id].GRPCAddress,
			Membership: members[id].State, Replicas: held[id], Moving: moving[id], Leaders: leaders[id]}
		st.State, st.LastContact = n.peerState(id, members[id].RaftAddress)
		out = append(out, st)
	}
	return out
}

// peerState says whether this node hears from node id, and since when.
func (n *Node) peerState(id uint64, raftAddress string) (PeerState, time.Duration) {
	if id == n.cfg.NodeID {
		return PeerSelf, 0
	}
	if n.cfg.PeerContact == nil {
		return PeerUnreachable, -1
	}
	last, ok := n.cfg.PeerContact(raftAddress)
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
	if id, ok := n.meta.preferred(p); ok && n.holds(p, id) {
		return id
	}
	if lv := live(n.replicasOf(p)); len(lv) > 0 {
		return lv[0].Node
	}
	return 0
}

// TransferLeader makes node the preferred leader of partition p (0: the placement's again),
// records it in the cluster metadata, and waits until node leads p or ctx ends; it returns the
// partition's leader then. The balancer moves the leadership (see balance), so the preference
// lasts across restarts and failovers.
func (n *Node) TransferLeader(ctx context.Context, p int, node uint64) (uint64, error) {
	if p < 0 || p >= n.cfg.Partitions {
		return 0, fmt.Errorf("%w: %d, want [0, %d)", ErrNoSuchPartition, p, n.cfg.Partitions)
	}
	if node != 0 && !n.holds(p, node) {
		var on []uint64
		for _, r := range live(n.replicasOf(p)) {
			on = append(on, r.Node)
		}
		return 0, fmt.Errorf("%w: node %d does not hold state partition %d; its replicas are on nodes %v",
			ErrNotAReplica, node, p, on)
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

// Errors of the membership changes.
var (
	// ErrMembership is a membership change the cluster refused; the error says why.
	ErrMembership = errors.New("cluster: membership change refused")
	// ErrNotMember is the replacement of a node that is not a member (add it instead).
	ErrNotMember = errors.New("cluster: not a member")
	// ErrNotFormed is a membership change asked of a cluster that has not recorded its founding
	// members yet (its founders have not all met).
	ErrNotFormed = errors.New("cluster: the cluster has not recorded its founding members yet")
)

// AddNode adds node id, whose replication address is raftAddress, to the cluster, or, with
// replace, gives a member whose data directory was lost new replica ids in place of its old ones
// (Raft forbids a replica that forgot its log and votes to come back as itself). It returns once
// the change is recorded, with the node's replica id in the metadata's shard, which the node
// needs to start (Config.Join); the metadata's and the partitions' leaders then add the node's
// replicas, non-voting until they caught up, and move replicas onto it to balance the cluster.
// Adding a node again with the same address is not a change: it returns the same id.
func (n *Node) AddNode(ctx context.Context, id uint64, raftAddress string, replace bool) (uint64, error) {
	if id == 0 || id > maxNodeID {
		return 0, fmt.Errorf("%w: node id %d: want [1, %d]", ErrMembership, id, uint64(maxNodeID))
	}
	if err := checkHostPort(raftAddress); err != nil {
		return 0, fmt.Errorf("%w: the replication address of node %d: %v", ErrMembership, id, err)
	}
	// The checks below read this node's metadata replica, which may not have applied the latest
	// records yet (the founding members, a node just added): bring it up to date first.
	if err := n.readMetadata(ctx); err != nil {
		return 0, err
	}
	if len(n.meta.members()) == 0 {
		return 0, ErrNotFormed
	}
	op := opAdd
	if replace {
		op = opReplace
		m, ok := n.meta.member(id)
		if !ok {
			return 0, fmt.Errorf("%w: node %d; add it instead of replacing it", ErrNotMember, id)
		}
		if st, since := n.peerState(id, m.RaftAddress); st == PeerSelf || st == PeerUp {
			return 0, fmt.Errorf("%w: node %d was heard from %s ago: it runs; replace a node only once it is stopped and its data directory is lost",
				ErrMembership, id, since.Round(time.Millisecond))
		}
	}
	return n.changeMembers(ctx, memberCommand{Op: op, Node: id, RaftAddress: raftAddress})
}

// RemoveNode removes node id from the cluster: its replicas move to the other nodes (each new
// one catches up before the old one goes) and then it leaves the metadata's shard. It returns
// once the change is recorded; Nodes shows its progress, and the node is no longer listed once
// it is done. The node's process can be stopped then.
func (n *Node) RemoveNode(ctx context.Context, id uint64) error {
	_, err := n.changeMembers(ctx, memberCommand{Op: opRemove, Node: id})
	return err
}

func (n *Node) changeMembers(ctx context.Context, c memberCommand) (uint64, error) {
	res, err := n.proposeMetadata(ctx, metadataCommand{Member: &c})
	if err != nil {
		return 0, fmt.Errorf("cluster: record the membership change: %w", err)
	}
	if len(res.Data) > 0 {
		return 0, fmt.Errorf("%w: %s", ErrMembership, res.Data)
	}
	n.logger.Info("membership change recorded", zap.String("op", string(c.Op)), zap.Uint64("node", c.Node), zap.String("raft_address", c.RaftAddress))
	return res.Value, nil
}
