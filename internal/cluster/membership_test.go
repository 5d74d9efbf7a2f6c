package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// foundedState is the metadata of a cluster founded by nodes 1..nodes.
func foundedState(nodes, partitions, factor int) *metadataState {
	st := &metadataState{NumPartitions: partitions, Members: map[uint64]Member{}, Replicas: map[int][]Replica{}, Nodes: map[uint64]NodeInfo{}}
	founders := map[uint64]string{}
	for id := 1; id <= nodes; id++ {
		founders[uint64(id)] = fmt.Sprintf("10.0.0.%d:7072", id)
	}
	st.found(founders, factor)
	return st
}

// checkPlacement checks that every partition has factor live replicas on distinct hosts that
// are not being removed, that no two hosts hold more than one replica apart, and likewise for
// the preferred leaders.
func checkPlacement(t *testing.T, st *metadataState, factor int) {
	t.Helper()
	hosts := planner{st: st}.hosts()
	replicas, leaders := planner{st: st}.load(hosts)
	for p := range st.NumPartitions {
		ids := map[uint64]bool{} // a replica id is unique in its shard
		lv := live(st.Replicas[p])
		if len(lv) != factor {
			t.Fatalf("partition %d: live replicas %v, want %d", p, lv, factor)
		}
		seen := map[uint64]bool{}
		for _, r := range st.Replicas[p] {
			if ids[r.ID] {
				t.Fatalf("partition %d: replica id %d given twice", p, r.ID)
			}
			ids[r.ID] = true
			if r.State == ReplicaRemoving {
				continue
			}
			if seen[r.Node] || st.Members[r.Node].State == MemberRemoving {
				t.Fatalf("partition %d: replicas %v: node %d twice or being removed", p, st.Replicas[p], r.Node)
			}
			seen[r.Node] = true
		}
	}
	spread := func(what string, m map[uint64]int) {
		lo, hi := slices.Min(slices.Collect(maps.Values(m))), slices.Max(slices.Collect(maps.Values(m)))
		if hi-lo > 1 {
			t.Fatalf("%s per node %v: spread %d", what, m, hi-lo)
		}
	}
	spread("replicas", replicas)
	spread("preferred leaderships", leaders)
}

// settle makes every change of the plan done: new replicas vote, removed ones are gone.
func settle(st *metadataState) {
	for p, rs := range st.Replicas {
		var out []Replica
		for _, r := range rs {
			if r.State != ReplicaRemoving {
				r.State = ReplicaVoter
				out = append(out, r)
			}
		}
		st.Replicas[p] = out
	}
}

func TestPlannerBalancesAddedAndRemovedNodes(t *testing.T) {
	st := foundedState(3, 50, 3)
	checkPlacement(t, st, 3)
	for id := uint64(4); id <= 5; id++ {
		if res := st.applyMember(memberCommand{Op: opAdd, Node: id, RaftAddress: fmt.Sprintf("10.0.0.%d:7072", id)}); len(res.Data) > 0 {
			t.Fatalf("add node %d: %s", id, res.Data)
		}
		checkPlacement(t, st, 3)
		settle(st)
	}
	if res := st.applyMember(memberCommand{Op: opRemove, Node: 1}); len(res.Data) > 0 {
		t.Fatalf("remove node 1: %s", res.Data)
	}
	checkPlacement(t, st, 3)
	settle(st)
	if !st.holdsNone(1) {
		t.Fatal("node 1 still holds replicas once its removal settled")
	}
	if res := st.applyMember(memberCommand{Op: opDropped, Node: 1}); len(res.Data) > 0 {
		t.Fatalf("drop node 1: %s", res.Data)
	}
	if _, ok := st.Members[1]; ok {
		t.Fatal("node 1 is still a member")
	}
	// Three nodes are left for a factor of 3: none can go.
	st.applyMember(memberCommand{Op: opRemove, Node: 2})
	settle(st)
	st.applyMember(memberCommand{Op: opDropped, Node: 2})
	if res := st.applyMember(memberCommand{Op: opRemove, Node: 3}); len(res.Data) == 0 {
		t.Fatal("removing a node of the last three was accepted")
	}
}

