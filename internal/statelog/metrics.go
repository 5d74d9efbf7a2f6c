package statelog

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds the statelog metrics of a process. Create it once with NewMetrics and share it
// among all logs; each log's series carry partition=Options.Name. A nil *Metrics records
// nothing.
type Metrics struct {
	fsyncDuration   prometheus.Histogram
	sizeBytes       *prometheus.GaugeVec
	startOffset     *prometheus.GaugeVec
	endOffset       *prometheus.GaugeVec
	segments        *prometheus.GaugeVec
	appendedBytes   *prometheus.CounterVec
	appendedRecords *prometheus.CounterVec
	tornTails       *prometheus.CounterVec
	corruptions     *prometheus.CounterVec
	durableEndCuts  *prometheus.CounterVec
}

// FsyncAlertSeconds is the fsync latency above which the CoordinatordFsyncLatencyHigh alert
// (deploy/monitoring/alerts.yaml) fires on the 99th percentile.
const FsyncAlertSeconds = 0.1

// FsyncBuckets are the upper bounds of sharecoord_fsync_duration_seconds: powers of two times
// FsyncAlertSeconds, from 48.8µs to 3.2s. The alert threshold must be a bucket bound:
// histogram_quantile interpolates linearly inside a bucket, so with a threshold inside one
// (100ms in a (51.2ms, 102.4ms] bucket) a p99 estimate passes the threshold whenever about a
// fifth of all fsyncs fall in that bucket, though none took 100ms. Dividing and multiplying
// by two is exact in floating point, so one bound is exactly 0.1 (le="0.1").
var FsyncBuckets = prometheus.ExponentialBuckets(FsyncAlertSeconds/(1<<11), 2, 17)

// NewMetrics creates every statelog metric and registers it on reg (nil: not registered). A
// metric reg already holds with the same description is reused, so calling NewMetrics twice
// with one registry is harmless. Any other registration conflict is a programming error and
// panics, as prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	part := []string{"partition"}
	m := &Metrics{
		fsyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sharecoord_fsync_duration_seconds",
			Help:    "Duration of one group-commit fsync of a state log, or of one file-system sync shared by the logs of a sync group.",
			Buckets: FsyncBuckets,
		}),
		sizeBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sharecoord_state_log_size_bytes",
			Help: "Bytes of the segments of the state log; a segment dropped below the log-start offset stops counting before its file is deleted.",
		}, part),
		startOffset: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sharecoord_state_log_start_offset",
			Help: "Log-start offset of the state log: the first offset replay returns.",
		}, part),
		endOffset: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sharecoord_state_log_end_offset",
			Help: "End offset of the state log: the offset the next appended record gets.",
		}, part),
		segments: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sharecoord_state_log_segments",
			Help: "Segments of the state log; a segment dropped below the log-start offset stops counting before its file is deleted.",
		}, part),
		appendedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharecoord_state_log_appended_bytes_total",
			Help: "Bytes written to the state log by durable appends, framing included.",
		}, part),
		appendedRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharecoord_state_log_appended_records_total",
			Help: "Records made durable in the state log.",
		}, part),
		tornTails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharecoord_state_log_torn_tail_truncations_total",
			Help: "Partial or bad frames truncated from the tail of the newest segment on open.",
		}, part),
		corruptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharecoord_state_log_corruptions_total",
			Help: "Corruptions detected in the state log (open, replay or scan refused).",
		}, part),
		durableEndCuts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharecoord_state_log_durable_end_truncations_total",
			Help: "Reopens after a failed append that removed bytes past the log's durable end (an unacknowledged batch).",
		}, part),
	}
	if reg != nil {
		m.fsyncDuration = register(reg, m.fsyncDuration)
		m.sizeBytes = register(reg, m.sizeBytes)
		m.startOffset = register(reg, m.startOffset)
		m.endOffset = register(reg, m.endOffset)
		m.segments = register(reg, m.segments)
		m.appendedBytes = register(reg, m.appendedBytes)
		m.appendedRecords = register(reg, m.appendedRecords)
		m.tornTails = register(reg, m.tornTails)
		m.corruptions = register(reg, m.corruptions)
		m.durableEndCuts = register(reg, m.durableEndCuts)
	}
	return m
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(fmt.Sprintf("statelog: register metrics: %v", err))
}

// logMetrics are the series of one log; the zero value records nothing. Its counters exist from
// the first open of the log (at 0: nothing appended, nothing found damaged); its gauges only once
// an open has succeeded, so that a log that never opened (damaged, unreadable) shows no bounds
// rather than an empty log of 0 bytes at offset 0.
type logMetrics struct {
	fsyncDuration   prometheus.Observer
	appendedBytes   prometheus.Counter
	appendedRecords prometheus.Counter
	tornTails       prometheus.Counter
	corruptions     prometheus.Counter
	durableEndCuts  prometheus.Counter
	gauges          *logGauges
}

// logGauges are the gauges of one log, bound on its first publish (by the log's owner, one
// goroutine).
type logGauges struct {
	m                                       *Metrics
	name                                    string
	sizeBytes, startOffset, endOffset, segs prometheus.Gauge
}

func (g *logGauges) bind() {
	if g.sizeBytes != nil {
		return
	}
	g.sizeBytes = g.m.sizeBytes.WithLabelValues(g.name)
	g.startOffset = g.m.startOffset.WithLabelValues(g.name)
	g.endOffset = g.m.endOffset.WithLabelValues(g.name)
	g.segs = g.m.segments.WithLabelValues(g.name)
}

func (m *Metrics) forLog(name string) logMetrics {
	if m == nil {
		return logMetrics{}
	}
	return logMetrics{
		fsyncDuration:   m.fsyncDuration,
		appendedBytes:   m.appendedBytes.WithLabelValues(name),
		appendedRecords: m.appendedRecords.WithLabelValues(name),
		tornTails:       m.tornTails.WithLabelValues(name),
		corruptions:     m.corruptions.WithLabelValues(name),
		durableEndCuts:  m.durableEndCuts.WithLabelValues(name),
		gauges:          &logGauges{m: m, name: name},
	}
}

func (lm logMetrics) enabled() bool { return lm.gauges != nil }

// bounds publishes the log's current bounds, size and segment count (creating the gauges on the
// first call).
func (lm logMetrics) bounds(start, end, size int64, segments int) {
	if !lm.enabled() {
		return
	}
	g := lm.gauges
	g.bind()
	g.startOffset.Set(float64(start))
	g.endOffset.Set(float64(end))
	g.sizeBytes.Set(float64(size))
	g.segs.Set(float64(segments))
}

// appended counts a durable append; fsyncSeconds < 0 means the append did not sync on its own
// (a SyncGroup observes its shared syncs).
func (lm logMetrics) appended(records, bytes int, fsyncSeconds float64) {
	if !lm.enabled() {
		return
	}
	if fsyncSeconds >= 0 {
		lm.fsyncDuration.Observe(fsyncSeconds)
	}
	lm.appendedRecords.Add(float64(records))
	lm.appendedBytes.Add(float64(bytes))
}

func (lm logMetrics) tornTail() {
	if lm.enabled() {
		lm.tornTails.Inc()
	}
}

func (lm logMetrics) corruption() {
	if lm.enabled() {
		lm.corruptions.Inc()
	}
}

func (lm logMetrics) durableEndCut() {
	if lm.enabled() {
		lm.durableEndCuts.Inc()
	}
}

// observeSync records the duration of one shared file-system sync.
func (m *Metrics) observeSync(seconds float64) {
	if m != nil {
		m.fsyncDuration.Observe(seconds)
	}
}
