package tradeoff

import (
	"context"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/workload"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

// The measurement writes every hot share partition as often as the others, also when the number
// of goroutines does not divide the number of share partitions (64 for 100, as in the published
// study): no share partition's snapshot cycle runs slower than the rest.
func TestMeasureWritesSharePartitionsEvenly(t *testing.T) {
	const parts, writes = 100, 100 * 20
	for _, concurrency := range []int{64, 7, 100} {
		cfg := Config{Shape: workload.Shape{GroupID: "g", SharePartitions: parts, StateBatches: 50, BatchesPerWrite: 2}, Concurrency: concurrency}
		s := shard.Open(nil, workload.FixedLimit(1000), shard.Options{AppendLingerMs: -1, WriteTimeout: time.Minute}, shard.NewLocalLog(nil, t.TempDir(), statelog.Options{}))
		if err := s.WaitLoaded(context.Background()); err != nil {
			t.Fatal(err)
		}
		d := newDriver(s, cfg)
		if err := d.initialize(context.Background()); err != nil {
			t.Fatal(err)
		}
		before := make([]int64, parts)
		for i, p := range d.parts {
			before[i] = p.Batches()
		}
		if n, err := d.measure(context.Background(), writes, time.Time{}, 0); err != nil || n != writes {
			t.Fatalf("measure: %d writes, %v", n, err)
		}
		lo, hi := int64(1<<62), int64(0)
		for i, p := range d.parts {
			w := (p.Batches() - before[i]) / int64(cfg.Shape.BatchesPerWrite)
			lo, hi = min(lo, w), max(hi, w)
		}
		if lo < writes/parts-1 || hi > writes/parts+1 {
			t.Errorf("concurrency %d: a share partition got between %d and %d writes, want %d each", concurrency, lo, hi, writes/parts)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Log growth counts what the log files grow by: the records with their length prefixes and a frame
// header per commit, not the record payloads alone.
func TestGrowthIsWhatTheLogFilesGrow(t *testing.T) {
	cfg := Config{Shape: workload.Shape{GroupID: "g", SharePartitions: 10, StateBatches: 50, BatchesPerWrite: 2}, Concurrency: 4}
	s := shard.Open(nil, workload.FixedLimit(1000), shard.Options{AppendLingerMs: -1, WriteTimeout: time.Minute}, shard.NewLocalLog(nil, t.TempDir(), statelog.Options{}))
	if err := s.WaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := newDriver(s, cfg)
	if err := d.initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	n, err := d.measure(context.Background(), 500, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	after := s.Stats()
	row := Row{Writes: n, Commits: after.Commits - before.Commits,
		UpdateRecords: after.Records.Updates - before.Records.Updates, SnapshotRecords: after.Records.Snapshots - before.Records.Snapshots,
		UpdateBytes: after.Bytes.Updates - before.Bytes.Updates, SnapshotBytes: after.Bytes.Snapshots - before.Bytes.Snapshots}
	if got, want := row.AppendedBytes(), after.LogSize-before.LogSize; got != want {
		t.Fatalf("appended bytes %d, the log files grew by %d", got, want)
	}
}
