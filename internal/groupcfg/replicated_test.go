package groupcfg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
)

// fakeCluster commits every change at once, in one order, to the managers of its nodes.
type fakeCluster struct {
	mu       sync.Mutex
	managers []*Manager
	log      [][]byte
	refuse   error     // when set, proposals fail
	deadline time.Time // the deadline of the last proposal
}

func (c *fakeCluster) propose(ctx context.Context, change []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline, _ = ctx.Deadline()
	if c.refuse != nil {
		return c.refuse
	}
	c.log = append(c.log, change)
	for _, m := range c.managers {
		m.ApplyConfig(change)
	}
	return nil
}

func newFakeCluster(t *testing.T, nodes int) *fakeCluster {
	c := &fakeCluster{}
	for i := range nodes {
		m, err := OpenReplicated(zaptest.NewLogger(t), staticOf(t), nil, Options{NodeID: int32(i + 1)}, c.propose)
		if err != nil {
			t.Fatal(err)
		}
		c.managers = append(c.managers, m)
	}
	return c
}

func describeGroup(t *testing.T, m *Manager, group, key string) DescribedConfig {
	t.Helper()
	res := m.DescribeConfigs([]DescribeResource{{Type: ResourceGroup, Name: group, Keys: []string{key}}}, false, false)
	if res[0].ErrorCode != kafkaerr.None || len(res[0].Configs) != 1 {
		t.Fatalf("describe %s %s: %+v", group, key, res[0])
	}
	return res[0].Configs[0]
}

// A change made on one node is applied on every node, group overrides and dynamic broker
// values alike, and a node that joins later catches up from a snapshot.
func TestReplicatedChangesReachEveryNode(t *testing.T) {
	c := newFakeCluster(t, 3)
	if r := c.managers[0].IncrementalAlterConfigs(context.Background(), []AlterResource{groupRes("g1", set(keyDeliveryCountLimit, "7"))}, false)[0]; r.ErrorCode != kafkaerr.None {
		t.Fatalf("alter: %+v", r)
	}
	if r := c.managers[1].IncrementalAlterConfigs(context.Background(), []AlterResource{brokerRes(set(keySnapshotCeiling, "800"))}, false)[0]; r.ErrorCode != kafkaerr.None {
		t.Fatalf("alter broker: %+v", r)
	}
	for i, m := range c.managers {
		if v := describeGroup(t, m, "g1", keyDeliveryCountLimit).Value; v != "7" {
			t.Fatalf("node %d: g1 %s = %q, want 7", i+1, keyDeliveryCountLimit, v)
		}
		if n := m.Broker().state.num(keySnapshotCeiling); n != 800 {
			t.Fatalf("node %d: broker %s = %d, want 800", i+1, keySnapshotCeiling, n)
		}
	}
	// Removing the override removes it everywhere.
	if r := c.managers[2].IncrementalAlterConfigs(context.Background(), []AlterResource{groupRes("g1", del(keyDeliveryCountLimit))}, false)[0]; r.ErrorCode != kafkaerr.None {
		t.Fatalf("delete: %+v", r)
	}
	snap, err := c.managers[0].ConfigSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	late, err := OpenReplicated(zaptest.NewLogger(t), staticOf(t), nil, Options{NodeID: 4}, c.propose)
	if err != nil {
		t.Fatal(err)
	}
	if err := late.RestoreConfig(snap); err != nil {
		t.Fatal(err)
	}
	for i, m := range append(c.managers, late) {
		if d := describeGroup(t, m, "g1", keyDeliveryCountLimit); d.Source == SourceGroupConfig {
			t.Fatalf("node %d: g1 still has its override %+v", i+1, d)
		}
		if n := m.Broker().state.num(keySnapshotCeiling); n != 800 {
			t.Fatalf("node %d: broker %s = %d, want 800", i+1, keySnapshotCeiling, n)
		}
		if g := m.view.Load().generation; g != 3 {
			t.Fatalf("node %d: generation %d, want 3 (one per committed change)", i+1, g)
		}
	}
}

// A change the cluster does not commit is not applied, and its resources say so.
func TestReplicatedChangeNotCommitted(t *testing.T) {
	c := newFakeCluster(t, 2)
	c.refuse = errors.New("no leader")
	r := c.managers[0].IncrementalAlterConfigs(context.Background(), []AlterResource{groupRes("g1", set(keyDeliveryCountLimit, "7"))}, false)[0]
	if r.ErrorCode != kafkaerr.UnknownServerError || r.ErrorMessage == "" {
		t.Fatalf("alter without a commit: %+v", r)
	}
	for i, m := range c.managers {
		if d := describeGroup(t, m, "g1", keyDeliveryCountLimit); d.Source == SourceGroupConfig {
			t.Fatalf("node %d applied a change the cluster did not commit: %+v", i+1, d)
		}
	}
	// Validation still happens on the node that is asked, before anything is proposed.
	c.refuse = nil
	bad := c.managers[0].IncrementalAlterConfigs(context.Background(), []AlterResource{groupRes("g1", set(keyDeliveryCountLimit, "-5"))}, false)[0]
	if bad.ErrorCode != kafkaerr.InvalidConfig || len(c.log) != 0 {
		t.Fatalf("invalid value: %+v, %d changes proposed", bad, len(c.log))
	}
}

// A committed change costs every node what it changes, not what is stored: applying a one-group
// change allocates about as much with 20 000 groups as with none.
func TestApplyConfigCostsWhatItChanges(t *testing.T) {
	measure := func(stored int) uint64 {
		c := newFakeCluster(t, 1)
		m := c.managers[0]
		st := &storeState{NumPartitions: 50, Generation: 1, Groups: map[string]map[string]string{}}
		for i := range stored {
			st.Groups[fmt.Sprintf("group-%d", i)] = map[string]string{keyDeliveryCountLimit: "7"}
		}
		snap, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.RestoreConfig(snap); err != nil {
			t.Fatal(err)
		}
		change := []byte(`{"groups":{"hot":{"share.delivery.count.limit":"4"}}}`)
		return allocatedBy(func() { m.ApplyConfig(change) })
	}
	none, many := measure(0), measure(20000)
	t.Logf("applying a one-group change allocates %d bytes with no group stored, %d with 20000", none, many)
	if many > 2*none+16<<10 {
		t.Fatalf("applying a one-group change allocates %d bytes with 20000 groups stored, %d with none", many, none)
	}
}
