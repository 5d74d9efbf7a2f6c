package groupcfg

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/vfs"
)

// Options configures a Manager beyond the static configuration.
type Options struct {
	// NodeID is this node's id (--node-id). A BROKER resource named "" or NodeID in decimal
	// addresses this node; any other broker name is refused with INVALID_REQUEST.
	NodeID int32

	// compactBytes overrides defaultCompactBytes (tests; negative: every change rewrites the
	// store file).
	compactBytes int64
}

// Manager owns the configuration in force: the static broker configuration, the dynamic broker
// values and the per-group overrides kept durable in the config store. Its Provider method
// (SnapshotUpdateRecordsPerSnapshot) is lock-free and safe for concurrent use; admin operations
// are serialized among themselves and never block it.
type Manager struct {
	logger  *zap.Logger
	sch     *schema
	static  *Static
	nodeID  int32
	metrics *metrics
	pos     positions

	// view is what lookups and DescribeConfigs read; each change publishes a new one.
	view atomic.Pointer[view]

	// admin is held (a token in it) while an admin change runs, and serializes changes, the
	// store and closed. It is a channel so that a request can stop waiting when its deadline
	// passes.
	admin  chan struct{}
	store  *store       // a single node's; nil in a cluster
	repl   *replication // a cluster's; nil on a single node
	closed bool
}

// view is an immutable snapshot of the configuration in force. A change derives the next view
// from it, sharing every group it does not change.
type view struct {
	numPartitions int
	generation    uint64            // grows by one with every change
	dynamic       map[string]string // the stored dynamic broker values (read-only)
	broker        *brokerState      // broker values in force (static with dynamic applied)
	defaults      *groupValues      // the values of a group without overrides
	groups        groupMap          // groups with overrides
}

// groupValues are one group's values.
type groupValues struct {
	stored  map[string]string // the group's stored overrides (read-only)
	vals    []value           // effective value of every group key, by group position
	clamped []bool            // by group position: a stored override clamped to the bounds in force
}

// positions are the group-vector positions of the keys with typed getters.
type positions struct {
	snapshot int
}

func resolvePositions(sch *schema) (positions, error) {
	var p positions
	var missing []string
	for _, f := range []struct {
		dst *int
		key string
	}{
		{&p.snapshot, keyGroupSnapshotLimit},
	} {
		i, ok := sch.groupPos[f.key]
		if !ok {
			missing = append(missing, f.key)
		}
		*f.dst = i
	}
	if len(missing) > 0 {
		return p, fmt.Errorf("config table lacks the group keys %v", missing)
	}
	return p, nil
}

// Open loads the config store kept in the file path (a damaged store → *StoreError naming the
// file), creating the file's directory if needed, records
// share.coordinator.state.topic.num.partitions on first start and refuses a different value
// later (a *StaticError, as for any other configuration problem). Stored group overrides never
// stop start-up: those outside the bounds now in force are clamped when evaluated, with a WARN
// log. reg may be nil (metrics are then kept but not registered).
func Open(logger *zap.Logger, path string, static *Static, reg prometheus.Registerer, opts Options) (*Manager, error) {
	return open(logger, path, static, reg, opts, vfs.OS())
}

func open(logger *zap.Logger, path string, static *Static, reg prometheus.Registerer, opts Options, fsys vfs.FS) (*Manager, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	if static == nil || static.state == nil {
		return nil, errors.New("open config manager: no static configuration (build one with LoadStatic)")
	}
	sch := static.state.schema
	pos, err := resolvePositions(sch)
	if err != nil {
		return nil, fmt.Errorf("open config manager: %w", err)
	}
	compactBytes := opts.compactBytes
	if compactBytes == 0 {
		compactBytes = defaultCompactBytes
	}
	st, loaded, err := openStore(fsys, path, compactBytes)
	if err != nil {
		return nil, err
	}
	state, err := firstState(logger, st, loaded, static)
	if err == nil {
		var met *metrics
		if met, err = newMetrics(reg, sch); err == nil {
			m := &Manager{logger: logger, sch: sch, static: static, nodeID: opts.NodeID, metrics: met, pos: pos,
				admin: make(chan struct{}, 1), store: st}
			m.warnIgnored(state)
			v := m.newView(state)
			m.view.Store(v)
			m.reportClamps(nil, v, nil)
			logger.Info("loaded the config store", zap.String("path", st.path), zap.Uint64("generation", state.Generation),
				zap.Int("dynamic_broker_configs", len(state.Broker)), zap.Int("groups_with_overrides", len(state.Groups)))
			return m, nil
		}
	}
	st.closeFile()
	return nil, err
}

