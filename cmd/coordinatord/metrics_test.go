package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// apiMetrics are the metric families API.md fixes, with the labels each must carry.
var apiMetrics = map[string][]string{
	"sharecoord_records_appended_total":       {"partition", "type"},
	"sharecoord_record_bytes_appended_total":  {"partition", "type"},
	"sharecoord_group_records_appended_total": {"group", "type"},
	"sharecoord_write_latency_seconds":        nil,
	"sharecoord_fsync_duration_seconds":       nil,
	"sharecoord_commit_batch_records":         nil,
	"sharecoord_state_log_size_bytes":         {"partition"},
	"sharecoord_state_log_start_offset":       {"partition"},
	"sharecoord_state_log_end_offset":         {"partition"},
	"sharecoord_last_pruned_offset":           {"partition"},
	"sharecoord_partition_load_seconds":       {"partition"},
	"sharecoord_share_partitions":             {"partition"},
	// The gRPC server metrics of go-grpc-middleware and the Go and process collectors.
	"grpc_server_handled_total":     {"grpc_service", "grpc_method", "grpc_code"},
	"grpc_server_handling_seconds":  {"grpc_service", "grpc_method"},
	"go_goroutines":                 nil,
	"process_resident_memory_bytes": nil,
}

// perPartition are the gauges that must have a sample for every partition once it has loaded.
var perPartition = []string{
	"sharecoord_state_log_size_bytes", "sharecoord_state_log_start_offset", "sharecoord_state_log_end_offset",
	"sharecoord_last_pruned_offset", "sharecoord_partition_load_seconds", "sharecoord_share_partitions",
}

func scrape(t *testing.T, addr string) map[string]*dtoFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := make(map[string]*dtoFamily, len(families))
	for name, f := range families {
		fam := &dtoFamily{labels: map[string]map[string]bool{}}
		for _, m := range f.GetMetric() {
			fam.samples++
			for _, l := range m.GetLabel() {
				if fam.labels[l.GetName()] == nil {
					fam.labels[l.GetName()] = map[string]bool{}
				}
				fam.labels[l.GetName()][l.GetValue()] = true
			}
		}
		out[name] = fam
	}
	return out
}

// dtoFamily summarizes one scraped metric family: its sample count and label values.
type dtoFamily struct {
	samples int
	labels  map[string]map[string]bool
}

// TestMetricsOfTheContract scrapes a running server after one write and checks every metric of
// API.md is exported with its labels, and every per-partition gauge has a sample per partition.
func TestMetricsOfTheContract(t *testing.T) {
	const partitions = 4
	p := startProc(t, t.TempDir(), "--override", "share.coordinator.state.topic.num.partitions=4")
	ctx := ctxT(t)
	if _, err := p.state.InitializeShareGroupState(ctx, initReq("metrics", topicA, 0, 1, 0)); err != nil {
		t.Fatal(err)
	}
	resp, err := p.state.WriteShareGroupState(ctx, writeReq("metrics", topicA, 0, 0, &pb.StateBatch{FirstOffset: 0, LastOffset: 1, DeliveryState: 2, DeliveryCount: 1}))
	if err != nil {
		t.Fatal(err)
	}
	r := resp.GetResults()[0].GetPartitions()[0]
	mustOK(t, "write", r.GetErrorCode(), r.GetErrorMessage())

	got := scrape(t, p.metricsAddr)
	for name, labels := range apiMetrics {
		fam, ok := got[name]
		if !ok || fam.samples == 0 {
			t.Errorf("metric %s is not exported", name)
			continue
		}
		for _, l := range labels {
			if len(fam.labels[l]) == 0 {
				t.Errorf("metric %s has no %q label", name, l)
			}
		}
	}
	for _, name := range perPartition {
		if fam := got[name]; fam == nil || len(fam.labels["partition"]) != partitions {
			t.Errorf("%s: samples for partitions %v, want all %d", name, fam.labelValues("partition"), partitions)
		}
	}
	if types := got["sharecoord_records_appended_total"].labels["type"]; !types["snapshot"] || !types["update"] || !types["tombstone"] {
		t.Errorf("sharecoord_records_appended_total types = %v, want snapshot, update and tombstone", types)
	}
}

func (f *dtoFamily) labelValues(name string) []string {
	if f == nil {
		return nil
	}
	var out []string
	for v := range f.labels[name] {
		out = append(out, v)
	}
	return out
}
