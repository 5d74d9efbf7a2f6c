package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/raftlog"
)

// Raft shard ids: the partitions' shards follow the cluster metadata's, leaving room for more
// shards of the cluster's own. They are part of the format of the Raft engine's directory.
const (
	metadataShardID    = 1
	partitionShardBase = 1000
	// deploymentID keeps replication traffic of another dragonboat program, which may use the
	// default id 0, from reaching a coordinatord node and the other way round.
	deploymentID = 0x636f6f72_64696e61 // "coordina"
)

// Engine sizes. ExecShards and LogDBShards cannot change once a node has started (they decide
// which log-store shard holds each Raft shard's log): with fewer of them, more Raft shards share
// one write and one fsync of the log store per round, which is what a write path bound by
// fsyncs wants. One of each wrote the most on three nodes sharing two cores, ahead of two and
// four (docs/benchmarks.md, section 8, "Engine sizing"). The log store's write buffers
// (WriteBufferBytes × WriteBuffers per shard) bound its memory; the default configuration
// reserves 8 GiB.
const (
	execShards       = 1
	logDBShards      = 1
	writeBufferBytes = 8 << 20
	writeBuffers     = 3
	// snapshotEntries is how many entries a partition's Raft log holds before its replica
	// syncs its statelog and the Raft log is compacted (keeping compactionOverhead entries for
	// followers slightly behind): a snapshot of an on-disk state machine records only where
	// its own log is durable, so it costs a sync, not a copy.
	snapshotEntries    = 2000
	compactionOverhead = 500
	maxInMemLogBytes   = 64 << 20
	sendQueueBytes     = 128 << 20
)

// Node is one coordinatord node of a cluster: the Raft engine that replicates every state
// partition it holds a replica of, and what it knows of each partition's leadership.
type Node struct {
	logger  *zap.Logger
	cfg     Config
	nh      *dragonboat.NodeHost
	founded placement // the founding placement, until the metadata records it
	meta    *metadata
	metaID  uint64 // this node's replica id in the metadata's Raft shard
	// metaNonVoting: the metadata replica started as a non-voting one.
	metaNonVoting bool
	voters        *voters
	metrics       *metrics

	partsMu sync.RWMutex
	parts   []*Partition // by state partition; nil where this node holds no replica
	// metaCaughtUp is set once this node's metadata replica applied everything committed when
	// it started: only then may a replica the metadata no longer lists be taken for removed.
	metaCaughtUp atomic.Bool
	// watcher learns of the replicas started and stopped after Start (Run sets it).
	watcher       ReplicaWatcher
	reconcileWake chan struct{}
	removedLogged bool // the reconcile loop said that this node is no member any more

	closeOnce sync.Once
	closed    atomic.Bool
	leaving   atomic.Bool // leaderships handed over for a stop: ask for none

	started time.Time

	stop    chan struct{}
	workers sync.WaitGroup
}

// ReplicaWatcher learns of the replicas a node starts and stops as the cluster's membership
// changes, to open and close their shards.
type ReplicaWatcher interface {
	// Started is called once the node's replica of partition p runs.
	Started(p *Partition)
	// Stopping is called before the node stops its replica of partition p; once it returns,
	// nothing may use p's replica.
	Stopping(p *Partition)
}

// Start starts the node's Raft engine and the replicas it holds: those on its disk or, on a
// founding node's first start, its replicas in the founding placement. A replica whose log
// cannot be opened is not started: its partition is Failed on this node (Partition.Err) while
// the other replicas serve it. Run starts following the cluster's membership.
func Start(logger *zap.Logger, cfg Config) (*Node, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	routeEngineLogs(logger)
	n := &Node{logger: logger, cfg: cfg, founded: newPlacement(cfg.memberIDs(), cfg.ReplicationFactor), stop: make(chan struct{}), started: time.Now(),
		reconcileWake: make(chan struct{}, 1), parts: make([]*Partition, cfg.Partitions)}
	n.metrics = newMetrics(cfg.Registerer, n)
	nhc := config.NodeHostConfig{
		DeploymentID:        deploymentID,
		NodeHostDir:         cfg.Dir,
		RTTMillisecond:      uint64(cfg.Timing.RTT / time.Millisecond),
		RaftAddress:         cfg.RaftAddress,
		ListenAddress:       cfg.ListenAddress,
		RaftEventListener:   n,
		MaxSendQueueSize:    sendQueueBytes,
		MaxReceiveQueueSize: sendQueueBytes,
		Expert: config.ExpertConfig{
			Engine:           config.EngineConfig{ExecShards: execShards, CommitShards: 1, ApplyShards: 4, SnapshotShards: 2, CloseShards: 2},
			LogDB:            logDBConfig(),
			TransportFactory: cfg.Transport,
		},
	}
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		return nil, fmt.Errorf("cluster: start the Raft engine in %s: %w", cfg.Dir, err)
	}
	n.nh = nh
	if n.voters, err = openVoters(cfg.Dir); err != nil {
		nh.Close()
		return nil, err
	}
	n.meta = newMetadata(cfg.Config)
	onDisk := n.replicasOnDisk()
	if err := n.startMetadata(onDisk); err != nil {
		nh.Close()
		return nil, err
	}
	n.workers.Go(n.register)
	n.workers.Go(n.catchUpMetadata)
	_, known := onDisk[metadataShardID]
	for p := range cfg.Partitions {
		var part *Partition
		var members map[uint64]dragonboat.Target
		switch id, ok := onDisk[partitionShardBase+uint64(p)]; {
		case ok:
			part = n.newPartition(p, id)
		case !known && cfg.Join == nil && n.founded.holds(p, cfg.NodeID):
			part, members = n.newPartition(p, cfg.NodeID), n.initialMembers(n.founded.replicas(p))
		default:
			continue
		}
		n.setPartition(p, part) // before it starts: the engine reports its leaders at once
		if err := part.start(members, false); err != nil {
			part.failed = err
			logger.Error("state partition replica not started", zap.Int("state_partition", p), zap.Error(err))
		}
	}
	return n, nil
}