// firstState returns the state the Manager starts from: the one loaded (checked against the
// static partition count) or, for a new store, an empty one recorded with that count.
func firstState(logger *zap.Logger, st *store, loaded *loadedStore, static *Static) (*storeState, error) {
	numPartitions := int(static.state.num(keyNumPartitions))
	if loaded == nil {
		state := &storeState{NumPartitions: numPartitions, Generation: 1, Broker: map[string]string{},
			Groups: map[string]map[string]string{}}
		if err := st.writeFirst(state); err != nil {
			return nil, fmt.Errorf("record %s=%d in %s: %w", keyNumPartitions, numPartitions, st.path, err)
		}
		logger.Info("created the config store", zap.String("path", st.path), zap.Int(keyNumPartitions, numPartitions))
		return state, nil
	}
	state := loaded.state
	if state.NumPartitions != numPartitions {
		// A configuration problem like those of LoadStatic (and reported the same way).
		i := static.state.schema.index[keyNumPartitions]
		return nil, &StaticError{Problems: []Problem{{
			Key: keyNumPartitions, Value: fmtInt(int64(numPartitions)), Source: static.state.origin[i], kind: problemRelation,
			Message: fmt.Sprintf("%s=%d differs from %d, the value recorded in %s on first start: changing it would route "+
				"share-group state keys to other partitions; start with %s=%d instead of the %d given",
				keyNumPartitions, numPartitions, state.NumPartitions, st.path, keyNumPartitions, state.NumPartitions, numPartitions),
		}}}
	}
	switch {
	case loaded.version == legacyVersion:
		logger.Info("converted the config store to the current format", zap.String("path", st.path),
			zap.Int("from_version", legacyVersion), zap.Int("to_version", storeVersion))
	case loaded.torn > 0:
		logger.Warn("dropped an unfinished change at the end of the config store: a change whose write a crash "+
			"interrupted, never acknowledged", zap.String("path", st.path), zap.Int64("offset", loaded.end),
			zap.Int64("bytes", loaded.torn))
	}
	return state, nil
}

// Close stops admin changes (later IncrementalAlterConfigs calls fail), closes the config store
// and unregisters the metrics. Lookups, Broker, Effective and DescribeConfigs keep answering from
// the last state. Idempotent.
func (m *Manager) Close() error {
	m.admin <- struct{}{}
	defer func() { <-m.admin }()
	if m.closed {
		return nil
	}
	m.closed = true
	if m.store != nil {
		m.store.closeFile()
	}
	m.metrics.unregister()
	return nil
}

// Broker returns the broker-level values in force (static, or dynamic where altered).
func (m *Manager) Broker() Broker { return Broker{state: m.view.Load().broker} }

// Effective returns every broker key's value in force and its source, secrets masked (for the
// start-up log line).
func (m *Manager) Effective() []Entry { return m.view.Load().broker.entries() }

// brokerInForce applies the stored dynamic broker values to the static ones. A stored value
// this release cannot apply (unknown key, key no longer dynamic, value out of range) is ignored
// with a WARN and kept stored until it is altered or deleted.
func (m *Manager) brokerInForce(dynamic map[string]string) *brokerState {
	b := m.static.state.clone()
	for _, key := range slices.Sorted(maps.Keys(dynamic)) {
		text := dynamic[key]
		d, ok := m.sch.lookup(key)
		if !ok || d.Scope != ScopeBroker || !d.Dynamic {
			m.logger.Warn("ignoring a stored dynamic broker config this release cannot alter dynamically; "+
				"it applies again if a later release supports it, or is dropped when deleted",
				zap.String("config", key), zap.String("value", show(d, text)))
			continue
		}
		v, bad := checkStatic(d, text)
		if bad != nil {
			m.logger.Warn("ignoring a stored dynamic broker config outside what this release accepts; the static value "+
				"applies until it is altered or deleted on the BROKER resource",
				zap.String("config", key), zap.String("value", show(d, text)), zap.String("static_value", show(d, b.vals[m.sch.index[key]].text)))
			continue
		}
		i := m.sch.index[key]
		b.vals[i], b.source[i], b.origin[i] = v, SourceDynamicBrokerConfig, "dynamic"
	}
	return b
}

