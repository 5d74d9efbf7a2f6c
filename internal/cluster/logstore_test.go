package cluster

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4"

	"github.com/coordinatord/coordinatord/internal/raftlog"
)

// dirBytes is the size of the files under dir. A file the log store deletes during the walk
// counts for nothing.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			var info fs.FileInfo
			if info, err = d.Info(); err == nil {
				n += info.Size()
			}
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// appendRetrying appends rec, again while the replica answers that it was not committed (the
// engine refuses proposals while its in-memory log is full, until the entries ahead apply).
func appendRetrying(t *testing.T, rep *raftlog.Replica, rec []byte) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := rep.Append([][]byte{rec})
		if err == nil {
			return
		}
		if !errors.Is(err, raftlog.ErrNotCommitted) || time.Now().After(deadline) {
			t.Fatalf("append: %v", err)
		}
	}
}

// The log store gives back the space of the entries a snapshot compacted away: writing far more
// than its write buffers hold through one partition, with a snapshot after every few write
// buffers' worth, leaves it bounded by what its buffers and levels keep, not by what was
// written (a replica's Raft log must not grow with the partition's history).
func TestLogStoreSpaceIsReclaimedAfterSnapshots(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 192 MiB through a partition")
	}
	c := newTestCluster(t, 1, 1)
	node := c.leader(0)
	// A replica appends for a shard that loaded its log.
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
		appendRetrying(t, s.rep, rec)
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
