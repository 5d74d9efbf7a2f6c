package cluster

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"

	sm "github.com/lni/dragonboat/v4/statemachine"
)

// NodeInfo is what the cluster knows of one node.
type NodeInfo struct {
	// GRPCAddress is the HOST:PORT the node gives clients (--advertised-listen).
	GRPCAddress string `json:"grpc_address"`
	// RaftAddress is its replication address.
	RaftAddress string `json:"raft_address"`
}

// LeaderHint is the last leadership of a state partition that its leader announced.
type LeaderHint struct {
	Node uint64 `json:"node"`
	Term uint64 `json:"term"`
}

// ConfigReplica is what the cluster metadata does with the dynamic configuration: the
// configuration manager applies each committed change, on every node, in commit order.
type ConfigReplica interface {
	// ApplyConfig applies one committed change; it must decide the same on every node.
	ApplyConfig(change []byte) (result []byte)
	// ConfigSnapshot returns the whole configuration state, for a metadata snapshot.
	ConfigSnapshot() ([]byte, error)
	// RestoreConfig replaces the configuration state with a snapshot's.
	RestoreConfig(state []byte) error
}

// metadataState is the replicated cluster metadata (the snapshot's JSON).
type metadataState struct {
	NumPartitions int                 `json:"num_partitions"`
	Nodes         map[uint64]NodeInfo `json:"nodes"`
	Leaders       map[int]LeaderHint  `json:"leaders"`
	// Wanted holds, per partition, the preferred leader that asked to lead it during the term
	// of another leader: that leader hands the partition over.
	Wanted map[int]LeaderHint `json:"wanted,omitempty"`
	// Preferred holds the preferred leaders operators chose (TransferLeader), by partition, in
	// place of the placement's.
	Preferred map[int]uint64  `json:"preferred,omitempty"`
	Config    json.RawMessage `json:"config,omitempty"`
	// Members are the cluster's nodes, and Replicas the replicas of each partition, the
	// preferred leader first (membership.go). Factor is the replication factor, NextGen the last
	// replica generation given out.
	Members  map[uint64]Member `json:"members,omitempty"`
	Replicas map[int][]Replica `json:"replicas,omitempty"`
	Factor   int               `json:"factor,omitempty"`
	NextGen  uint64            `json:"next_gen,omitempty"`
}

// metadataCommand is one committed change of the metadata.
type metadataCommand struct {
	Init *int `json:"init,omitempty"` // record the number of state partitions, if unset
	// Founders and Factor come with Init: the founding members' replication addresses and the
	// replication factor, from which the founding placement follows.
	Founders   map[uint64]string `json:"founders,omitempty"`
	Factor     int               `json:"factor,omitempty"`
	Member     *memberCommand    `json:"member,omitempty"` // a membership change
	Node       *uint64           `json:"node,omitempty"`   // register a node's addresses
	Info       *NodeInfo         `json:"info,omitempty"`
	Leader     *int              `json:"leader,omitempty"` // a partition's leader announces itself
	Hint       *LeaderHint       `json:"hint,omitempty"`
	Want       *int              `json:"want,omitempty"`   // a preferred leader asks to lead, in Hint's term
	Prefer     *int              `json:"prefer,omitempty"` // an operator prefers PreferNode (0: none) to lead a partition
	PreferNode uint64            `json:"prefer_node,omitempty"`
	Config     []byte            `json:"config,omitempty"` // a configuration change
}

// metadata is the cluster metadata state machine, replicated on every founding node.
type metadata struct {
	config ConfigReplica

	mu    sync.RWMutex
	state metadataState
	// changed is closed and replaced whenever the state changes.
	changed chan struct{}
}

func newMetadata(config ConfigReplica) *metadata {
	return &metadata{config: config, changed: make(chan struct{}),
		state: metadataState{Nodes: map[uint64]NodeInfo{}, Leaders: map[int]LeaderHint{}, Wanted: map[int]LeaderHint{},
			Members: map[uint64]Member{}, Replicas: map[int][]Replica{}}}
}

var _ sm.IStateMachine = (*metadata)(nil)