// warnIgnored logs the stored group overrides that this release cannot evaluate (unknown key,
// unparseable value, value refused by a non-numeric validator): they are kept but have no effect.
func (m *Manager) warnIgnored(state *storeState) {
	for _, group := range slices.Sorted(maps.Keys(state.Groups)) {
		for _, key := range slices.Sorted(maps.Keys(state.Groups[group])) {
			text := state.Groups[group][key]
			p, ok := m.sch.groupPos[key]
			if !ok {
				m.logger.Warn("ignoring a stored override of an unknown group config; delete it with IncrementalAlterConfigs",
					zap.String("group", group), zap.String("config", key))
				continue
			}
			if _, _, ok := m.evalOverride(m.groupDef(p), text, nil); !ok {
				m.logger.Warn("ignoring a stored group override this release does not accept; the inherited value applies",
					zap.String("group", group), zap.String("config", key), zap.String("value", show(m.groupDef(p), text)))
			}
		}
	}
}

func (m *Manager) groupDef(p int) *Definition { return &m.sch.defs[m.sch.group[p]] }

// defaultGroup returns the values of a group without overrides: each key's synonym value in
// force, or its built-in default.
func (m *Manager) defaultGroup(b *brokerState) *groupValues {
	g := &groupValues{vals: make([]value, len(m.sch.group)), clamped: make([]bool, len(m.sch.group))}
	for p, i := range m.sch.group {
		d := &m.sch.defs[i]
		if d.Synonym != "" {
			g.vals[p], _ = b.get(d.Synonym)
		} else {
			g.vals[p] = m.sch.defaults[i]
		}
	}
	return g
}

// evalOverride evaluates one stored override: it parses text and, for numeric keys, clamps it
// to the bounds in force (b nil: only checks that it can be evaluated). clamped says that the
// bounds changed the value; ok is false when the override cannot be applied.
func (m *Manager) evalOverride(d *Definition, text string, b *brokerState) (v value, clamped, ok bool) {
	if !isNumeric(d.Type) {
		if d.Name == keyAutoOffsetReset {
			text = normalizeAutoOffsetReset(text)
		}
		v, bad := checkStatic(d, text)
		return v, false, bad == nil
	}
	v, ok = parseValue(d.Type, text)
	if !ok || b == nil {
		return v, false, ok
	}
	bn := groupBounds(d, b)
	switch {
	case v.num < bn.lo:
		return numValue(bn.lo), true, true
	case v.num > bn.hi:
		return numValue(bn.hi), true, true
	}
	return v, false, true
}

func numValue(n int64) value { return value{text: fmtInt(n), num: n} }

// evalGroup evaluates a group's stored overrides against the broker values in force.
func (m *Manager) evalGroup(b *brokerState, defaults *groupValues, stored map[string]string) *groupValues {
	g := &groupValues{stored: stored, vals: slices.Clone(defaults.vals), clamped: make([]bool, len(m.sch.group))}
	for key, text := range stored {
		p, ok := m.sch.groupPos[key]
		if !ok {
			continue
		}
		v, clamped, ok := m.evalOverride(m.groupDef(p), text, b)
		if !ok {
			continue
		}
		g.vals[p], g.clamped[p] = v, clamped
	}
	return g
}

// newView evaluates a whole state: the one loaded on open, or restored from a snapshot.
func (m *Manager) newView(st *storeState) *view {
	dynamic := st.Broker
	if dynamic == nil {
		dynamic = map[string]string{}
	}
	v := &view{numPartitions: st.NumPartitions, generation: st.Generation, dynamic: dynamic, broker: m.brokerInForce(dynamic)}
	v.defaults = m.defaultGroup(v.broker)
	b := v.groups.Builder()
	for id, stored := range st.Groups {
		if len(stored) > 0 {
			b.Set(id, m.evalGroup(v.broker, v.defaults, stored))
		}
	}
	v.groups = b.Map()
	return v
}

// nextView returns the view that c makes of cur, with the next generation. Only the groups c
// changes are evaluated again, unless c changes the dynamic broker values, which every group
// depends on. broker is the broker values in force after c when the caller has them already (nil:
// they are derived from c's). It has no effect: publish makes the view the one in force.
func (m *Manager) nextView(cur *view, c *change, broker *brokerState) *view {
	next := *cur
	next.generation++
	if c.BrokerSet {
		next.dynamic = c.Broker
		if next.dynamic == nil {
			next.dynamic = map[string]string{}
		}
		if broker == nil {
			broker = m.brokerInForce(next.dynamic)
		}
		next.broker = broker
		next.defaults = m.defaultGroup(next.broker)
	}
	b := cur.groups.Builder()
	if c.BrokerSet {
		for id, g := range cur.groups.All() {
			if _, changed := c.Groups[id]; !changed {
				b.Set(id, m.evalGroup(next.broker, next.defaults, g.stored))
			}
		}
	}
	for id, stored := range c.Groups {
		if len(stored) == 0 {
			b.Delete(id)
		} else {
			b.Set(id, m.evalGroup(next.broker, next.defaults, stored))
		}
	}
	next.groups = b.Map()
	return &next
}

