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
	return exportedKinds[family]
}

// exportedKinds is the table behind ExportedKind.
var exportedKinds = map[string]string{
	"sharecoord_records_appended_total":                  Counter,
	"sharecoord_record_bytes_appended_total":             Counter,
	"sharecoord_group_records_appended_total":            Counter,
	"sharecoord_state_operations_total":                  Counter,
	"sharecoord_state_log_appended_bytes_total":          Counter,
	"sharecoord_state_log_appended_records_total":        Counter,
	"sharecoord_state_log_torn_tail_truncations_total":   Counter,
	"sharecoord_state_log_durable_end_truncations_total": Counter,
	"sharecoord_state_log_corruptions_total":             Counter,
	"sharecoord_tls_reloads_total":                       Counter,
	"sharecoord_shard_reloads_total":                     Counter,
	"sharecoord_connections_refused_total":               Counter,
	"sharecoord_read_responses_refused_total":            Counter,
	"sharecoord_stalled_responses_total":                 Counter,
	"sharecoord_raft_leader_changes_total":               Counter,
	"promhttp_metric_handler_errors_total":               Counter,
	"grpc_server_started_total":                          Counter,
	"grpc_server_handled_total":                          Counter,
	"grpc_server_msg_received_total":                     Counter,
	"grpc_server_msg_sent_total":                         Counter,
	"sharecoord_state_log_size_bytes":                    Gauge,
	"sharecoord_state_log_start_offset":                  Gauge,
	"sharecoord_state_log_end_offset":                    Gauge,
	"sharecoord_last_pruned_offset":                      Gauge,
	"sharecoord_partition_load_seconds":                  Gauge,
	"sharecoord_share_partitions":                        Gauge,
	"sharecoord_partition_status":                        Gauge,
	"sharecoord_group_config_clamped":                    Gauge,
	"sharecoord_state_log_segments":                      Gauge,
	"sharecoord_tls_certificate_not_after_seconds":       Gauge,
	"sharecoord_connections_open":                        Gauge,
	"sharecoord_pending_response_bytes":                  Gauge,
	"sharecoord_raft_leader":                             Gauge,
	"sharecoord_raft_leader_node":                        Gauge,
	"sharecoord_raft_term":                               Gauge,
	"sharecoord_raft_applied_index":                      Gauge,
	"sharecoord_raft_caught_up":                          Gauge,
	"sharecoord_raft_replica_failed":                     Gauge,
	"sharecoord_raft_replicas":                           Gauge,
	"sharecoord_raft_peer_last_contact_seconds":          Gauge,
	"sharecoord_write_latency_seconds":                   Histogram,
	"sharecoord_fsync_duration_seconds":                  Histogram,
	"sharecoord_commit_batch_records":                    Histogram,
	"sharecoord_raft_proposal_seconds":                   Histogram,
	"grpc_server_handling_seconds":                       Histogram,
}

// OnlyWith returns the configuration under which a coordinatord server exports family, when it
// does not always (then a Prometheus scraping a server without it holds no series of it), or "".
func OnlyWith(family string) string {
	switch family {
	case "sharecoord_tls_reloads_total", "sharecoord_tls_certificate_not_after_seconds":
		return "tls.enabled=true"
	}
	if strings.HasPrefix(family, "sharecoord_raft_") {
		return "--initial-cluster (cluster mode)"
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
