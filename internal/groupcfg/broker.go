package groupcfg

import (
	"net/netip"

	"github.com/coordinatord/coordinatord/internal/connlimit"
)

// brokerState holds every broker key's value in force with its source. It is immutable once
// published; changes build a new one.
type brokerState struct {
	schema *schema
	vals   []value        // by position in schema.defs (broker keys only)
	source []ConfigSource // by position
	origin []string       // by position: "file …", "environment …", "--override", "dynamic", "" (default)
}

// newBrokerState returns the built-in defaults of every broker key.
func newBrokerState(sch *schema) *brokerState {
	b := &brokerState{
		schema: sch,
		vals:   make([]value, len(sch.defs)),
		source: make([]ConfigSource, len(sch.defs)),
		origin: make([]string, len(sch.defs)),
	}
	for _, i := range sch.broker {
		b.vals[i] = sch.defaults[i]
		b.source[i] = SourceDefaultConfig
	}
	return b
}

func (b *brokerState) clone() *brokerState {
	c := *b
	c.vals = append([]value(nil), b.vals...)
	c.source = append([]ConfigSource(nil), b.source...)
	c.origin = append([]string(nil), b.origin...)
	return &c
}

// get returns the value in force of the broker key name.
func (b *brokerState) get(name string) (value, bool) {
	i, ok := b.schema.index[name]
	if !ok || b.schema.defs[i].Scope != ScopeBroker {
		return value{}, false
	}
	return b.vals[i], true
}

// num returns the value in force of a numeric broker key (0 for a name the table lacks).
func (b *brokerState) num(name string) int64 {
	v, _ := b.get(name)
	return v.num
}

// Entry is a broker key's value in force and where it comes from.
type Entry struct {
	Name   string
	Value  string       // canonical text; "[hidden]" for sensitive keys
	Source ConfigSource // DYNAMIC_BROKER_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG
	Origin string       // for static values: "file PATH", "environment VAR" or "--override"; "" otherwise
}

func (b *brokerState) entries() []Entry {
	out := make([]Entry, 0, len(b.schema.broker))
	for _, i := range b.schema.broker {
		d := &b.schema.defs[i]
		text := b.vals[i].text
		if d.hidden() {
			text = "[hidden]"
		}
		out = append(out, Entry{Name: d.Name, Value: text, Source: b.source[i], Origin: b.origin[i]})
	}
	return out
}

// Broker is a snapshot of the broker-level values in force, with typed getters. It is immutable
// and safe for concurrent use; a later dynamic change is seen by a later Manager.Broker() call.
// The zero Broker reports the built-in defaults.
type Broker struct {
	state *brokerState
}

// lookup returns the value in force and the definition of the broker key name.
func (b Broker) lookup(name string) (value, *Definition, bool) {
	st := b.state
	if st == nil {
		sch, err := builtinSchema()
		if err != nil {
			return value{}, nil, false
		}
		st = newBrokerState(sch)
	}
	v, ok := st.get(name)
	if !ok {
		return value{}, nil, false
	}
	d, _ := st.schema.lookup(name)
	return v, d, true
}

func (b Broker) intOf(name string) int {
	v, _, _ := b.lookup(name)
	return int(v.num)
}

func (b Broker) longOf(name string) int64 {
	v, _, _ := b.lookup(name)
	return v.num
}

// Int returns the value of a numeric (INT or LONG) broker key; ok is false for any other name.
func (b Broker) Int(name string) (n int64, ok bool) {
	v, d, ok := b.lookup(name)
	if !ok || !isNumeric(d.Type) {
		return 0, false
	}
	return v.num, true
}

// Bool returns the value of a BOOLEAN broker key; ok is false for any other name.
func (b Broker) Bool(name string) (flag, ok bool) {
	v, d, ok := b.lookup(name)
	if !ok || d.Type != TypeBoolean {
		return false, false
	}
	return v.flag, true
}

// Text returns the canonical text of any broker key's value (including secrets: callers that
// log must mask them); ok is false for a name that is not a broker key.
func (b Broker) Text(name string) (text string, ok bool) {
	v, _, ok := b.lookup(name)
	return v.text, ok
}

// List returns the items of a LIST broker key; ok is false for any other name.
func (b Broker) List(name string) (items []string, ok bool) {
	v, d, ok := b.lookup(name)
	if !ok || d.Type != TypeList {
		return nil, false
	}
	return append([]string(nil), v.list...), true
}

// NumPartitions is share.coordinator.state.topic.num.partitions.
func (b Broker) NumPartitions() int { return b.intOf(keyNumPartitions) }

// ReplicationFactor is share.coordinator.state.topic.replication.factor.
func (b Broker) ReplicationFactor() int { return b.intOf(keyReplicationFactor) }

// SegmentBytes is share.coordinator.state.topic.segment.bytes.
func (b Broker) SegmentBytes() int { return b.intOf(keySegmentBytes) }

// SnapshotUpdateRecordsPerSnapshot is share.coordinator.snapshot.update.records.per.snapshot in
// force: the ceiling of every group's snapshot limit and the limit of groups without an override.
func (b Broker) SnapshotUpdateRecordsPerSnapshot() int { return b.intOf(keySnapshotCeiling) }

