package cluster

import (
	"bytes"
	"context"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4"
)

// dirBytes is the size of the files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The log store reclaims the space of the entries a snapshot compacted away without a manual
// compaction per snapshot (the Raft shards run with DisableAutoCompactions): writing far more
// than its write buffers hold through one partition, with a snapshot after every few write
// buffers' worth, leaves the log store bounded by what its buffers and levels keep, not by what
// was written.
func TestLogStoreSpaceIsReclaimedAfterSnapshots(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 192 MiB through a partition")
	}
	c := newTestCluster(t, 1, 1)
	node := c.leader(0)
	s := &logModel{t: t, rep: node.Partition(0).Replica()}
	s.load()
	const (
		recordBytes = 256 << 10
		records     = 768 // 192 MiB
		perSnapshot = 64  // 16 MiB, two write buffers
	)
	rec := bytes.Repeat([]byte{'x'}, recordBytes)
	raftDir := filepath.Join(c.dirs[node.NodeID()], "raft")
	var peak int64
	for i := range records {
		if _, err := s.rep.Append([][]byte{rec}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if (i+1)%perSnapshot != 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := node.nh.SyncRequestSnapshot(ctx, partitionShardBase, dragonboat.SnapshotOption{OverrideCompactionOverhead: true, CompactionOverhead: 0})
		cancel()
		if err != nil {
			t.Fatalf("snapshot after %d records: %v", i+1, err)
		}
		peak = max(peak, dirBytes(t, raftDir))
	}
	written := int64(records * recordBytes)
	t.Logf("log store: %d MiB at most while %d MiB were written", peak>>20, written>>20)
	// Three write buffers and their write-ahead logs, L0 files up to the compaction trigger,
	// and what a compaction writes before it deletes its inputs: well below what was written.
	if limit := written / 2; peak > limit {
		t.Fatalf("the log store grew to %d MiB while %d MiB were written (limit %d MiB): compacted entries are not reclaimed",
			peak>>20, written>>20, limit>>20)
	}
}
