package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4"
	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/record"
	"github.com/coordinatord/coordinatord/internal/shard"
)

type fixedLimit int

func (l fixedLimit) SnapshotUpdateRecordsPerSnapshot(string) int { return int(l) }

// shards opens a shard on every replica of partition p, in the cluster.
func (c *testCluster) shards(p int) map[uint64]*shard.Shard {
	c.t.Helper()
	out := map[uint64]*shard.Shard{}
	for id, n := range c.nodes {
		s := shard.Open(zaptest.NewLogger(c.t).Named(fmt.Sprint(id)), fixedLimit(3), shard.Options{Partition: p, AppendLingerMs: -1, WriteTimeout: 3 * time.Second},
			n.Partition(p).ShardLog())
		c.t.Cleanup(func() { _ = s.Close() })
		if err := s.WaitLoaded(context.Background()); err != nil {
			c.t.Fatal(err)
		}
		out[id] = s
	}
	return out
}

var testTopic = record.TopicID{1, 2, 3}

func testKey(i int) shard.Key {
	return shard.Key{GroupID: "g", TopicID: testTopic, Partition: int32(i)}
}

// write writes key i's state through whichever shard serves it, retrying while the partition
// has no leader, and returns the node that took it.
func write(t *testing.T, shards map[uint64]*shard.Shard, i int, start int64) uint64 {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for id, s := range shards {
			r := s.Write(context.Background(), shard.WriteRequest{Key: testKey(i), StateEpoch: 1, StartOffset: start,
				StateBatches: []shard.StateBatch{{FirstOffset: start, LastOffset: start + 9, DeliveryState: 2, DeliveryCount: 1}}})
			switch r.Code {
			case kafkaerr.None:
				return id
			case kafkaerr.NotCoordinator, kafkaerr.CoordinatorNotAvailable, kafkaerr.CoordinatorLoadInProgress:
			default:
				t.Fatalf("write on node %d: %v %s", id, r.Code, r.Message)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no node took the write of key %d", i)
	return 0
}

// Shards on every replica: one leader serves, the others answer NOT_COORDINATOR naming it and
// follow; after the leader's node stops, another serves the same state.
func TestShardsServeFromTheLeaderAndFailOver(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	shards := c.shards(0)
	for i := range 4 {
		mustInit(t, shards, i)
	}
	leader := write(t, shards, 0, 5)
	for i := 1; i < 4; i++ {
		write(t, shards, i, 7)
	}
	for id, s := range shards {
		if id == leader {
			continue
		}
		// A follower answers NOT_COORDINATOR naming the leader once it heard from it (until
		// then, COORDINATOR_NOT_AVAILABLE: no leader known).
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			r := s.Read(context.Background(), shard.ReadRequest{Key: testKey(0)})
			if r.Code == kafkaerr.NotCoordinator && strings.Contains(r.Message, fmt.Sprintf("node %d", leader)) {
				break
			}
			if r.Code != kafkaerr.CoordinatorNotAvailable || time.Now().After(deadline) {
				t.Fatalf("read on follower %d: %v %q; want NOT_COORDINATOR naming node %d", id, r.Code, r.Message, leader)
			}
		}
	}
	_ = shards[leader].Close()
	delete(shards, leader)
	c.stop(leader)
	// The next leader holds what the first acknowledged, and goes on from there.
	next := write(t, shards, 0, 20)
	if next == leader {
		t.Fatalf("node %d, stopped, took a write", next)
	}
	for i := range 4 {
		r := shards[next].Read(context.Background(), shard.ReadRequest{Key: testKey(i)})
		want := int64(7)
		if i == 0 {
			want = 20
		}
		if r.Code != kafkaerr.None || r.StartOffset != want {
			t.Fatalf("key %d on the new leader: %+v; want start offset %d", i, r, want)
		}
	}
}

func mustInit(t *testing.T, shards map[uint64]*shard.Shard, i int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range shards {
			r := s.Initialize(context.Background(), shard.InitializeRequest{Key: testKey(i), StateEpoch: 1, StartOffset: 0})
			if r.Code == kafkaerr.None {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no node initialized key %d", i)
}

// A replica that was down while the leaders compacted their Raft logs past what it holds
// receives a leader's state log as a snapshot, and its shard, which follows, holds what the
// leader's does.
func TestLaggingReplicaGetsASnapshot(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	shards := c.shards(0)
	for i := range 4 {
		mustInit(t, shards, i)
	}
	leader := write(t, shards, 0, 1)
	lag := uint64(1)
	for lag == leader {
		lag++
	}
	_ = shards[lag].Close()
	delete(shards, lag)
	c.stop(lag)
	for round := range 30 {
		for i := range 4 {
			write(t, shards, i, int64(10+round))
		}
	}
	// Compact every Raft log past what the stopped replica holds.
	for _, n := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := n.nh.SyncRequestSnapshot(ctx, partitionShardBase, dragonboat.SnapshotOption{OverrideCompactionOverhead: true, CompactionOverhead: 0})
		cancel()
		if err != nil {
			t.Fatalf("snapshot on node %d: %v", n.NodeID(), err)
		}
	}
	back := c.start(lag)
	s := shard.Open(zaptest.NewLogger(t).Named("back"), fixedLimit(3), shard.Options{Partition: 0, AppendLingerMs: -1, WriteTimeout: 3 * time.Second},
		back.Partition(0).ShardLog())
	t.Cleanup(func() { _ = s.Close() })
	if err := s.WaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Hand it the leadership: it serves the state the others acknowledged.
	for deadline := time.Now().Add(20 * time.Second); !back.Partition(0).CaughtUp(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the restarted replica did not catch up")
		}
	}
	// As its preferred leader, which the balancer keeps it: a plain Raft transfer to a replica
	// that is not the placement's preference is undone by the balancer, sometimes before the
	// read below.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	leaderNow, err := back.TransferLeader(ctx, 0, lag)
	cancel()
	if err != nil || leaderNow != lag {
		t.Fatalf("hand the leadership to node %d: led by %d, %v", lag, leaderNow, err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r := s.Read(context.Background(), shard.ReadRequest{Key: testKey(3)})
		if r.Code == kafkaerr.None {
			if r.StartOffset != 39 {
				t.Fatalf("key 3 on the replica that got a snapshot: %+v, want start offset 39", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica that got a snapshot does not serve: %v %s", r.Code, r.Message)
		}
	}
	if got, want := logOf(t, back, 0), logOf(t, c.leaderOtherThan(lag), 0); !slices.Equal(got, want) {
		t.Fatalf("the replica's log after the snapshot differs from another's:\n%v\n%v", got, want)
	}
}

// leaderOtherThan returns a running node other than id.
func (c *testCluster) leaderOtherThan(id uint64) *Node {
	for nid, n := range c.nodes {
		if nid != id {
			return n
		}
	}
	c.t.Fatal("no other node")
	return nil
}
