package statelog

import (
	"slices"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	if again := NewMetrics(reg); again.sizeBytes != m.sizeBytes {
		t.Fatal("a second NewMetrics on the same registry did not reuse the registered metrics")
	}
	batch := fixedBatch(1, 4, 100)
	frame := frameLen(batch)
	dir := t.TempDir()
	opts := Options{Metrics: m, Name: "7", SegmentBytes: segmentHeaderSize + 2*frame}
	l := mustOpen(t, dir, opts)
	other := mustOpen(t, t.TempDir(), Options{Metrics: m, Name: "8"})
	for range 5 {
		mustAppend(t, l, batch)
	}
	mustAppend(t, other, batch)
	if err := l.SetStartOffset(9); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		partition string
		want      float64
	}{
		{"sharecoord_state_log_appended_records_total", "7", 20},
		{"sharecoord_state_log_appended_bytes_total", "7", float64(5 * frame)},
		{"sharecoord_state_log_appended_records_total", "8", 4},
		{"sharecoord_state_log_end_offset", "7", 20},
		{"sharecoord_state_log_start_offset", "7", 9},
		{"sharecoord_state_log_segments", "7", 2}, // segments at 8 and 16 remain
		{"sharecoord_state_log_size_bytes", "7", float64(l.Size())},
		{"sharecoord_state_log_size_bytes", "7", float64(2*segmentHeaderSize + 3*frame)},
		{"sharecoord_state_log_torn_tail_truncations_total", "7", 0},
		{"sharecoord_state_log_corruptions_total", "7", 0},
		{"sharecoord_fsync_duration_seconds", "", 6},
	}
	for _, tc := range tests {
		if got := metricValue(t, reg, tc.name, tc.partition); got != tc.want {
			t.Errorf("%s{partition=%q} = %v, want %v", tc.name, tc.partition, got, tc.want)
		}
	}
	// Gauges are set on open, before any append.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	reg2 := prometheus.NewRegistry()
	opts.Metrics = NewMetrics(reg2)
	mustOpen(t, dir, opts)
	if got := metricValue(t, reg2, "sharecoord_state_log_end_offset", "7"); got != 20 {
		t.Fatalf("end offset gauge after open = %v, want 20", got)
	}
	if got := metricValue(t, reg2, "sharecoord_state_log_start_offset", "7"); got != 9 {
		t.Fatalf("start offset gauge after open = %v, want 9", got)
	}
}

func TestNilMetricsRegistry(t *testing.T) {
	m := NewMetrics(nil)
	l := mustOpen(t, t.TempDir(), Options{Metrics: m})
	mustAppend(t, l, fixedBatch(1, 1, 1))
}

// The CoordinatordFsyncLatencyHigh alert compares a histogram_quantile of
// sharecoord_fsync_duration_seconds with FsyncAlertSeconds; unless that is a bucket bound, fsyncs
// well below it (a fifth of them between 51.2ms and 100ms, with the old 50µs-based buckets)
// make the estimate pass it.
func TestFsyncBucketsHoldAlertThreshold(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.observeSync(0.07)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var bounds []float64
	for _, f := range families {
		if f.GetName() == "sharecoord_fsync_duration_seconds" {
			for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
			}
		}
	}
	if !slices.Contains(bounds, FsyncAlertSeconds) {
		t.Errorf("bucket bounds %v do not hold the alert threshold %v", bounds, FsyncAlertSeconds)
	}
	if got := strconv.FormatFloat(FsyncAlertSeconds, 'g', -1, 64); got != "0.1" {
		t.Errorf("the threshold's le label would be %q, want \"0.1\" (deploy/monitoring/alerts_test.yaml)", got)
	}
	if len(bounds) == 0 || bounds[0] > 50e-6 || bounds[len(bounds)-1] < 3 {
		t.Errorf("bucket bounds %v do not span 50µs (a fast NVMe fdatasync) to 3s", bounds)
	}
}
