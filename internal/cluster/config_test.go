package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/kafkaerr"
)

// A config change made on one node is applied on every node, and still there after the node
// that holds the metadata's leadership is stopped and another change goes through the others; a
// node started again catches up.
func TestConfigIsReplicated(t *testing.T) {
	static, err := groupcfg.LoadStatic(groupcfg.Sources{})
	if err != nil {
		t.Fatal(err)
	}
	managers := map[uint64]*groupcfg.Manager{}
	var c *testCluster
	c = newTestClusterWith(t, 3, 1, func(id uint64) ConfigReplica {
		m, err := groupcfg.OpenReplicated(zaptest.NewLogger(t), static, nil, groupcfg.Options{NodeID: int32(id)},
			func(ctx context.Context, change []byte) error {
				_, err := c.nodes[id].ProposeConfig(ctx, change)
				return err
			})
		if err != nil {
			t.Fatal(err)
		}
		managers[id] = m
		return m
	})
	alter := func(id uint64, group, value string) {
		t.Helper()
		r := managers[id].IncrementalAlterConfigs(context.Background(), []groupcfg.AlterResource{{Type: groupcfg.ResourceGroup, Name: group,
			Configs: []groupcfg.AlterConfig{{Name: "share.delivery.count.limit", Op: groupcfg.OpSet, Value: &value}}}}, false)[0]
		if r.ErrorCode != kafkaerr.None {
			t.Fatalf("alter on node %d: %s %s", id, r.ErrorCode, r.ErrorMessage)
		}
	}
	want := func(id uint64, group, value string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			res := managers[id].DescribeConfigs([]groupcfg.DescribeResource{{Type: groupcfg.ResourceGroup, Name: group,
				Keys: []string{"share.delivery.count.limit"}}}, false, false)[0]
			if len(res.Configs) == 1 && res.Configs[0].Value == value {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: %s has %+v, want %s", id, group, res.Configs, value)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	alter(1, "g1", "7")
	for id := range managers {
		want(id, "g1", "7")
	}
	leader, _, ok, err := c.nodes[1].nh.GetLeaderID(metadataShardID)
	if err != nil || !ok {
		t.Fatalf("the metadata has no leader: %v", err)
	}
	c.stop(leader)
	other := uint64(1)
	if other == leader {
		other = 2
	}
	alter(other, "g2", "9")
	for id := range c.nodes {
		want(id, "g1", "7")
		want(id, "g2", "9")
	}
	c.start(leader)
	want(leader, "g1", "7")
	want(leader, "g2", "9")
}

// The metadata's snapshot carries the configuration: a node restored from it has every group
// override and dynamic broker value, and applies later changes on top of them.
func TestMetadataSnapshotCarriesTheConfig(t *testing.T) {
	static, err := groupcfg.LoadStatic(groupcfg.Sources{})
	if err != nil {
		t.Fatal(err)
	}
	replica := func(id int32) (*groupcfg.Manager, *metadata) {
		var meta *metadata
		m, err := groupcfg.OpenReplicated(zaptest.NewLogger(t), static, nil, groupcfg.Options{NodeID: id},
			func(_ context.Context, change []byte) error {
				cmd, err := json.Marshal(metadataCommand{Config: change})
				if err == nil {
					_, err = meta.Update(sm.Entry{Cmd: cmd})
				}
				return err
			})
		if err != nil {
			t.Fatal(err)
		}
		meta = newMetadata(m)
		return m, meta
	}
	alter := func(m *groupcfg.Manager, r groupcfg.AlterResource) {
		t.Helper()
		if res := m.IncrementalAlterConfigs(context.Background(), []groupcfg.AlterResource{r}, false)[0]; res.ErrorCode != kafkaerr.None {
			t.Fatalf("alter %s %s: %s %s", r.Type, r.Name, res.ErrorCode, res.ErrorMessage)
		}
	}
	set := func(name, value string) []groupcfg.AlterConfig {
		return []groupcfg.AlterConfig{{Name: name, Op: groupcfg.OpSet, Value: &value}}
	}
	check := func(m *groupcfg.Manager, group, limit string, ceiling int) {
		t.Helper()
		res := m.DescribeConfigs([]groupcfg.DescribeResource{{Type: groupcfg.ResourceGroup, Name: group,
			Keys: []string{"share.delivery.count.limit"}}}, false, false)[0]
		if len(res.Configs) != 1 || res.Configs[0].Value != limit || m.Broker().SnapshotUpdateRecordsPerSnapshot() != ceiling {
			t.Fatalf("group %s: %+v, ceiling %d; want %s and %d", group, res.Configs, m.Broker().SnapshotUpdateRecordsPerSnapshot(), limit, ceiling)
		}
	}

	src, srcMeta := replica(1)
	alter(src, groupcfg.AlterResource{Type: groupcfg.ResourceGroup, Name: "g1", Configs: set("share.delivery.count.limit", "7")})
	alter(src, groupcfg.AlterResource{Type: groupcfg.ResourceBroker, Configs: set("share.coordinator.snapshot.update.records.per.snapshot", "800")})
	var snap bytes.Buffer
	if err := srcMeta.SaveSnapshot(&snap, nil, nil); err != nil {
		t.Fatalf("save the metadata snapshot: %v", err)
	}
	dst, dstMeta := replica(2)
	if err := dstMeta.RecoverFromSnapshot(&snap, nil, nil); err != nil {
		t.Fatalf("recover from the metadata snapshot: %v", err)
	}
	check(dst, "g1", "7", 800)
	alter(dst, groupcfg.AlterResource{Type: groupcfg.ResourceGroup, Name: "g2", Configs: set("share.delivery.count.limit", "9")})
	check(dst, "g1", "7", 800)
	check(dst, "g2", "9", 800)
}
