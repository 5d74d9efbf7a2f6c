package shard

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/statelog"
)

// A partition whose log never loaded has no per-partition gauge but its status: not a state log
// of 0 bytes at offset 0, a last pruned offset of 0, a load of 0 seconds and no keys, which a
// dashboard would show as an empty, healthy log. Once the log is repaired and loads, they appear.
func TestGaugesOnlyAfterALoad(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	open := func(reg *prometheus.Registry) *Shard {
		return openLocal(zaptest.NewLogger(t), newLimits(500), testOpts{LogDir: partitionLogDir(dataDir, 4), Log: statelog.Options{Metrics: statelog.NewMetrics(reg)}, Options: Options{Partition: 4, Now: newFakeClock().Now, Metrics: NewMetrics(reg, 10)}})
	}
	gauges := []string{
		"sharecoord_state_log_size_bytes", "sharecoord_state_log_start_offset", "sharecoord_state_log_end_offset",
		"sharecoord_state_log_segments", "sharecoord_last_pruned_offset", "sharecoord_partition_load_seconds",
		"sharecoord_share_partitions",
	}

	// Write some state, then damage the middle of the segment.
	s := open(prometheus.NewRegistry())
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 20; p++ {
		mustOK(t, s.Initialize(ctx, InitializeRequest{Key: Key{"g", testTopic, p}, StateEpoch: 1}))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(partitionLogDir(dataDir, 4), "*.seg"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v, %v", segs, err)
	}
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	good := append([]byte(nil), data...)
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(segs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	s = open(reg)
	if err := s.WaitLoaded(ctx); err == nil {
		t.Fatal("a damaged log loaded")
	}
	for _, name := range gauges {
		if n := seriesCount(t, reg, name); n != 0 {
			t.Errorf("%s has %d series for a partition that never loaded", name, n)
		}
	}
	if got := metricValue(t, s.metrics.status[Failed]); got != 1 {
		t.Errorf("status failed = %v, want 1", got)
	}
	if err := s.Close(); err != nil {
		t.Logf("close: %v", err)
	}

	// Repaired (here: the original bytes back), the next start publishes every gauge.
	if err := os.WriteFile(segs[0], good, 0o644); err != nil {
		t.Fatal(err)
	}
	reg = prometheus.NewRegistry()
	s = open(reg)
	defer s.Close()
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatalf("the repaired log did not load: %v", err)
	}
	for _, name := range gauges {
		if n := seriesCount(t, reg, name); n != 1 {
			t.Errorf("%s has %d series after a load, want 1", name, n)
		}
	}
	if got := metricValue(t, s.metrics.keys); got != 20 {
		t.Errorf("share partitions = %v, want 20", got)
	}
}
