package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/raftlog"
	"github.com/coordinatord/coordinatord/internal/raftnet"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

// fastTiming elects a leader after 0.3–0.6 s without one: fast enough for tests, slow enough that
// a loaded machine does not call elections it does not need.
var fastTiming = Timing{RTT: 10 * time.Millisecond, HeartbeatTicks: 2, ElectionTicks: 30}

// freeAddr returns an address whose port was free a moment ago, on a loopback address of the
// cluster's own (ip): another test, or process, that takes a port from the kernel meanwhile takes
// it on 127.0.0.1, not there.
func freeAddr(t testing.TB, ip string) string {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// testCluster runs n nodes in this process.
type testCluster struct {
	t          testing.TB
	members    map[uint64]string
	dirs       map[uint64]string
	nodes      map[uint64]*Node
	partitions int
	// config, when set, gives each node started its configuration replica.
	config func(id uint64) ConfigReplica
}

func newTestCluster(t testing.TB, n, partitions int) *testCluster {
	return newTestClusterWith(t, n, partitions, nil)
}

func newTestClusterWith(t testing.TB, n, partitions int, config func(id uint64) ConfigReplica) *testCluster {
	c := &testCluster{t: t, members: map[uint64]string{}, dirs: map[uint64]string{}, nodes: map[uint64]*Node{}, partitions: partitions,
		config: config}
	ip := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(254), rand.IntN(256), 1+rand.IntN(254))
	for id := uint64(1); id <= uint64(n); id++ {
		c.members[id] = freeAddr(t, ip)
		c.dirs[id] = t.TempDir()
	}
	for id := range c.members {
		c.start(id)
	}
	t.Cleanup(func() {
		for _, node := range c.nodes {
			node.Close()
		}
	})
	return c
}

func (c *testCluster) start(id uint64) *Node {
	c.t.Helper()
	return c.startWith(id, c.members[id], nil)
}

// startWith starts node id at raftAddress; join, for a node that is not a founding member, is
// what AddNode answered.
func (c *testCluster) startWith(id uint64, raftAddress string, join *Join) *Node {
	c.t.Helper()
	if c.dirs[id] == "" {
		c.dirs[id] = c.t.TempDir()
	}
	dir := c.dirs[id]
	node, err := Start(zaptest.NewLogger(c.t).Named(fmt.Sprint(id)), Config{
		NodeID: id, ListenAddress: raftAddress, RaftAddress: raftAddress, Join: join, InitialMembers: c.members, Dir: filepath.Join(dir, "raft"),
		Partitions: c.partitions, ReplicationFactor: 3, Timing: fastTiming, ProposalTimeout: 2 * time.Second,
		PartitionLog: func(p int) (string, statelog.Options) {
			return filepath.Join(dir, fmt.Sprintf("p-%d", p)), statelog.Options{SegmentBytes: 4096}
		},
		Fatal:       func(err error) { c.t.Errorf("node %d: fatal: %v", id, err) },
		GRPCAddress: fmt.Sprintf("node-%d:7070", id),
		Config:      c.configFor(id),
		Transport:   raftnet.NewFactory(raftnet.Options{}),
	})
	if err != nil {
		c.t.Fatal(err)
	}
	node.Run(nil)
	c.nodes[id] = node
	return node
}

func (c *testCluster) configFor(id uint64) ConfigReplica {
	if c.config == nil {
		return nil
	}
	return c.config(id)
}

func (c *testCluster) stop(id uint64) {
	c.nodes[id].Close()
	delete(c.nodes, id)
}