func TestPlannerRefusesWhatItCannotDo(t *testing.T) {
	st := foundedState(3, 6, 3)
	for _, tc := range []struct {
		name string
		c    memberCommand
	}{
		{"a member again at another address", memberCommand{Op: opAdd, Node: 2, RaftAddress: "10.0.0.9:7072"}},
		{"an address taken", memberCommand{Op: opAdd, Node: 7, RaftAddress: "10.0.0.2:7072"}},
		{"the replacement of no member", memberCommand{Op: opReplace, Node: 7, RaftAddress: "10.0.0.7:7072"}},
		{"the removal of no member", memberCommand{Op: opRemove, Node: 7}},
		{"a removal below the replication factor", memberCommand{Op: opRemove, Node: 1}},
	} {
		if res := st.applyMember(tc.c); len(res.Data) == 0 {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	checkPlacement(t, st, 3)
	if res := st.applyMember(memberCommand{Op: opAdd, Node: 2, RaftAddress: "10.0.0.2:7072"}); len(res.Data) > 0 || res.Value != 2 {
		t.Fatalf("adding a member again with its address: %s, %d (want its metadata replica, 2)", res.Data, res.Value)
	}
}

// A replaced node keeps its place: each of its replicas gets a successor on the same node, under
// a new id, and the old one goes once the successor votes.
func TestPlannerReplacesANodeUnderNewIDs(t *testing.T) {
	st := foundedState(3, 6, 3)
	res := st.applyMember(memberCommand{Op: opReplace, Node: 2, RaftAddress: "10.0.0.2:7072"})
	if len(res.Data) > 0 || res.Value == 2 || nodeOf(res.Value) != 2 {
		t.Fatalf("replace: %s, metadata replica %d", res.Data, res.Value)
	}
	if m := st.Members[2]; m.State != MemberJoining || !slices.Equal(m.Retired, []uint64{2}) {
		t.Fatalf("member after its replacement: %+v", m)
	}
	for p := range 6 {
		var old, successor int
		for _, r := range st.Replicas[p] {
			switch {
			case r.Node == 2 && r.ID == 2 && r.State == ReplicaRemoving:
				old++
			case r.Node == 2 && r.ID != 2 && r.State == ReplicaAdding:
				successor++
			}
		}
		if old != 1 || successor != 1 {
			t.Fatalf("partition %d: %v", p, st.Replicas[p])
		}
	}
	checkPlacement(t, st, 3)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settledOn reports whether the cluster, as node n sees it, has no change under way and consists
// of the nodes want.
func settledOn(n *Node, want ...uint64) bool {
	st := n.meta.snapshot()
	ids := slices.Sorted(maps.Keys(st.Members))
	if !slices.Equal(ids, want) {
		return false
	}
	for _, m := range st.Members {
		if m.State != MemberActive || len(m.Retired) > 0 {
			return false
		}
	}
	for p := range st.NumPartitions {
		if !settled(st.Replicas[p]) {
			return false
		}
	}
	return true
}

// appendEach appends one record tagged tag to every partition through its leader, retrying
// while leaderships move.
func (c *testCluster) appendEach(t *testing.T, tag string) {
	t.Helper()
	for p := range c.partitions {
		waitFor(t, 20*time.Second, fmt.Sprintf("append %s to partition %d", tag, p), func() bool {
			for _, n := range c.nodes {
				part := n.Partition(p)
				if part == nil || !part.Role().Leading {
					continue
				}
				s := &logModel{t: t, rep: part.Replica()}
				if _, _, err := s.rep.Load(func(int64, []byte) error { return nil }); err != nil {
					continue
				}
				if s.append(tag) == nil {
					return true
				}
			}
			return false
		})
	}
}

// checkReplicasAgree checks that every replica of every partition holds the same records, each of
// tags among them.
func (c *testCluster) checkReplicasAgree(t *testing.T, tags []string) {
	t.Helper()
	for p := range c.partitions {
		var first []string
		holders := 0
		for id, n := range c.nodes {
			if n.Partition(p) == nil {
				continue
			}
			holders++
			var got []string
			waitFor(t, 20*time.Second, fmt.Sprintf("node %d: partition %d holds every record", id, p), func() bool {
				got = logOf(t, n, p)
				for _, tag := range tags {
					if !slices.ContainsFunc(got, func(r string) bool {
						return len(r) > len(tag) && r[len(r)-len(tag):] == tag && r[len(r)-len(tag)-1] == ':'
					}) {
						return false
					}
				}
				return first == nil || slices.Equal(got, first)
			})
			if first == nil {
				first = got
			}
		}
		if holders != 3 {
			t.Fatalf("partition %d: %d nodes hold a replica, want 3", p, holders)
		}
	}
}

// A fourth node joins, receives replicas, and the first node then leaves: the records appended
// before, between and after are on every replica, each partition keeps three, and the leaders
// spread over the nodes left.
func TestNodesJoinAndLeave(t *testing.T) {
	c := newTestCluster(t, 3, 8)
	if _, err := c.nodes[1].RecordPartitions(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.appendEach(t, "before")

	addr4 := freeAddr(t, "127.0.0.1")
	metaID, err := c.nodes[2].AddNode(t.Context(), 4, addr4, false)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.nodes[3].AddNode(t.Context(), 4, addr4, false)
	if err != nil || again != metaID {
		t.Fatalf("adding node 4 again: %d, %v; want %d", again, err, metaID)
	}
	c.startWith(4, addr4, &Join{MetaReplica: metaID})
	waitFor(t, 60*time.Second, "node 4 joined and the replicas moved", func() bool { return settledOn(c.nodes[1], 1, 2, 3, 4) })
	if held := len(c.nodes[4].local()); held != 6 {
		t.Fatalf("node 4 holds %d replicas, want 6 of 24", held)
	}
	c.appendEach(t, "between")

	if err := c.nodes[4].RemoveNode(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "node 1 left", func() bool { return settledOn(c.nodes[2], 2, 3, 4) })
	waitFor(t, 20*time.Second, "node 1 stopped its replicas", func() bool { return len(c.nodes[1].local()) == 0 })
	c.stop(1)
	c.appendEach(t, "after")
	c.checkReplicasAgree(t, []string{"before", "between", "after"})
	waitFor(t, 30*time.Second, "leaders balanced over nodes 2-4", func() bool {
		counts := []int{}
		for _, n := range c.nodes {
			counts = append(counts, n.Leaders())
		}
		return slices.Min(counts) >= 2 && slices.Max(counts) <= 3
	})
	if _, err := c.nodes[2].AddNode(t.Context(), 5, c.members[2], false); !errors.Is(err, ErrMembership) {
		t.Fatalf("adding a node at a member's address: %v, want ErrMembership", err)
	}
}

// A node whose data directory is lost comes back under new replica ids: its successors catch up
// from the others, the old ids leave every shard, and the records are all there. It restarts
// afterwards as a voter of each shard.
func TestReplacedNodeCatchesUp(t *testing.T) {
	c := newTestCluster(t, 3, 4)
	if _, err := c.nodes[1].RecordPartitions(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.appendEach(t, "before")
	c.stop(2)
	c.dirs[2] = t.TempDir() // the data directory is lost
	c.appendEach(t, "while-down")
	var metaID uint64
	waitFor(t, 20*time.Second, "the replacement of node 2 accepted once it is silent", func() bool {
		id, err := c.nodes[1].AddNode(t.Context(), 2, c.members[2], true)
		metaID = id
		return err == nil
	})
	if metaID == 2 {
		t.Fatal("the replacement kept the metadata replica id of the lost node")
	}
	c.startWith(2, c.members[2], &Join{MetaReplica: metaID})
	waitFor(t, 60*time.Second, "node 2 replaced", func() bool { return settledOn(c.nodes[3], 1, 2, 3) })
	c.appendEach(t, "after")
	c.checkReplicasAgree(t, []string{"before", "while-down", "after"})

	engineDir := filepath.Join(c.dirs[2], "raft")
	waitFor(t, 30*time.Second, "node 2's replicas recorded as voters", func() bool {
		v, err := openVoters(engineDir)
		return err == nil && len(v.ids) == 1+c.partitions
	})
	c.stop(2)
	// As if node 2 had crashed after its partitions' promotions were in their snapshots but
	// before it recorded them: it restarts them non-voting, and they must still be voters that
	// can lead (a non-voting replica never stands for election nor takes a leadership handed to
	// it).
	votersFile := filepath.Join(engineDir, votersFileName)
	v, err := openVoters(engineDir)
	if err != nil || len(v.ids) != 1+c.partitions {
		t.Fatalf("node 2 recorded %v (%v), want its metadata replica and %d partition replicas as voters", v.ids, err, c.partitions)
	}
	meta := strconv.Itoa(metadataShardID)
	if err := os.WriteFile(votersFile, []byte(`{"`+meta+`":`+strconv.FormatUint(v.ids[meta], 10)+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c.startWith(2, c.members[2], nil)
	waitFor(t, 30*time.Second, "node 2's partition replicas recorded as voters again", func() bool {
		v, err := openVoters(engineDir)
		return err == nil && len(v.ids) == 1+c.partitions
	})
	for p := range c.partitions {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		leader, err := c.nodes[1].TransferLeader(ctx, p, 2)
		cancel()
		if err != nil || leader != 2 {
			t.Fatalf("hand partition %d to node 2: led by %d, %v", p, leader, err)
		}
	}
	c.stop(3) // node 2's replicas must vote now: without node 3, every partition needs them
	c.appendEach(t, "restarted")
}
