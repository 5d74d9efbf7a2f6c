package service

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
)

// Operation names: the `operation` label of sharecoord_state_operations_total.
const (
	opInitialize  = "initialize"
	opRead        = "read"
	opWrite       = "write"
	opDelete      = "delete"
	opReadSummary = "read_summary"
)

// Metrics are the service-level metrics of API.md.
type Metrics struct {
	writeLatency prometheus.Histogram
	operations   *prometheus.CounterVec
	pending      prometheus.Gauge
	readsRefused prometheus.Counter
	stalled      prometheus.Counter
}

// NewMetrics creates the service metrics and registers them on reg (nil → not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		writeLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sharecoord_write_latency_seconds",
			Help:    "WriteShareGroupState latency, from receipt of the request to the response (all partitions durable).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 100µs … ~3.3s
		}),
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharecoord_state_operations_total",
			Help: "Per-partition outcomes of the state RPCs, by operation and Kafka error code name (NONE on success).",
		}, []string{"operation", "code"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sharecoord_pending_response_bytes",
			Help: "Bytes of state batches held by read responses being built or waiting to be sent (bounded by grpc.max.pending.response.bytes).",
		}),
		readsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sharecoord_read_responses_refused_total",
			Help: "Partitions of reads answered COORDINATOR_NOT_AVAILABLE because the read responses held filled grpc.max.pending.response.bytes.",
		}),
		stalled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sharecoord_stalled_responses_total",
			Help: "Read responses not sent within connections.send.timeout.ms (their clients did not read them); the connection of each was closed.",
		}),
	}
	// Pre-create the success series so rates and ratios have data from the first scrape.
	for _, op := range []string{opInitialize, opRead, opWrite, opDelete, opReadSummary} {
		m.operations.WithLabelValues(op, codeName(kafkaerr.None))
	}
	if reg != nil {
		reg.MustRegister(m.writeLatency, m.operations, m.pending, m.readsRefused, m.stalled)
	}
	return m
}

func (m *Metrics) observeWrite(d time.Duration) {
	if m != nil {
		m.writeLatency.Observe(d.Seconds())
	}
}

// pendingGauge is the gauge of the response budget's bytes (nil without metrics).
func (m *Metrics) pendingGauge() prometheus.Gauge {
	if m == nil {
		return nil
	}
	return m.pending
}

func (m *Metrics) countReadRefused() {
	if m != nil {
		m.readsRefused.Inc()
	}
}

func (m *Metrics) countStalled() {
	if m != nil {
		m.stalled.Inc()
	}
}

func (m *Metrics) countOp(op string, c kafkaerr.Code) {
	if m != nil {
		m.operations.WithLabelValues(op, codeName(c)).Inc()
	}
}

// codeName is Kafka's name of an error code (the API enum's name without ERROR_CODE_), or its
// number for a code kafkaerr does not define.
func codeName(c kafkaerr.Code) string {
	if c.Known() {
		return c.String()
	}
	return strconv.Itoa(int(c))
}
