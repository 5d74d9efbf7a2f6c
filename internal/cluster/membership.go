package cluster

import (
	"cmp"
	"fmt"
	"slices"

	sm "github.com/lni/dragonboat/v4/statemachine"
)

// The cluster's membership lives in its metadata: the member nodes and, for every state
// partition, the replicas that should hold it. Changes are decided inside the metadata state
// machine, so every node computes the same plan from the same commands; the partitions' leaders
// and the metadata's leader then carry each plan out with Raft configuration changes (see
// reconcile.go), and the nodes start and stop their replicas to match.
//
// A replica's Raft identity is its node id in the low 32 bits and a generation in the high
// ones: the founding replicas have generation 0 (their id is the node id), every replica placed
// later a new generation. Raft forbids a replica id that was removed from a shard to join it
// again, and a replica that lost its disk must not vote as the one it was, so an id is never
// reused.

// MemberState is where a node is in its membership.
type MemberState string

// Member states.
const (
	// MemberJoining: its metadata replica is being added, as a non-voting replica first.
	MemberJoining MemberState = "joining"
	// MemberActive: a voter of the metadata; partitions are placed on it.
	MemberActive MemberState = "active"
	// MemberRemoving: its replicas move to the other nodes; then it leaves the metadata.
	MemberRemoving MemberState = "removing"
)

// Member is one node of the cluster as the metadata records it.
type Member struct {
	RaftAddress string      `json:"raft_address"`
	State       MemberState `json:"state"`
	// MetaReplica is the node's replica id in the metadata's Raft shard; MetaReady is set once
	// that replica caught up as a non-voting one.
	MetaReplica uint64 `json:"meta_replica"`
	MetaReady   bool   `json:"meta_ready,omitempty"`
	// Retired are metadata replica ids of this node's earlier incarnations (before its data
	// directory was lost), still to delete from the metadata's shard.
	Retired []uint64 `json:"retired,omitempty"`
}

// ReplicaState is where a partition's replica is in its life.
type ReplicaState string

// Replica states.
const (
	// ReplicaAdding: to be added as a non-voting replica, and catching up.
	ReplicaAdding ReplicaState = "adding"
	// ReplicaReady: caught up; to be made a voter.
	ReplicaReady ReplicaState = "ready"
	// ReplicaVoter: a voting member of the partition's Raft shard.
	ReplicaVoter ReplicaState = "voter"
	// ReplicaRemoving: to be removed, once every other replica of the partition is a voter.
	ReplicaRemoving ReplicaState = "removing"
)

// Replica is one replica of a state partition.
type Replica struct {
	Node  uint64       `json:"node"`
	ID    uint64       `json:"id"`
	State ReplicaState `json:"state"`
}

// replicaID is the Raft replica id of generation gen on node.
func replicaID(node uint64, gen uint64) uint64 { return gen<<32 | node }

// nodeOf is the node of Raft replica id.
func nodeOf(replica uint64) uint64 { return replica & (1<<32 - 1) }

// live returns the replicas that are not being removed, in order (the preferred leader first).
func live(rs []Replica) []Replica {
	var out []Replica
	for _, r := range rs {
		if r.State != ReplicaRemoving {
			out = append(out, r)
		}
	}
	return out
}

// settled reports whether every replica of rs is a voter: no change of the partition is under
// way.
func settled(rs []Replica) bool {
	for _, r := range rs {
		if r.State != ReplicaVoter {
			return false
		}
	}
	return true
}

func onNode(rs []Replica, node uint64) (Replica, bool) {
	for _, r := range rs {
		if r.Node == node {
			return r, true
		}
	}
	return Replica{}, false
}

// planner changes the placement of the metadata state it holds. Its decisions depend only on the
// state, so every node makes the same ones.
type planner struct{ st *metadataState }

func (pl planner) newReplica(node uint64) Replica {
	pl.st.NextGen++
	return Replica{Node: node, ID: replicaID(node, pl.st.NextGen), State: ReplicaAdding}
}

