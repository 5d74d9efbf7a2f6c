package cluster

// placement is the founding placement, which the cluster metadata records on the cluster's
// first start (membership.go then changes it): partition p's
// replicas are the factor members after and including the (p mod n)-th of the n members in id
// order, and the first of them is its preferred leader. Every founding node computes the same
// placement from --initial-cluster. Preferred leaders take turns through the members, so with 3
// nodes and 50 partitions each node prefers 16 or 17.
type placement struct {
	members []uint64 // in id order
	factor  int
}

func newPlacement(members []uint64, factor int) placement {
	return placement{members: members, factor: min(factor, len(members))}
}

// replicas returns partition p's replica node ids, its preferred leader first.
func (pl placement) replicas(p int) []uint64 {
	n := len(pl.members)
	out := make([]uint64, pl.factor)
	for i := range out {
		out[i] = pl.members[(p+i)%n]
	}
	return out
}

// holds reports whether node id holds a replica of partition p.
func (pl placement) holds(p int, id uint64) bool {
	for _, r := range pl.replicas(p) {
		if r == id {
			return true
		}
	}
	return false
}

// replicasOf returns the replicas of partition p, the preferred leader first: the metadata's,
// or the founding placement's until the metadata records it.
func (n *Node) replicasOf(p int) []Replica {
	if rs := n.meta.replicas(p); rs != nil {
		return rs
	}
	if len(n.founded.members) == 0 {
		return nil
	}
	return foundingReplicas(n.founded, p)
}

// replicaOn returns node's live replica of partition p.
func (n *Node) replicaOn(p int, node uint64) (Replica, bool) {
	return onNode(live(n.replicasOf(p)), node)
}

// holds reports whether node holds a live replica of partition p.
func (n *Node) holds(p int, node uint64) bool {
	_, ok := n.replicaOn(p, node)
	return ok
}

// memberList returns the cluster's members: the metadata's, or the founding members until the
// metadata records them.
func (n *Node) memberList() map[uint64]Member {
	if m := n.meta.members(); len(m) > 0 {
		return m
	}
	out := map[uint64]Member{}
	for id, addr := range n.cfg.InitialMembers {
		out[id] = Member{RaftAddress: addr, State: MemberActive, MetaReplica: id, MetaReady: true}
	}
	return out
}
