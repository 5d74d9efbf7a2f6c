package promspec

import "strings"

// Family kinds of ExportedKind.
const (
	Counter   = "counter"
	Gauge     = "gauge"
	Histogram = "histogram"
)

// ExportedKind returns the kind of the metric family that a coordinatord server exports under
// family (its name as registered: a histogram without _bucket, _sum or _count), or "" if the
// server exports no such family. The list is the server's own metrics (those the README's
// Metrics section names), plus go-grpc-middleware's server metrics and the error counter of
// client_golang's metrics handler; the Go and process collectors are accepted by their go_ and
// process_ prefixes. promcheck fails when the live server exports a family missing here.
func ExportedKind(family string) string {
	switch family {
	case "sharecoord_records_appended_total",
		"sharecoord_record_bytes_appended_total",
		"sharecoord_group_records_appended_total",
		"sharecoord_state_operations_total",
		"sharecoord_state_log_appended_bytes_total",
		"sharecoord_state_log_appended_records_total",
		"sharecoord_state_log_torn_tail_truncations_total",
		"sharecoord_state_log_durable_end_truncations_total",
		"sharecoord_state_log_corruptions_total",
		"sharecoord_tls_reloads_total",
		"sharecoord_shard_reloads_total",
		"promhttp_metric_handler_errors_total",
		"grpc_server_started_total",
		"grpc_server_handled_total",
		"grpc_server_msg_received_total",
		"grpc_server_msg_sent_total":
		return Counter
	case "sharecoord_state_log_size_bytes",
		"sharecoord_state_log_start_offset",
		"sharecoord_state_log_end_offset",
		"sharecoord_last_pruned_offset",
		"sharecoord_partition_load_seconds",
		"sharecoord_share_partitions",
		"sharecoord_partition_status",
		"sharecoord_group_config_clamped",
		"sharecoord_state_log_segments",
		"sharecoord_tls_certificate_not_after_seconds":
		return Gauge
	case "sharecoord_write_latency_seconds",
		"sharecoord_fsync_duration_seconds",
		"sharecoord_commit_batch_records",
		"grpc_server_handling_seconds":
		return Histogram
	}
	return ""
}

// OnlyWith returns the configuration under which a coordinatord server exports family, when it
// does not always (then a Prometheus scraping a server without it holds no series of it), or "".
func OnlyWith(family string) string {
	switch family {
	case "sharecoord_tls_reloads_total", "sharecoord_tls_certificate_not_after_seconds":
		return "tls.enabled=true"
	}
	return ""
}

// KnownSeriesName reports whether name is a series name that Prometheus holds for a
// coordinatord target: a counter or gauge family, a histogram family with its _bucket, _sum or
// _count suffix, a go_ or process_ collector metric, or the scrape's own up.
func KnownSeriesName(name string) bool {
	if name == "up" || strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
		return true
	}
	switch ExportedKind(name) {
	case Counter, Gauge:
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if family, ok := strings.CutSuffix(name, suffix); ok && ExportedKind(family) == Histogram {
			return true
		}
	}
	return false
}
