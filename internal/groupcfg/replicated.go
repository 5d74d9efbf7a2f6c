package groupcfg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Propose commits a configuration change to a cluster and returns once this node applied it
// (ApplyConfig ran for it here); an error leaves the change uncommitted, or its fate unknown.
type Propose func(ctx context.Context, change []byte) error

// DefaultProposeTimeout bounds the commit of one configuration change in a cluster.
const DefaultProposeTimeout = 10 * time.Second

// replication is what a Manager of a cluster keeps: how it commits changes, and the lock under
// which committed changes are applied, in commit order, by the cluster's metadata replica.
type replication struct {
	propose Propose
	timeout time.Duration
	apply   sync.Mutex
}

// OpenReplicated returns a Manager whose dynamic broker values and group overrides are
// replicated through a cluster instead of kept in a store file: IncrementalAlterConfigs commits
// each change with propose, and every node (this one included) applies it in commit order with
// ApplyConfig, so that DescribeConfigs on every node shows it. Its state starts empty; the
// cluster's metadata replica brings it up to date (RestoreConfig, then ApplyConfig) before the
// node serves.
func OpenReplicated(logger *zap.Logger, static *Static, reg prometheus.Registerer, opts Options, propose Propose) (*Manager, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	if static == nil || static.state == nil {
		return nil, errors.New("open config manager: no static configuration (build one with LoadStatic)")
	}
	if propose == nil {
		return nil, errors.New("open config manager: no way to commit changes to the cluster")
	}
	sch := static.state.schema
	pos, err := resolvePositions(sch)
	if err != nil {
		return nil, fmt.Errorf("open config manager: %w", err)
	}
	met, err := newMetrics(reg, sch)
	if err != nil {
		return nil, err
	}
	state := &storeState{NumPartitions: int(static.state.num(keyNumPartitions)), Broker: map[string]string{},
		Groups: map[string]map[string]string{}}
	m := &Manager{logger: logger, sch: sch, static: static, nodeID: opts.NodeID, metrics: met, pos: pos,
		repl: &replication{propose: propose, timeout: DefaultProposeTimeout}}
	m.view.Store(m.buildView(state, m.brokerInForce(state), nil, nil))
	return m, nil
}

// change is one committed configuration change: the new overrides of every group it touches
// (none: the group has no overrides left) and, when BrokerSet, the new dynamic broker values.
// Its JSON is part of the format of the cluster's metadata log.
type change struct {
	Groups    map[string]map[string]string `json:"groups,omitempty"`
	Broker    map[string]string            `json:"broker,omitempty"`
	BrokerSet bool                         `json:"broker_set,omitempty"`
}

// commit commits the change from cur's state to next: the overrides of the groups changed, and
// the dynamic broker values if they differ.
func (m *Manager) commit(cur *view, next *storeState, changedGroups map[string]bool) error {
	c := change{Groups: make(map[string]map[string]string, len(changedGroups))}
	for g := range changedGroups {
		c.Groups[g] = next.Groups[g]
	}
	if !maps.Equal(cur.state.Broker, next.Broker) {
		c.Broker, c.BrokerSet = next.Broker, true
	}
	data, err := json.Marshal(&c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.repl.timeout)
	defer cancel()
	return m.repl.propose(ctx, data)
}

// ApplyConfig applies a committed change, in commit order, on every node of a cluster. A change
// that cannot be decoded is skipped (every node skips it alike), and logged.
func (m *Manager) ApplyConfig(data []byte) []byte {
	var c change
	if err := json.Unmarshal(data, &c); err != nil {
		m.logger.Error("skipping a configuration change of the cluster that cannot be decoded", zap.Error(err))
		return nil
	}
	m.repl.apply.Lock()
	defer m.repl.apply.Unlock()
	cur := m.view.Load()
	next := *cur.state
	changed := make(map[string]bool, len(c.Groups))
	if len(c.Groups) > 0 {
		next.Groups = maps.Clone(cur.state.Groups)
		for g, overrides := range c.Groups {
			if len(overrides) == 0 {
				delete(next.Groups, g)
			} else {
				next.Groups[g] = overrides
			}
			changed[g] = true
		}
	}
	broker := cur.broker
	if c.BrokerSet {
		next.Broker = c.Broker
		if next.Broker == nil {
			next.Broker = map[string]string{}
		}
		broker = m.brokerInForce(&next)
	}
	next.Generation = cur.state.Generation + 1
	m.view.Store(m.buildView(&next, broker, cur, changed))
	m.logger.Info("configuration change applied", zap.Uint64("generation", next.Generation),
		zap.Int("groups", len(c.Groups)), zap.Bool("broker", c.BrokerSet))
	return nil
}

// ConfigSnapshot returns the whole dynamic configuration, in the config store's format.
func (m *Manager) ConfigSnapshot() ([]byte, error) {
	return encodeStore(m.view.Load().state)
}

// RestoreConfig replaces the dynamic configuration with a ConfigSnapshot's.
func (m *Manager) RestoreConfig(data []byte) error {
	st, err := decodeStore("the cluster's configuration snapshot", data)
	if err != nil {
		return err
	}
	if st.Broker == nil {
		st.Broker = map[string]string{}
	}
	if st.Groups == nil {
		st.Groups = map[string]map[string]string{}
	}
	m.repl.apply.Lock()
	defer m.repl.apply.Unlock()
	m.warnIgnored(st)
	m.view.Store(m.buildView(st, m.brokerInForce(st), nil, nil))
	return nil
}