// Run starts following the cluster's membership: starting and stopping this node's replicas as
// the metadata places them (telling w), carrying out the changes of the partitions this node
// leads, and balancing leaderships. Call it once, after Start.
func (n *Node) Run(w ReplicaWatcher) {
	n.watcher = w
	n.workers.Go(n.balance)
	n.workers.Go(n.reconcile)
}

// replicasOnDisk returns the replica id of each Raft shard the engine holds data of.
func (n *Node) replicasOnDisk() map[uint64]uint64 {
	out := map[uint64]uint64{}
	for _, ni := range n.nh.GetNodeHostInfo(dragonboat.NodeHostInfoOption{}).LogInfo {
		out[ni.ShardID] = ni.ReplicaID
	}
	return out
}

// startMetadata starts this node's metadata replica: the one on disk, a joining node's new one,
// or a founding node's.
func (n *Node) startMetadata(onDisk map[uint64]uint64) error {
	var members map[uint64]dragonboat.Target
	join := false
	switch id, ok := onDisk[metadataShardID]; {
	case ok:
		n.metaID = id
	case n.cfg.Join != nil:
		n.metaID, join = n.cfg.Join.MetaReplica, true
	default:
		n.metaID, members = n.cfg.NodeID, n.initialMembers(n.founded.members)
	}
	metaCfg := n.raftConfig(metadataShardID, n.metaID)
	n.metaNonVoting = metaCfg.IsNonVoting
	metaCfg.SnapshotEntries, metaCfg.CompactionOverhead = 1000, 100
	if err := n.nh.StartReplica(members, join, func(uint64, uint64) sm.IStateMachine { return n.meta }, metaCfg); err != nil {
		return fmt.Errorf("cluster: start the cluster metadata replica: %w", err)
	}
	return nil
}