// publish makes next, which c made of cur, the view in force, and reports the clamping outcomes
// that changed.
func (m *Manager) publish(cur, next *view, c *change) {
	m.view.Store(next)
	m.reportClamps(cur, next, c)
}

// storeState returns the whole state v holds, as the store's snapshot keeps it. Its maps are
// shared with v: read-only.
func (v *view) storeState() *storeState {
	st := &storeState{NumPartitions: v.numPartitions, Generation: v.generation, Broker: v.dynamic,
		Groups: make(map[string]map[string]string, v.groups.Len())}
	for id, g := range v.groups.All() {
		st.Groups[id] = g.stored
	}
	return st
}

// group returns the values of a group with overrides (nil-safe on the view).
func (v *view) group(id string) (*groupValues, bool) {
	if v == nil {
		return nil, false
	}
	return v.groups.Get(id)
}

// values returns a group's values: its own, or the defaults.
func (v *view) values(id string) *groupValues {
	if g, ok := v.groups.Get(id); ok {
		return g
	}
	return v.defaults
}

// clampCandidates returns, sorted, the ids of the groups whose clamping outcome may differ
// between old and v, which c made of it (see reportClamps).
func clampCandidates(old, v *view, c *change) []string {
	ids := map[string]bool{}
	if c != nil {
		for id := range c.Groups {
			ids[id] = true
		}
	}
	if c == nil || c.BrokerSet {
		for id := range v.groups.All() {
			ids[id] = true
		}
		if old != nil {
			for id := range old.groups.All() {
				ids[id] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(ids))
}

// reportClamps logs every change of clamping outcome between old and v, which c made of it (WARN
// when an override becomes clamped or its clamped value changes, INFO when it is no longer
// clamped) and updates the clamped-overrides gauge. Every group is looked at when c is nil (v
// replaces old whole, or old is nil: v is the first view) or changes the broker values;
// otherwise only those c changes.
func (m *Manager) reportClamps(old, v *view, c *change) {
	sessionPos, heartbeatPos := m.sch.groupPos[keySessionTimeout], m.sch.groupPos[keyHeartbeatInterval]
	for _, id := range clampCandidates(old, v, c) {
		og, _ := old.group(id)
		ng, _ := v.group(id)
		// Clamping can break the rule that alters enforce (session timeout above the heartbeat
		// interval); as in Kafka, that is only logged.
		if ng != nil && (ng.clamped[sessionPos] || ng.clamped[heartbeatPos]) &&
			ng.vals[sessionPos].num <= ng.vals[heartbeatPos].num &&
			(og == nil || og.vals[sessionPos].num != ng.vals[sessionPos].num || og.vals[heartbeatPos].num != ng.vals[heartbeatPos].num) {
			m.logger.Warn("after clamping, a group's session timeout is not above its heartbeat interval",
				zap.String("group", id), zap.Int64(keySessionTimeout, ng.vals[sessionPos].num),
				zap.Int64(keyHeartbeatInterval, ng.vals[heartbeatPos].num))
		}
		for p := range m.sch.group {
			d := m.groupDef(p)
			wasClamped := og != nil && og.clamped[p]
			isClamped := ng != nil && ng.clamped[p]
			if isClamped != wasClamped {
				m.metrics.addClamped(d.Name, isClamped)
			}
			switch {
			case isClamped && (!wasClamped || og.vals[p].num != ng.vals[p].num):
				bn := groupBounds(d, v.broker)
				m.logger.Warn("a stored group config override is outside the bounds in force; the nearest bound applies",
					zap.String("group", id), zap.String("config", d.Name), zap.String("stored", ng.stored[d.Name]),
					zap.Int64("effective", ng.vals[p].num), zap.String("bounds", formatRange(bn.lo, bn.hi)),
					zap.String("bounds_from", bn.explain(d)))
			case wasClamped && !isClamped && ng != nil && ng.stored[d.Name] != "":
				m.logger.Info("a stored group config override is within the bounds in force again",
					zap.String("group", id), zap.String("config", d.Name), zap.String("stored", ng.stored[d.Name]))
			}
		}
	}
}
