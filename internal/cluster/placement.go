package cluster

// placement decides which nodes hold the replicas of each state partition: partition p's
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

// preferred returns partition p's preferred leader.
func (pl placement) preferred(p int) uint64 { return pl.members[p%len(pl.members)] }