// leader waits for a node to lead partition p and returns it.
func (c *testCluster) leader(p int) *Node {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range c.nodes {
			if n.Partition(p).Role().Leading {
				return n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("no node leads partition %d", p)
	return nil
}

// shard is a minimal shard over a replica: the records it holds, by offset.
type logModel struct {
	t     testing.TB
	rep   *raftlog.Replica
	recs  []string
	start int64
}

func (s *logModel) load() {
	s.t.Helper()
	s.recs = nil
	start, _, err := s.rep.Load(func(off int64, rec []byte) error {
		s.recs = append(s.recs, fmt.Sprintf("%d:%s", off, rec))
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	s.start = start
}

func (s *logModel) append(tag string) error {
	first, err := s.rep.Append([][]byte{[]byte(tag)})
	if err != nil {
		return err
	}
	s.recs = append(s.recs, fmt.Sprintf("%d:%s", first, tag))
	return nil
}

func logOf(t testing.TB, n *Node, p int) []string {
	s := &logModel{t: t, rep: n.Partition(p).Replica()}
	s.load()
	return s.recs
}

func TestReplicatedAppendSurvivesALeaderLoss(t *testing.T) {
	c := newTestCluster(t, 3, 2)
	first := c.leader(0)
	s := &logModel{t: t, rep: first.Partition(0).Replica()}
	s.load()
	for i := range 10 {
		if err := s.append(fmt.Sprintf("a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.rep.Append(nil); err != nil && !errors.Is(err, raftlog.ErrBehind) {
		t.Fatalf("read barrier: %v", err)
	}
	want := slices.Clone(s.recs)
	c.stop(first.NodeID())

	second := c.leader(0)
	s2 := &logModel{t: t, rep: second.Partition(0).Replica()}
	s2.load()
	if !slices.Equal(s2.recs, want) {
		t.Fatalf("the new leader holds %v, want %v", s2.recs, want)
	}
	for i := range 5 {
		if err := s2.append(fmt.Sprintf("b%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	back := c.start(first.NodeID())
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := logOf(t, back, 0)
		if slices.Equal(got, s2.recs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted node holds %v, want %v", got, s2.recs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Every node learns every node's gRPC address through the cluster metadata, and answers who
// leads each partition with it; the number of partitions recorded first holds for all.
func TestCoordinatorsAreKnownEverywhere(t *testing.T) {
	c := newTestCluster(t, 3, 3)
	for p := range 3 {
		leader := c.leader(p)
		want := fmt.Sprintf("node-%d:7070", leader.NodeID())
		for id, n := range c.nodes {
			deadline := time.Now().Add(10 * time.Second)
			for {
				co := n.Coordinator(p)
				if co.State == CoordinatorKnown && co.Node == leader.NodeID() && co.Address == want {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("node %d: partition %d coordinator %+v, want node %d at %s", id, p, co, leader.NodeID(), want)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	for _, n := range c.nodes {
		got, err := n.RecordPartitions(t.Context())
		if err != nil || got != 3 {
			t.Fatalf("RecordPartitions: %d, %v", got, err)
		}
	}
}

// waitBalanced waits until each node of the cluster leads want partitions.
func (c *testCluster) waitBalanced(want int) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		counts := map[uint64]int{}
		ok := true
		for id, n := range c.nodes {
			counts[id] = n.Leaders()
			ok = ok && counts[id] == want
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("leaders per node %v, want %d each", counts, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Leaders spread to their preferred nodes, again after a node returns; a node that stops hands
// its leaderships over first.
func TestLeadersAreBalanced(t *testing.T) {
	c := newTestCluster(t, 3, 6)
	c.waitBalanced(2)
	c.stop(2)
	c.start(2)
	c.waitBalanced(2)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if left := c.nodes[3].TransferLeaderships(ctx); left != 0 {
		t.Fatalf("node 3 still leads %d partitions after handing them over", left)
	}
	for p := range 6 {
		if l := c.leader(p); l.NodeID() == 3 {
			t.Fatalf("partition %d is led by node 3 after it handed its leaderships over", p)
		}
	}
}

// A stopping node hands a partition over even when the replica it tries first cannot take it:
// dragonboat drops a transfer that did not complete within an election timeout (the target is
// down, or skips its campaign while it applies committed entries, as a loaded follower often
// does), so the node asks again, another replica in turn, while it still leads.
func TestTransferLeadershipsTriesTheOtherReplicas(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.waitLeads(1, 0) // partition 0 prefers node 1; its replicas in order are 1, 2, 3
	c.stop(2)         // the replica node 1 tries first
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	began := time.Now()
	if left := c.nodes[1].TransferLeaderships(ctx); left != 0 {
		t.Fatalf("node 1 still leads %d partitions after %v of handing them over", left, time.Since(began))
	}
	if l := c.leader(0); l.NodeID() != 3 {
		t.Fatalf("partition 0 is led by node %d, want 3", l.NodeID())
	}
}

// waitLeads waits until node id leads partition p.
func (c *testCluster) waitLeads(id uint64, p int) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !c.nodes[id].Partition(p).Role().Leading {
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d does not lead partition %d", id, p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