// hosts returns the nodes replicas may be placed on, in id order.
func (pl planner) hosts() []uint64 {
	var out []uint64
	for id, m := range pl.st.Members {
		if m.State != MemberRemoving {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// load counts the live replicas, and the preferred leaderships, on each host.
func (pl planner) load(hosts []uint64) (replicas, leaders map[uint64]int) {
	replicas, leaders = map[uint64]int{}, map[uint64]int{}
	for _, id := range hosts {
		replicas[id], leaders[id] = 0, 0
	}
	for p := range pl.st.NumPartitions {
		for i, r := range live(pl.st.Replicas[p]) {
			replicas[r.Node]++
			if i == 0 {
				leaders[r.Node]++
			}
		}
	}
	return replicas, leaders
}

// leastLoaded returns the host with the fewest replicas that holds none of rs (ties: the lower
// id), and false when every host holds one.
func leastLoaded(hosts []uint64, load map[uint64]int, rs []Replica) (uint64, bool) {
	var best uint64
	found := false
	for _, id := range hosts {
		if _, held := onNode(rs, id); held {
			continue
		}
		if !found || load[id] < load[best] {
			best, found = id, true
		}
	}
	return best, found
}

// replan brings every partition back to factor live replicas on distinct hosts, moves replicas
// off nodes being removed, then moves replicas from the most to the least loaded hosts until no
// two differ by more than one, and finally spreads the preferred leaderships the same way. A
// moved replica takes the place of the one it replaces in the order, and the replaced one stays,
// removing, until its successor is a voter.
func (pl planner) replan(factor int) {
	hosts := pl.hosts()
	if len(hosts) == 0 {
		return
	}
	factor = min(factor, len(hosts))
	load, _ := pl.load(hosts)
	for p := range pl.st.NumPartitions {
		rs := pl.st.Replicas[p]
		for i, r := range rs {
			if r.State == ReplicaRemoving || pl.st.Members[r.Node].State != MemberRemoving {
				continue
			}
			to, ok := leastLoaded(hosts, load, rs)
			if !ok {
				continue
			}
			rs[i].State = ReplicaRemoving
			rs = slices.Insert(rs, i, pl.newReplica(to))
			load[to]++
		}
		for len(live(rs)) < factor {
			to, ok := leastLoaded(hosts, load, rs)
			if !ok {
				break
			}
			rs = append(rs, pl.newReplica(to))
			load[to]++
		}
		pl.st.Replicas[p] = rs
	}
	pl.spreadReplicas(hosts, load)
	pl.spreadLeaders(hosts)
}

// spreadReplicas moves one replica at a time from the most loaded host to the least loaded one,
// from the first partition that has one to move and is not changing already.
func (pl planner) spreadReplicas(hosts []uint64, load map[uint64]int) {
	for range pl.st.NumPartitions * len(hosts) {
		most := slices.MaxFunc(hosts, func(a, b uint64) int { return cmp.Or(cmp.Compare(load[a], load[b]), cmp.Compare(b, a)) })
		least := slices.MinFunc(hosts, func(a, b uint64) int { return cmp.Or(cmp.Compare(load[a], load[b]), cmp.Compare(a, b)) })
		if load[most]-load[least] <= 1 || !pl.move(most, least) {
			return
		}
		load[most]--
		load[least]++
	}
}

// move replaces from's replica of the first settled partition that from holds and to does not.
func (pl planner) move(from, to uint64) bool {
	for p := range pl.st.NumPartitions {
		rs := pl.st.Replicas[p]
		if !settled(rs) {
			continue
		}
		if _, held := onNode(rs, to); held {
			continue
		}
		i := slices.IndexFunc(rs, func(r Replica) bool { return r.Node == from })
		if i < 0 {
			continue
		}
		rs[i].State = ReplicaRemoving
		pl.st.Replicas[p] = slices.Insert(rs, i, pl.newReplica(to))
		return true
	}
	return false
}

// spreadLeaders reorders partitions' live replicas until no partition has a replica whose host
// prefers to lead at least two partitions fewer than the partition's preferred leader does.
func (pl planner) spreadLeaders(hosts []uint64) {
	_, leaders := pl.load(hosts)
	for range pl.st.NumPartitions + 1 {
		swapped := false
		for p := range pl.st.NumPartitions {
			rs := pl.st.Replicas[p]
			first := slices.IndexFunc(rs, func(r Replica) bool { return r.State != ReplicaRemoving })
			if first < 0 {
				continue
			}
			for j := first + 1; j < len(rs); j++ {
				if rs[j].State == ReplicaRemoving || leaders[rs[first].Node]-leaders[rs[j].Node] < 2 {
					continue
				}
				leaders[rs[first].Node]--
				leaders[rs[j].Node]++
				rs[first], rs[j] = rs[j], rs[first]
				swapped = true
				break
			}
		}
		if !swapped {
			return
		}
	}
}

// foundingReplicas returns the founding placement as replicas: voters whose ids are their nodes'.
func foundingReplicas(pl placement, p int) []Replica {
	var out []Replica
	for _, id := range pl.replicas(p) {
		out = append(out, Replica{Node: id, ID: id, State: ReplicaVoter})
	}
	return out
}

// memberCommand is one membership change, committed to the metadata.
type memberCommand struct {
	Op          memberOp `json:"op"`
	Node        uint64   `json:"node"`
	RaftAddress string   `json:"raft_address,omitempty"`
	Partition   int      `json:"partition,omitempty"`
	Replica     uint64   `json:"replica,omitempty"`
}

type memberOp string

// The membership changes. Operators ask for the first three; the nodes that carry the changes
// out record each step with the others.
const (
	opAdd            memberOp = "add"     // a new node
	opReplace        memberOp = "replace" // a member that lost its data directory, under new replica ids
	opRemove         memberOp = "remove"
	opMetaReady      memberOp = "meta_ready"      // the node's metadata replica caught up
	opActive         memberOp = "active"          // it is a voter of the metadata
	opRetired        memberOp = "retired"         // an earlier incarnation's metadata replica was deleted
	opDropped        memberOp = "dropped"         // a removed node left the metadata
	opReplicaReady   memberOp = "replica_ready"   // a partition's new replica caught up
	opReplicaVoter   memberOp = "replica_voter"   // it is a voter
	opReplicaDropped memberOp = "replica_dropped" // a removed replica left the partition's shard
)

// found records the founding members and their placement, on the cluster's first start.
func (st *metadataState) found(founders map[uint64]string, factor int) {
	if len(founders) == 0 {
		return
	}
	ids := make([]uint64, 0, len(founders))
	for id, addr := range founders {
		ids = append(ids, id)
		st.Members[id] = Member{RaftAddress: addr, State: MemberActive, MetaReplica: id, MetaReady: true}
	}
	slices.Sort(ids)
	st.Factor = factor
	pl := newPlacement(ids, factor)
	for p := range st.NumPartitions {
		st.Replicas[p] = foundingReplicas(pl, p)
	}
}

// refused is the result of a membership change the metadata did not make: Data says why.
func refused(format string, args ...any) sm.Result {
	return sm.Result{Data: []byte(fmt.Sprintf(format, args...))}
}

// applyMember applies one membership change. For add and replace, the result's Value is the
// node's metadata replica id; a change that cannot be made leaves the state as it was and says
// why in the result's Data.
func (st *metadataState) applyMember(c memberCommand) sm.Result {
	if st.NumPartitions == 0 || len(st.Members) == 0 {
		return refused("the cluster has not recorded its founding members yet")
	}
	m, exists := st.Members[c.Node]
	pl := planner{st: st}
	switch c.Op {
	case opAdd:
		if exists {
			if m.RaftAddress == c.RaftAddress && m.State != MemberRemoving {
				return sm.Result{Value: m.MetaReplica} // asked again
			}
			return refused("node %d is a member already (replication address %s, %s); to bring it back after its data directory was lost, replace it",
				c.Node, m.RaftAddress, m.State)
		}
		if other, taken := st.memberAt(c.RaftAddress); taken {
			return refused("node %d has the replication address %s already", other, c.RaftAddress)
		}
		st.NextGen++
		st.Members[c.Node] = Member{RaftAddress: c.RaftAddress, State: MemberJoining, MetaReplica: replicaID(c.Node, st.NextGen)}
		pl.replan(st.Factor)
		return sm.Result{Value: st.Members[c.Node].MetaReplica}
	case opReplace:
		if !exists {
			return refused("node %d is not a member; add it instead", c.Node)
		}
		if m.State == MemberRemoving {
			return refused("node %d is being removed", c.Node)
		}
		st.NextGen++
		m.Retired = append(m.Retired, m.MetaReplica)
		m.MetaReplica, m.MetaReady, m.State, m.RaftAddress = replicaID(c.Node, st.NextGen), false, MemberJoining, c.RaftAddress
		st.Members[c.Node] = m
		st.renew(c.Node)
		return sm.Result{Value: m.MetaReplica}
	case opRemove:
		if !exists {
			return refused("node %d is not a member", c.Node)
		}
		if m.State != MemberRemoving {
			if hosts := len(pl.hosts()) - 1; hosts < min(st.Factor, len(st.Members)) {
				return refused("removing node %d would leave %d nodes for a replication factor of %d: add a node first", c.Node, hosts, st.Factor)
			}
			m.State = MemberRemoving
			st.Members[c.Node] = m
			pl.replan(st.Factor)
		}
		return sm.Result{}
	}
	return st.applyStep(c, m, exists)
}

// applyStep records one step of a change under way.
func (st *metadataState) applyStep(c memberCommand, m Member, exists bool) sm.Result {
	switch c.Op {
	case opMetaReady:
		if exists && m.MetaReplica == c.Replica {
			m.MetaReady = true
		}
	case opActive:
		if exists && m.MetaReplica == c.Replica && m.State == MemberJoining {
			m.State = MemberActive
		}
	case opRetired:
		m.Retired = slices.DeleteFunc(m.Retired, func(id uint64) bool { return id == c.Replica })
	case opDropped:
		if exists && m.State == MemberRemoving && st.holdsNone(c.Node) {
			delete(st.Members, c.Node)
			delete(st.Nodes, c.Node)
		}
		return sm.Result{}
	case opReplicaReady, opReplicaVoter, opReplicaDropped:
		st.replicaStep(c)
		return sm.Result{}
	default:
		return refused("unknown membership change %q", c.Op)
	}
	if exists {
		st.Members[c.Node] = m
	}
	return sm.Result{}
}

func (st *metadataState) replicaStep(c memberCommand) {
	rs := st.Replicas[c.Partition]
	i := slices.IndexFunc(rs, func(r Replica) bool { return r.ID == c.Replica })
	if i < 0 {
		return
	}
	switch {
	case c.Op == opReplicaReady && rs[i].State == ReplicaAdding:
		rs[i].State = ReplicaReady
	case c.Op == opReplicaVoter && (rs[i].State == ReplicaAdding || rs[i].State == ReplicaReady):
		rs[i].State = ReplicaVoter
	case c.Op == opReplicaDropped && rs[i].State == ReplicaRemoving:
		st.Replicas[c.Partition] = slices.Delete(rs, i, i+1)
		if id, ok := st.Preferred[c.Partition]; ok && id == nodeOf(c.Replica) {
			delete(st.Preferred, c.Partition)
		}
	}
}

// renew gives node's replicas new ids: each old one is removed once its successor, on the same
// node, is a voter.
func (st *metadataState) renew(node uint64) {
	for p := range st.NumPartitions {
		rs := st.Replicas[p]
		for i := 0; i < len(rs); i++ {
			if rs[i].Node != node || rs[i].State == ReplicaRemoving {
				continue
			}
			rs[i].State = ReplicaRemoving
			st.NextGen++
			rs = slices.Insert(rs, i, Replica{Node: node, ID: replicaID(node, st.NextGen), State: ReplicaAdding})
			i++
		}
		st.Replicas[p] = rs
	}
}

func (st *metadataState) memberAt(raftAddress string) (uint64, bool) {
	for id, m := range st.Members {
		if m.RaftAddress == raftAddress {
			return id, true
		}
	}
	return 0, false
}

// holdsNone reports whether node holds no replica of any partition.
func (st *metadataState) holdsNone(node uint64) bool {
	for _, rs := range st.Replicas {
		if _, held := onNode(rs, node); held {
			return false
		}
	}
	return true
}