// AppendLingerMs is share.coordinator.append.linger.ms (-1 adaptive, 0 flush each, >0 linger).
func (b Broker) AppendLingerMs() int { return b.intOf(keyAppendLingerMs) }

// WriteTimeoutMs is share.coordinator.write.timeout.ms.
func (b Broker) WriteTimeoutMs() int { return b.intOf(keyWriteTimeoutMs) }

// LoadBufferSize is share.coordinator.load.buffer.size.
func (b Broker) LoadBufferSize() int { return b.intOf(keyLoadBufferSize) }

// PruneIntervalMs is share.coordinator.state.topic.prune.interval.ms.
func (b Broker) PruneIntervalMs() int { return b.intOf(keyPruneIntervalMs) }

// ColdPartitionSnapshotIntervalMs is share.coordinator.cold.partition.snapshot.interval.ms.
func (b Broker) ColdPartitionSnapshotIntervalMs() int { return b.intOf(keyColdSnapshotInterval) }

// MetricsGroupLabelMax is metrics.group.label.max.
func (b Broker) MetricsGroupLabelMax() int { return b.intOf(keyMetricsGroupLabelMax) }

// MaxPartitionsPerRequest is max.partitions.per.request.
func (b Broker) MaxPartitionsPerRequest() int { return b.intOf(keyMaxPartitionsPerRequest) }

// MaxAlterConfigResourcesPerRequest is max.alter.config.resources.per.request.
func (b Broker) MaxAlterConfigResourcesPerRequest() int { return b.intOf(keyMaxAlterConfigResources) }

// GRPCMaxRecvMessageBytes is grpc.max.recv.message.bytes.
func (b Broker) GRPCMaxRecvMessageBytes() int { return b.intOf(keyGRPCMaxRecvMessageBytes) }

// GRPCMaxConcurrentStreams is grpc.max.concurrent.streams.
func (b Broker) GRPCMaxConcurrentStreams() int { return b.intOf(keyGRPCMaxConcurrentStream) }

// GRPCMaxConnections is grpc.max.connections.
func (b Broker) GRPCMaxConnections() int { return b.intOf(keyGRPCMaxConnections) }

// GRPCKeepaliveMinTimeMs is grpc.keepalive.min.time.ms (keepalive enforcement).
func (b Broker) GRPCKeepaliveMinTimeMs() int64 { return b.longOf(keyGRPCKeepaliveMinTimeMs) }

// GRPCKeepaliveTimeMs is grpc.keepalive.time.ms.
func (b Broker) GRPCKeepaliveTimeMs() int64 { return b.longOf(keyGRPCKeepaliveTimeMs) }

// GRPCKeepaliveTimeoutMs is grpc.keepalive.timeout.ms.
func (b Broker) GRPCKeepaliveTimeoutMs() int64 { return b.longOf(keyGRPCKeepaliveTimeoutMs) }

// ShutdownDrainTimeoutMs is shutdown.drain.timeout.ms.
func (b Broker) ShutdownDrainTimeoutMs() int64 { return b.longOf(keyShutdownDrainTimeoutMs) }

// MaxConnectionsPerIP is max.connections.per.ip.
func (b Broker) MaxConnectionsPerIP() int { return b.intOf(keyMaxConnectionsPerIP) }

// MaxConnectionsPerIPOverrides is max.connections.per.ip.overrides, parsed (validated at start).
func (b Broker) MaxConnectionsPerIPOverrides() map[netip.Addr]int {
	v, _, _ := b.lookup(keyMaxConnectionsPerIPOver)
	m, _ := connlimit.ParseOverrides(v.text)
	return m
}

// ConnectionsMaxIdleMs is connections.max.idle.ms.
func (b Broker) ConnectionsMaxIdleMs() int64 { return b.longOf(keyConnectionsMaxIdleMs) }

// HandshakeTimeoutMs is connections.handshake.timeout.ms.
func (b Broker) HandshakeTimeoutMs() int64 { return b.longOf(keyHandshakeTimeoutMs) }

// SendTimeoutMs is connections.send.timeout.ms.
func (b Broker) SendTimeoutMs() int64 { return b.longOf(keySendTimeoutMs) }

// GRPCMaxPendingResponseBytes is grpc.max.pending.response.bytes.
func (b Broker) GRPCMaxPendingResponseBytes() int64 { return b.longOf(keyGRPCMaxPendingResponse) }

// RaftMaxConnections is raft.max.connections.
func (b Broker) RaftMaxConnections() int { return b.intOf(keyRaftMaxConnections) }

// MetricsMaxConnections is metrics.max.connections.
func (b Broker) MetricsMaxConnections() int { return b.intOf(keyMetricsMaxConnections) }

// MetricsMaxConnectionsPerIP is metrics.max.connections.per.ip.
func (b Broker) MetricsMaxConnectionsPerIP() int { return b.intOf(keyMetricsMaxConnectionsPer) }

// MemoryLimitBytes is memory.limit.bytes (0: from the environment or the cgroup).
func (b Broker) MemoryLimitBytes() int64 { return b.longOf(keyMemoryLimitBytes) }
