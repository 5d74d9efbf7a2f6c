package cluster

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/record"
	"github.com/coordinatord/coordinatord/internal/shard"
)

// snapshotRecords returns n encoded snapshot records of keys that state partition p owns among
// partitions.
func snapshotRecords(t *testing.T, p, partitions, n int) [][]byte {
	t.Helper()
	var out [][]byte
	for i := 0; len(out) < n; i++ {
		k := testKey(i)
		if shard.PartitionFor(k.CoordinatorKey(), partitions) != p {
			continue
		}
		b, err := record.Encode(record.Record{Type: record.TypeSnapshot, Key: record.Key(k),
			Snapshot: &record.SnapshotValue{SnapshotEpoch: 1, StateEpoch: 1, StartOffset: int64(i), DeliveryCompleteCount: -1}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// The partition's leader imports records into every replica at the source's offsets; another
// node names the leader; bad records, offsets and partitions are refused before anything is
// proposed; a seed of a log that holds records, or records not at its end, change nothing.
func TestImportRecords(t *testing.T) {
	c := newTestCluster(t, 3, 2)
	leader := c.leader(0)
	var other *Node
	for _, n := range c.nodes {
		if n != leader {
			other = n
			break
		}
	}
	recs := snapshotRecords(t, 0, 2, 5)
	_, err := other.ImportRecords(t.Context(), 0, 40, 40, recs[:3])
	var nl *NotLeaderError
	if !errors.As(err, &nl) || !errors.Is(err, ErrNotLeader) || nl.Leader.Node != leader.NodeID() {
		t.Fatalf("import on node %d, which does not lead: %v; want ErrNotLeader naming node %d", other.NodeID(), err, leader.NodeID())
	}
	for name, tc := range map[string]struct {
		p         int
		start, at int64
		records   [][]byte
		want      error
	}{
		"no such partition":    {p: 2, records: recs, want: ErrNoSuchPartition},
		"offset below start":   {p: 0, start: 5, at: 4, records: recs, want: ErrBadImport},
		"not a state record":   {p: 0, records: [][]byte{[]byte("garbage")}, want: ErrBadImport},
		"another's partition":  {p: 0, records: snapshotRecords(t, 1, 2, 1), want: ErrBadImport},
		"above the record cap": {p: 0, records: [][]byte{make([]byte, MaxImportBytes+1)}, want: ErrBadImport},
	} {
		if _, err := leader.ImportRecords(t.Context(), tc.p, tc.start, tc.at, tc.records); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}

	res, err := leader.ImportRecords(t.Context(), 0, 40, 40, recs[:3])
	if err != nil || res != (ImportResult{Appended: true, StartOffset: 40, EndOffset: 43}) {
		t.Fatalf("seed: %+v, %v; want [40, 43) appended", res, err)
	}
	if res, err := leader.ImportRecords(t.Context(), 0, 40, 43, recs[3:]); err != nil || !res.Appended || res.EndOffset != 45 {
		t.Fatalf("append: %+v, %v; want appended up to 45", res, err)
	}
	for _, again := range []int64{40, 44} {
		if res, err := leader.ImportRecords(t.Context(), 0, 40, again, recs[:1]); err != nil || res != (ImportResult{StartOffset: 40, EndOffset: 45}) {
			t.Fatalf("import at %d into [40, 45): %+v, %v; want nothing appended and the bounds", again, res, err)
		}
	}
	want := logOf(t, leader, 0)
	if len(want) != 5 || want[0][:3] != "40:" {
		t.Fatalf("the leader's log holds %d records from %q, want 5 from offset 40", len(want), want[0])
	}
	for _, n := range c.nodes {
		c.waitApplied(n, 0, 45)
		if got := logOf(t, n, 0); !slices.Equal(got, want) {
			t.Fatalf("node %d holds %d records, the leader %d", n.NodeID(), len(got), len(want))
		}
	}
}

// waitApplied waits until n's replica of partition p ends at end.
func (c *testCluster) waitApplied(n *Node, p int, end int64) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, e, _ := n.Partition(p).Replica().Bounds()
		if e == end {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d: state partition %d ends at %d, want %d", n.NodeID(), p, e, end)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
