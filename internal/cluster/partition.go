package cluster

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/raftio"
	sm "github.com/lni/dragonboat/v4/statemachine"
	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/raftlog"
)

// Role is what this node knows of a state partition's leadership.
type Role struct {
	// Leading: this node's replica leads and its shard holds every committed record: it
	// serves the partition's keys.
	Leading bool
	// Confirming: this node's replica won an election, and confirms with a quorum that it
	// holds every record committed before (its shard follows them first).
	Confirming bool
	// Leader is the leader's node id; 0: no leader is known (an election is under way).
	Leader uint64
	// Term is the Raft term of that leadership.
	Term uint64
}

// Partition is this node's replica of one state partition.
type Partition struct {
	node    *Node
	index   int
	shardID uint64
	// replicaID is the replica's id in the partition's Raft shard.
	replicaID uint64
	logger    *zap.Logger
	sm        *raftlog.StateMachine
	rep       *raftlog.Replica
	failed    error

	leader atomic.Pointer[raftio.LeaderInfo] // the last leader update
	role   atomic.Pointer[Role]
	wake   chan struct{}
	// caughtUp is set once a read index showed that the replica applied everything committed
	// when it started.
	caughtUp     atomic.Bool
	transferring atomic.Bool // a leadership transfer is under way
	reported     atomic.Bool // its catching up was recorded in the metadata
	nonVoting    bool        // it started as a non-voting replica
	// halted is closed when the node stops this replica alone (the cluster moved it away).
	halted   chan struct{}
	haltOnce sync.Once
}

func (n *Node) newPartition(p int, replicaID uint64) *Partition {
	dir, opts := n.cfg.PartitionLog(p)
	shardID := uint64(partitionShardBase + p)
	logger := n.logger.With(zap.Int("state_partition", p))
	m := raftlog.NewStateMachine(logger, raftlog.Options{Dir: dir, Log: opts, ReplicaID: replicaID, Fatal: n.cfg.Fatal})
	part := &Partition{
		node: n, index: p, shardID: shardID, replicaID: replicaID, logger: logger.With(zap.Uint64("replica", replicaID)), sm: m,
		rep: raftlog.NewReplica(m, proposer{nh: n.nh, shardID: shardID,
			latency: n.metrics.proposals.WithLabelValues(strconv.Itoa(p))}, n.cfg.ProposalTimeout),
		wake: make(chan struct{}, 1), halted: make(chan struct{}),
	}
	part.role.Store(&Role{})
	return part
}

// start opens the replica's log and starts its Raft replica: a founding one with its initial
// members, one that joins an existing shard, or (neither) one the engine holds already.
func (p *Partition) start(members map[uint64]dragonboat.Target, join bool) error {
	if err := p.sm.Prepare(p.node.nh.HasNodeInfo(p.shardID, p.replicaID)); err != nil {
		return err
	}
	create := func(uint64, uint64) sm.IOnDiskStateMachine { return p.sm }
	rc := p.node.raftConfig(p.shardID, p.replicaID)
	p.nonVoting = rc.IsNonVoting
	if err := p.node.nh.StartOnDiskReplica(members, join, create, rc); err != nil {
		_ = p.sm.Close()
		return fmt.Errorf("cluster: start the Raft replica of state partition %d: %w", p.index, err)
	}
	p.node.workers.Go(p.watchLeadership)
	p.node.workers.Go(p.catchUp)
	return nil
}

// CaughtUp reports whether the replica has applied everything that was committed when it
// started (a read index answered), so that it can lead without delay.
func (p *Partition) CaughtUp() bool { return p.caughtUp.Load() }

// catchUp retries a read index until one succeeds.
func (p *Partition) catchUp() {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := raftlog.Proposer(proposer{nh: p.node.nh, shardID: p.shardID}).ReadIndex(ctx)
		cancel()
		if err == nil {
			p.caughtUp.Store(true)
			p.logger.Debug("replica caught up")
			return
		}
		select {
		case <-p.node.stop:
			return
		case <-p.halted:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Index returns the state partition's number.
func (p *Partition) Index() int { return p.index }

// Err returns why this node's replica of the partition did not start (nil: it runs).
func (p *Partition) Err() error { return p.failed }

// Replica returns the partition's log as the shard sees it on this node.
func (p *Partition) Replica() *raftlog.Replica { return p.rep }

// Role returns what this node knows of the partition's leadership now.
func (p *Partition) Role() Role { return *p.role.Load() }

func (p *Partition) setRole(r Role) {
	if old := p.role.Swap(&r); *old != r {
		p.logger.Debug("state partition role", zap.Bool("leading", r.Leading), zap.Bool("confirming", r.Confirming),
			zap.Uint64("leader", r.Leader), zap.Uint64("term", r.Term))
		p.rep.Wake()
	}
}

func (p *Partition) leaderUpdated(info raftio.LeaderInfo) {
	if old := p.leader.Load(); old == nil || old.LeaderID != info.LeaderID || old.Term != info.Term {
		p.node.metrics.leaderChanges.WithLabelValues(strconv.Itoa(p.index)).Inc()
	}
	p.leader.Store(&info)
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// watchLeadership turns leader updates into the partition's role. A replica that won an
// election serves only once a read index, which the new leader can answer only after it
// committed an entry of its own term, showed that it applied everything committed before.
func (p *Partition) watchLeadership() {
	for {
		select {
		case <-p.node.stop:
			return
		case <-p.halted:
			return
		case <-p.wake:
		}
		info := p.leader.Load()
		if info == nil {
			continue
		}
		leader := nodeOf(info.LeaderID)
		if info.LeaderID != p.replicaID {
			p.setRole(Role{Leader: leader, Term: info.Term})
			continue
		}
		p.setRole(Role{Confirming: true, Leader: leader, Term: info.Term})
		if p.confirm(info) {
			p.setRole(Role{Leading: true, Leader: leader, Term: info.Term})
			p.node.announce(p.index, info.Term)
		}
	}
}

// confirm retries a read index until it succeeds while info is still the partition's leadership
// (true), or the leadership changes or the node stops (false).
func (p *Partition) confirm(info *raftio.LeaderInfo) bool {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := raftlog.Proposer(proposer{nh: p.node.nh, shardID: p.shardID}).ReadIndex(ctx)
		cancel()
		if p.leader.Load() != info {
			return false
		}
		if err == nil {
			return true
		}
		p.logger.Debug("confirming the leadership", zap.String("error", err.Error()))
		select {
		case <-p.node.stop:
			return false
		case <-p.halted:
			return false
		case <-time.After(p.node.cfg.Timing.RTT):
		}
	}
}

func (p *Partition) String() string { return "state partition " + strconv.Itoa(p.index) }
