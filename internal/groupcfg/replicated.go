package groupcfg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
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
	m := &Manager{logger: logger, sch: sch, static: static, nodeID: opts.NodeID, metrics: met, pos: pos,
		admin: make(chan struct{}, 1), repl: &replication{propose: propose, timeout: DefaultProposeTimeout}}
	v := m.newView(&storeState{NumPartitions: int(static.state.num(keyNumPartitions))})
	m.view.Store(v)
	m.reportClamps(nil, v, nil)
	return m, nil
}

// change is one configuration change: the new overrides of every group it touches (none: the
// group has no overrides left) and, when BrokerSet, the new dynamic broker values. Its JSON is
// part of the format of the cluster's metadata log and of the config store's change records.
type change struct {
	Groups    map[string]map[string]string `json:"groups,omitempty"`
	Broker    map[string]string            `json:"broker,omitempty"`
	BrokerSet bool                         `json:"broker_set,omitempty"`
}

// commit commits c to the cluster, waiting at most until ctx is done or the propose timeout.
func (m *Manager) commit(ctx context.Context, c *change) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.repl.timeout)
	defer cancel()
	return m.repl.propose(ctx, data)
}

// ApplyConfig applies a committed change, in commit order, on every node of a cluster. A change
// that cannot be decoded is skipped (every node skips it alike), and logged. It costs what the
// change changes (every group, for a change of the dynamic broker values), not what is stored.
func (m *Manager) ApplyConfig(data []byte) []byte {
	var c change
	if err := json.Unmarshal(data, &c); err != nil {
		m.logger.Error("skipping a configuration change of the cluster that cannot be decoded", zap.Error(err))
		return nil
	}
	m.repl.apply.Lock()
	defer m.repl.apply.Unlock()
	cur := m.view.Load()
	next := m.nextView(cur, &c, nil)
	m.publish(cur, next, &c)
	m.logger.Info("configuration change applied", zap.Uint64("generation", next.generation),
		zap.Int("groups", len(c.Groups)), zap.Strings("first_groups", firstGroups(c.Groups)), zap.Bool("broker", c.BrokerSet))
	return nil
}

// firstGroups returns the first few group ids of a change in name order, for its log line.
func firstGroups(groups map[string]map[string]string) []string {
	ids := slices.Sorted(maps.Keys(groups))
	first := make([]string, 0, min(len(ids), loggedChanges))
	for _, id := range ids[:cap(first)] {
		first = append(first, truncateForLog(show(nil, id)))
	}
	return first
}

// ConfigSnapshot returns the whole dynamic configuration as JSON, the body of a config store
// snapshot: the cluster's metadata snapshot embeds it as JSON.
func (m *Manager) ConfigSnapshot() ([]byte, error) {
	data, err := json.Marshal(m.view.Load().storeState())
	if err != nil {
		return nil, fmt.Errorf("encode the configuration snapshot: %w", err)
	}
	return data, nil
}

// RestoreConfig replaces the dynamic configuration with a ConfigSnapshot's.
func (m *Manager) RestoreConfig(data []byte) error {
	st, err := decodeSnapshot(data)
	if err != nil {
		return fmt.Errorf("the cluster's configuration snapshot: %w", err)
	}
	m.repl.apply.Lock()
	defer m.repl.apply.Unlock()
	m.warnIgnored(st)
	cur := m.view.Load()
	v := m.newView(st)
	m.view.Store(v)
	m.reportClamps(cur, v, nil)
	return nil
}
