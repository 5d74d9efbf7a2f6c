package shard

import (
	"strconv"
	"sync"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
)

// otherGroup is the group label value shared by the groups beyond the label limit.
const otherGroup = "__other__"

// maxGroupLabelBytes bounds a group id that gets a label value of its own: a longer one, like one
// with control characters, would make an unwieldy series name, so it counts as __other__.
const maxGroupLabelBytes = 255

// Metrics holds the shard metrics of API.md; one *Metrics is shared by every shard of a process.
type Metrics struct {
	records     *prometheus.CounterVec // partition, type
	bytes       *prometheus.CounterVec // partition, type
	groups      *prometheus.CounterVec // group, type
	commitBatch prometheus.Histogram
	lastPruned  *prometheus.GaugeVec
	loadSeconds *prometheus.GaugeVec
	keys        *prometheus.GaugeVec
	reloads     *prometheus.CounterVec
	status      *prometheus.GaugeVec // partition, status

	groupMax int
	mu       sync.Mutex
	labeled  map[string]struct{}
}

// NewMetrics creates the shard metrics and registers them on reg (nil: not registered). At most
// groupLabelMax distinct groups (first come, first served, process-wide) get their own `group`
// label value; every other group is counted under group="__other__", as is a group id longer than
// 255 bytes or holding control characters. A negative groupLabelMax is treated as 0.
func NewMetrics(reg prometheus.Registerer, groupLabelMax int) *Metrics {
	m := &Metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharecoord_records_appended_total",
			Help: "Share-group state records made durable, by state partition and record type (snapshot, update, tombstone).",
		}, []string{"partition", "type"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharecoord_record_bytes_appended_total",
			Help: "Encoded bytes of the share-group state records made durable, by state partition and record type.",
		}, []string{"partition", "type"}),
		groups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharecoord_group_records_appended_total",
			Help: "Share-group state records made durable, by share group (bounded label set; the rest count as __other__) and record type.",
		}, []string{"group", "type"}),
		commitBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sharecoord_commit_batch_records",
			Help:    "Records per group commit (one append to a state log, made durable by one sync).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13),
		}),
		lastPruned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sharecoord_last_pruned_offset",
			Help: "Last log-start offset set by pruning (starts at the log-start offset found on load).",
		}, []string{"partition"}),
		loadSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sharecoord_partition_load_seconds",
			Help: "Duration of the last load (log replay) of the state partition.",
		}, []string{"partition"}),
		keys: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sharecoord_share_partitions",
			Help: "Share-partition keys held by the state partition.",
		}, []string{"partition"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharecoord_shard_reloads_total",
			Help: "Times the state partition dropped its state and reloaded it from its log after a write failure.",
		}, []string{"partition"}),
		status: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sharecoord_partition_status",
			Help: "Lifecycle status of the state partition: 1 for its current status (loading, active, failed, closed), 0 for the others.",
		}, []string{"partition", "status"}),
		groupMax: max(groupLabelMax, 0),
		labeled:  make(map[string]struct{}),
	}
	if reg != nil {
		reg.MustRegister(m.records, m.bytes, m.groups, m.commitBatch, m.lastPruned, m.loadSeconds, m.keys, m.reloads, m.status)
	}
	return m
}

// groupLabel returns the label value for group: itself while fewer than groupMax groups have one
// and it is fit for a label value.
func (m *Metrics) groupLabel(group string) string {
	if !labelable(group) {
		return otherGroup
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.labeled[group]; ok {
		return group
	}
	if len(m.labeled) < m.groupMax {
		m.labeled[group] = struct{}{}
		return group
	}
	return otherGroup
}

// labelable reports whether group may be a label value of its own: not the __other__ bucket's name,
// at most maxGroupLabelBytes, no control characters.
func labelable(group string) bool {
	if group == otherGroup || len(group) > maxGroupLabelBytes {
		return false
	}
	for _, r := range group {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// shardMetrics are the series of one partition, bound once.
type shardMetrics struct {
	m           *Metrics
	records     [numKinds]prometheus.Counter
	bytes       [numKinds]prometheus.Counter
	partition   string
	lastPruned  prometheus.Gauge // these three: nil until the first load succeeded (see loaded)
	loadSeconds prometheus.Gauge
	keys        prometheus.Gauge
	reloads     prometheus.Counter
	status      [numStates]prometheus.Gauge
	groups      map[string]*[numKinds]prometheus.Counter // groups with a label of their own
	other       *[numKinds]prometheus.Counter            // the __other__ bucket's, once resolved
}

func newShardMetrics(m *Metrics, partition int) *shardMetrics {
	if m == nil {
		return nil
	}
	p := strconv.Itoa(partition)
	sm := &shardMetrics{
		m:         m,
		partition: p,
		reloads:   m.reloads.WithLabelValues(p),
		groups:    make(map[string]*[numKinds]prometheus.Counter),
	}
	for k := recordKind(0); k < numKinds; k++ {
		sm.records[k] = m.records.WithLabelValues(p, k.String())
		sm.bytes[k] = m.bytes.WithLabelValues(p, k.String())
	}
	for st := range State(numStates) {
		sm.status[st] = m.status.WithLabelValues(p, st.String())
	}
	return sm
}

// loaded publishes what a successful load found: its duration and the log-start offset (the last
// pruned offset until the next prune); the keys held follow with the shard's publish. The three
// gauges are created by the first successful load, so that a partition that never loaded (a
// damaged log) shows none of them rather than a load of 0 seconds, an offset of 0 and no keys,
// which would all be false.
func (sm *shardMetrics) loaded(took time.Duration, lastPruned int64) {
	if sm == nil {
		return
	}
	if sm.keys == nil {
		sm.lastPruned = sm.m.lastPruned.WithLabelValues(sm.partition)
		sm.loadSeconds = sm.m.loadSeconds.WithLabelValues(sm.partition)
		sm.keys = sm.m.keys.WithLabelValues(sm.partition)
	}
	sm.loadSeconds.Set(took.Seconds())
	sm.setLastPruned(lastPruned)
}

// setLastPruned and setKeys update their gauge once the first load has created it (see loaded).
func (sm *shardMetrics) setLastPruned(v int64) {
	if sm != nil && sm.lastPruned != nil {
		sm.lastPruned.Set(float64(v))
	}
}

func (sm *shardMetrics) setKeys(n int) {
	if sm != nil && sm.keys != nil {
		sm.keys.Set(float64(n))
	}
}

// setStatus marks st as the partition's current status.
func (sm *shardMetrics) setStatus(st State) {
	if sm == nil {
		return
	}
	for i, g := range sm.status {
		if State(i) == st {
			g.Set(1)
		} else {
			g.Set(0)
		}
	}
}

// group returns the counters of group, resolving a labeled group's once per shard. Only groups
// with a label of their own are remembered (at most the label cap): the __other__ bucket takes any
// number of group ids, which a map of them would keep forever.
func (sm *shardMetrics) group(group string) *[numKinds]prometheus.Counter {
	if c, ok := sm.groups[group]; ok {
		return c
	}
	label := sm.m.groupLabel(group)
	if label == otherGroup {
		if sm.other == nil {
			sm.other = sm.counters(otherGroup)
		}
		return sm.other
	}
	c := sm.counters(label)
	sm.groups[group] = c
	return c
}

// counters binds the group counters of label.
func (sm *shardMetrics) counters(label string) *[numKinds]prometheus.Counter {
	c := new([numKinds]prometheus.Counter)
	for k := recordKind(0); k < numKinds; k++ {
		c[k] = sm.m.groups.WithLabelValues(label, k.String())
	}
	return c
}