// catchUpMetadata sets metaCaughtUp once a read index of the metadata succeeds.
func (n *Node) catchUpMetadata() {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := n.nh.SyncRead(ctx, metadataShardID, nil)
		cancel()
		if err == nil {
			n.metaCaughtUp.Store(true)
			n.wakeReconcile()
			return
		}
		select {
		case <-n.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func logDBConfig() config.LogDBConfig {
	c := config.GetTinyMemLogDBConfig()
	c.Shards = logDBShards
	c.KVWriteBufferSize = writeBufferBytes
	c.KVMaxWriteBufferNumber = writeBuffers
	c.KVTargetFileSizeBase = 8 << 20
	c.KVMaxBytesForLevelBase = 64 << 20
	c.SaveBufferSize = 32 << 10
	c.MaxSaveBufferSize = 4 << 20
	return c
}

// raftConfig is the Raft configuration of replica replicaID of shard shardID on this node.
func (n *Node) raftConfig(shardID, replicaID uint64) config.Config {
	return config.Config{
		ReplicaID:           replicaID,
		IsNonVoting:         !n.voters.votes(shardID, replicaID),
		ShardID:             shardID,
		CheckQuorum:         true,
		PreVote:             true,
		ElectionRTT:         n.cfg.Timing.ElectionTicks,
		HeartbeatRTT:        n.cfg.Timing.HeartbeatTicks,
		SnapshotEntries:     snapshotEntries,
		CompactionOverhead:  compactionOverhead,
		MaxInMemLogSize:     maxInMemLogBytes,
		OrderedConfigChange: true,
	}
}

// initialMembers is the founding membership of a Raft shard held by the nodes ids.
func (n *Node) initialMembers(ids []uint64) map[uint64]dragonboat.Target {
	m := make(map[uint64]dragonboat.Target, len(ids))
	for _, id := range ids {
		m[id] = n.cfg.InitialMembers[id]
	}
	return m
}

// Partition returns this node's replica of state partition p, or nil if it holds none.
func (n *Node) Partition(p int) *Partition {
	n.partsMu.RLock()
	defer n.partsMu.RUnlock()
	if p < 0 || p >= len(n.parts) {
		return nil
	}
	return n.parts[p]
}

// setPartition makes part this node's replica of partition p (nil: none).
func (n *Node) setPartition(p int, part *Partition) {
	n.partsMu.Lock()
	defer n.partsMu.Unlock()
	n.parts[p] = part
}

// local returns the replicas this node holds now.
func (n *Node) local() []*Partition {
	n.partsMu.RLock()
	defer n.partsMu.RUnlock()
	out := make([]*Partition, 0, len(n.parts))
	for _, p := range n.parts {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// NodeID returns this node's id.
func (n *Node) NodeID() uint64 { return n.cfg.NodeID }

// LeaderUpdated implements raftio.IRaftEventListener: dragonboat reports each change of a Raft
// shard's leader (or the loss of it) from one goroutine, which must not block.
func (n *Node) LeaderUpdated(info raftio.LeaderInfo) {
	if info.ShardID >= partitionShardBase {
		if p := n.Partition(int(info.ShardID - partitionShardBase)); p != nil {
			p.leaderUpdated(info)
		}
	}
}

// Close stops the node: the Raft engine and every replica. It is idempotent.
func (n *Node) Close() {
	n.closeOnce.Do(func() {
		n.closed.Store(true)
		close(n.stop)
		n.workers.Wait()
		n.nh.Close()
	})
}

// proposer proposes on one Raft shard through the node's engine.
type proposer struct {
	nh      *dragonboat.NodeHost
	shardID uint64
	latency prometheus.Observer // nil: not recorded
}

// notCommitted classifies the errors dragonboat returns before it proposed anything, or for a
// proposal it dropped: nothing will be committed.
func notCommitted(err error) bool {
	return errors.Is(err, dragonboat.ErrSystemBusy) || errors.Is(err, dragonboat.ErrShardNotReady) ||
		errors.Is(err, dragonboat.ErrShardNotFound) || errors.Is(err, dragonboat.ErrClosed) ||
		errors.Is(err, dragonboat.ErrPayloadTooBig) || errors.Is(err, dragonboat.ErrRejected) ||
		errors.Is(err, dragonboat.ErrInvalidOperation) || errors.Is(err, dragonboat.ErrShardNotInitialized)
}

func (p proposer) Propose(ctx context.Context, cmd []byte) (uint64, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0, errors.New("cluster: a proposal needs a deadline")
	}
	rs, err := p.nh.Propose(p.nh.GetNoOPSession(p.shardID), cmd, time.Until(deadline))
	if err != nil {
		if notCommitted(err) {
			return 0, fmt.Errorf("%w: %w", raftlog.ErrNotCommitted, err)
		}
		return 0, err
	}
	defer rs.Release()
	began := time.Now()
	select {
	case r := <-rs.AppliedC():
		switch {
		case r.Completed():
			if p.latency != nil {
				p.latency.Observe(time.Since(began).Seconds())
			}
			return r.GetResult().Value, nil
		case r.Dropped():
			return 0, fmt.Errorf("%w: dropped (no leader, or leadership changed)", raftlog.ErrNotCommitted)
		case r.Rejected():
			return 0, fmt.Errorf("%w: rejected", raftlog.ErrNotCommitted)
		case r.Timeout():
			return 0, errors.New("cluster: the proposal timed out")
		case r.Terminated():
			return 0, errors.New("cluster: the replica stopped before the proposal completed")
		default:
			return 0, errors.New("cluster: the proposal was aborted")
		}
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (p proposer) ReadIndex(ctx context.Context) error {
	_, err := p.nh.SyncRead(ctx, p.shardID, nil)
	return err
}

var _ raftio.IRaftEventListener = (*Node)(nil)

// proposeMetadata commits c to the cluster metadata, retrying while it has no leader, until ctx
// ends.
func (n *Node) proposeMetadata(ctx context.Context, c metadataCommand) (sm.Result, error) {
	cmd, err := json.Marshal(c)
	if err != nil {
		return sm.Result{}, err
	}
	var res sm.Result
	err = n.retryMetadata(ctx, "commit to", func(attempt context.Context) (err error) {
		res, err = n.nh.SyncPropose(attempt, n.nh.GetNoOPSession(metadataShardID), cmd)
		return err
	})
	return res, err
}

// readMetadata waits until this node's metadata replica has applied every record committed
// before the call (a read index), retrying while the metadata has no leader, until ctx ends.
func (n *Node) readMetadata(ctx context.Context) error {
	return n.retryMetadata(ctx, "read", func(attempt context.Context) error {
		_, err := n.nh.SyncRead(attempt, metadataShardID, nil)
		return err
	})
}

// retryMetadata runs try with a bounded deadline per attempt (dragonboat needs one) until it
// succeeds, ctx ends or the node closes; what names the operation in the error.
func (n *Node) retryMetadata(ctx context.Context, what string, try func(context.Context) error) error {
	for {
		attempt, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := try(attempt)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cluster: %s the cluster metadata: %w (last attempt: %w)", what, ctx.Err(), err)
		}
		select {
		case <-ctx.Done():
		case <-n.stop:
			return ErrClosed
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ErrClosed is returned by a Node that was closed.
var ErrClosed = errors.New("cluster: the node is closed")

// register records this node's addresses in the cluster metadata, once it differs.
func (n *Node) register() {
	want := NodeInfo{GRPCAddress: n.cfg.GRPCAddress, RaftAddress: n.cfg.RaftAddress}
	ctx, cancel := n.stopContext()
	defer cancel()
	for {
		if info, ok := n.meta.node(n.cfg.NodeID); ok && info == want {
			return
		}
		id := n.cfg.NodeID
		if _, err := n.proposeMetadata(ctx, metadataCommand{Node: &id, Info: &want}); err != nil {
			return // closed
		}
	}
}

// stopContext is a context that ends when the node closes.
func (n *Node) stopContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// RecordPartitions records the number of state partitions in the cluster metadata on the
// cluster's first start and returns the number recorded, which every node must use: the
// number decides which partition a key belongs to.
func (n *Node) RecordPartitions(ctx context.Context) (int, error) {
	count := n.cfg.Partitions
	res, err := n.proposeMetadata(ctx, metadataCommand{Init: &count, Founders: n.cfg.InitialMembers, Factor: n.cfg.ReplicationFactor})
	if err != nil {
		return 0, err
	}
	return int(res.Value), nil
}

// ProposeConfig commits a configuration change and returns what the ConfigReplica answered
// when it applied it on this node.
func (n *Node) ProposeConfig(ctx context.Context, change []byte) ([]byte, error) {
	res, err := n.proposeMetadata(ctx, metadataCommand{Config: change})
	if err != nil {
		return nil, err
	}
	return res.Data, nil
}

// CoordinatorState says whether a partition's leader is known.
type CoordinatorState int

// The states of a partition's coordinator.
const (
	// CoordinatorKnown: Node leads the partition (Node may be this node).
	CoordinatorKnown CoordinatorState = iota
	// CoordinatorElecting: no leader is known; an election is under way.
	CoordinatorElecting
	// CoordinatorLoading: this node was elected and its shard catches up.
	CoordinatorLoading
)

// Coordinator is who serves a state partition, as this node knows it.
type Coordinator struct {
	State   CoordinatorState
	Node    uint64
	Address string // the leader's gRPC address; "" when not known yet
}

// Coordinator returns who leads state partition p: what this node's replica knows, or, for a
// partition it holds no replica of, the last leadership its leader announced.
func (n *Node) Coordinator(p int) Coordinator {
	var c Coordinator
	if part := n.Partition(p); part != nil && part.failed == nil {
		r := part.Role()
		switch {
		case r.Leader == 0:
			return Coordinator{State: CoordinatorElecting}
		case r.Confirming:
			c = Coordinator{State: CoordinatorLoading, Node: r.Leader}
		default:
			c = Coordinator{State: CoordinatorKnown, Node: r.Leader}
		}
	} else if h, ok := n.meta.leaderHint(p); ok {
		c = Coordinator{State: CoordinatorKnown, Node: h.Node}
	} else {
		return Coordinator{State: CoordinatorElecting}
	}
	if c.Node == n.cfg.NodeID {
		c.Address = n.cfg.GRPCAddress
	} else if info, ok := n.meta.node(c.Node); ok {
		c.Address = info.GRPCAddress
	}
	return c
}

// announce records in the cluster metadata that this node leads partition p at term, for the
// nodes that hold no replica of it.
func (n *Node) announce(p int, term uint64) {
	n.workers.Go(func() {
		ctx, cancel := n.stopContext()
		defer cancel()
		ctx, cancelT := context.WithTimeout(ctx, 10*time.Second)
		defer cancelT()
		_, _ = n.proposeMetadata(ctx, metadataCommand{Leader: &p, Hint: &LeaderHint{Node: n.cfg.NodeID, Term: term}})
	})
}