// Update applies one committed command.
func (m *metadata) Update(e sm.Entry) (sm.Result, error) {
	var c metadataCommand
	if err := json.Unmarshal(e.Cmd, &c); err != nil {
		return sm.Result{}, nil // every node skips the same malformed entry
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var res sm.Result
	switch {
	case c.Init != nil:
		if m.state.NumPartitions == 0 {
			m.state.NumPartitions = *c.Init
		}
		if len(m.state.Members) == 0 {
			m.state.found(c.Founders, c.Factor)
		}
		res.Value = uint64(m.state.NumPartitions)
	case c.Member != nil:
		res = m.state.applyMember(*c.Member)
	case c.Node != nil && c.Info != nil:
		m.state.Nodes[*c.Node] = *c.Info
	case c.Want != nil && c.Hint != nil:
		m.state.Wanted[*c.Want] = *c.Hint
	case c.Prefer != nil:
		if m.state.Preferred == nil {
			m.state.Preferred = map[int]uint64{}
		}
		if c.PreferNode == 0 {
			delete(m.state.Preferred, *c.Prefer)
		} else {
			m.state.Preferred[*c.Prefer] = c.PreferNode
		}
	case c.Leader != nil && c.Hint != nil:
		if old, ok := m.state.Leaders[*c.Leader]; !ok || c.Hint.Term >= old.Term {
			m.state.Leaders[*c.Leader] = *c.Hint
		}
	case c.Config != nil && m.config != nil:
		res.Data = m.config.ApplyConfig(c.Config)
	}
	close(m.changed)
	m.changed = make(chan struct{})
	return res, nil
}

// Lookup returns a copy of the state.
func (m *metadata) Lookup(any) (any, error) { return m.snapshot(), nil }

func (m *metadata) snapshot() metadataState {
	m.mu.RLock()
	defer m.mu.RUnlock()
	st := m.state
	st.Nodes = maps.Clone(st.Nodes)
	st.Leaders = maps.Clone(st.Leaders)
	st.Wanted = maps.Clone(st.Wanted)
	st.Preferred = maps.Clone(st.Preferred)
	st.Members = maps.Clone(st.Members)
	st.Replicas = make(map[int][]Replica, len(m.state.Replicas))
	for p, rs := range m.state.Replicas {
		st.Replicas[p] = slices.Clone(rs)
	}
	return st
}

// replicas returns the replicas of partition p (nil: not known yet).
func (m *metadata) replicas(p int) []Replica {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.state.Replicas[p])
}

// member returns what the metadata holds of node id's membership.
func (m *metadata) member(id uint64) (Member, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	mb, ok := m.state.Members[id]
	return mb, ok
}

// members returns the members.
func (m *metadata) members() map[uint64]Member {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return maps.Clone(m.state.Members)
}

// node returns what the metadata holds of node id.
func (m *metadata) node(id uint64) (NodeInfo, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	info, ok := m.state.Nodes[id]
	return info, ok
}

// leaderHint returns the last leadership partition p announced.
func (m *metadata) leaderHint(p int) (LeaderHint, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h, ok := m.state.Leaders[p]
	return h, ok
}

// wanted returns the last request to lead partition p.
func (m *metadata) wanted(p int) (LeaderHint, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h, ok := m.state.Wanted[p]
	return h, ok
}

// preferred returns the preferred leader an operator chose for partition p, if any.
func (m *metadata) preferred(p int) (uint64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	id, ok := m.state.Preferred[p]
	return id, ok
}

// nodes returns the nodes' registered addresses.
func (m *metadata) nodes() map[uint64]NodeInfo {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return maps.Clone(m.state.Nodes)
}

// changes returns a channel closed at the next change of the state.
func (m *metadata) changes() <-chan struct{} {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.changed
}

// SaveSnapshot writes the whole state as JSON.
func (m *metadata) SaveSnapshot(w io.Writer, _ sm.ISnapshotFileCollection, _ <-chan struct{}) error {
	st := m.snapshot()
	if m.config != nil {
		cfg, err := m.config.ConfigSnapshot()
		if err != nil {
			return fmt.Errorf("cluster: snapshot the configuration: %w", err)
		}
		st.Config = cfg
	}
	return json.NewEncoder(w).Encode(&st)
}

// RecoverFromSnapshot replaces the state with a snapshot's.
func (m *metadata) RecoverFromSnapshot(r io.Reader, _ []sm.SnapshotFile, _ <-chan struct{}) error {
	var st metadataState
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return fmt.Errorf("cluster: read a metadata snapshot: %w", err)
	}
	if st.Nodes == nil {
		st.Nodes = map[uint64]NodeInfo{}
	}
	if st.Leaders == nil {
		st.Leaders = map[int]LeaderHint{}
	}
	if st.Wanted == nil {
		st.Wanted = map[int]LeaderHint{}
	}
	if st.Members == nil {
		st.Members = map[uint64]Member{}
	}
	if st.Replicas == nil {
		st.Replicas = map[int][]Replica{}
	}
	if m.config != nil && st.Config != nil {
		if err := m.config.RestoreConfig(st.Config); err != nil {
			return fmt.Errorf("cluster: restore the configuration: %w", err)
		}
	}
	st.Config = nil
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state = st
	close(m.changed)
	m.changed = make(chan struct{})
	return nil
}

// Close does nothing: the state lives in the Raft log and its snapshots.
func (m *metadata) Close() error { return nil }
