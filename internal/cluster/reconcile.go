package cluster

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/lni/dragonboat/v4"
	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/raftlog"
)

// reconcileInterval is how often a node compares what it runs with what the metadata places,
// besides at every change of the metadata.
const reconcileInterval = time.Second

// stepTimeout bounds one step of a membership change: a configuration change, a membership read
// or a metadata proposal.
const stepTimeout = 5 * time.Second

// A membership change is carried out in steps, each recorded in the metadata before the next
// is taken, so that any node can pick a change up where another left it:
//
//   - the node a replica is placed on starts it, empty, as one that joins its shard, and records
//     once it caught up (a read index answered);
//   - the partition's leader adds it to the shard as a non-voting replica, makes it a voter once
//     it caught up, and, once every new replica of the partition is a voter, removes the
//     replicas being replaced (handing its own leadership over first if it is one of them);
//   - the node of a removed replica stops it and deletes its log;
//   - the metadata's leader does the same for the metadata's own shard, with the nodes.

// wakeReconcile makes the reconcile loop run now.
func (n *Node) wakeReconcile() {
	select {
	case n.reconcileWake <- struct{}{}:
	default:
	}
}

// reconcile runs reconcileOnce at every metadata change, and every reconcileInterval.
func (n *Node) reconcile() {
	t := time.NewTicker(reconcileInterval)
	defer t.Stop()
	for {
		changes := n.meta.changes()
		n.reconcileOnce()
		select {
		case <-n.stop:
			return
		case <-t.C:
		case <-changes:
		case <-n.reconcileWake:
		}
	}
}

func (n *Node) reconcileOnce() {
	if !n.metaCaughtUp.Load() {
		return // the metadata may not show the latest placement yet
	}
	ctx, cancel := n.stopContext()
	defer cancel()
	n.reportMetadata(ctx)
	for p := range n.cfg.Partitions {
		n.placeReplica(ctx, p)
	}
	for _, part := range n.local() {
		if part.failed == nil && part.Role().Leading {
			n.changeMembership(ctx, part)
		}
	}
	n.changeMetadataMembership(ctx)
}

// propose commits a membership step, bounded by stepTimeout.
func (n *Node) propose(ctx context.Context, c memberCommand) bool {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if _, err := n.proposeMetadata(ctx, metadataCommand{Member: &c}); err != nil {
		n.logger.Debug("recording a membership step", zap.String("op", string(c.Op)), zap.String("error", err.Error()))
		return false
	}
	return true
}

// reportMetadata records that this joining node's metadata replica caught up.
func (n *Node) reportMetadata(ctx context.Context) {
	m, ok := n.meta.member(n.cfg.NodeID)
	if !ok {
		if len(n.meta.members()) > 0 && !n.removedLogged {
			n.removedLogged = true
			n.logger.Warn("this node is not a member of the cluster (it was removed): stop it")
		}
		return
	}
	switch {
	case m.MetaReplica != n.metaID:
	case m.State == MemberJoining && !m.MetaReady:
		n.propose(ctx, memberCommand{Op: opMetaReady, Node: n.cfg.NodeID, Replica: n.metaID})
	case m.State == MemberActive && n.metaNonVoting:
		n.recordVoter(ctx, metadataShardID, n.metaID, n.logger)
	}
}

// placeReplica makes this node run the replica of partition p the metadata places on it, if any,
// and stops one the metadata no longer lists.
func (n *Node) placeReplica(ctx context.Context, p int) {
	rs := n.meta.replicas(p)
	if rs == nil {
		return // the founding placement is not recorded yet
	}
	want, wanted := onNode(live(rs), n.cfg.NodeID)
	have := n.Partition(p)
	if have != nil && (!wanted || have.replicaID != want.ID) {
		if slices.ContainsFunc(rs, func(r Replica) bool { return r.ID == have.replicaID }) {
			return // still a member of the shard, until the leader removes it
		}
		n.dropReplica(ctx, have)
		have = nil
	}
	switch {
	case have == nil && wanted:
		n.addReplica(p, want)
	case have != nil && want.State == ReplicaAdding && have.CaughtUp() && !have.reported.Load():
		if n.propose(ctx, memberCommand{Op: opReplicaReady, Node: n.cfg.NodeID, Partition: p, Replica: have.replicaID}) {
			have.reported.Store(true)
		}
	case have != nil && want.State == ReplicaVoter && have.failed == nil && have.nonVoting:
		n.recordVoter(ctx, have.shardID, have.replicaID, have.logger)
	}
}

// recordVoter records that this node's replica of a shard, which joined it as a non-voting
// replica, was made a voter: once a snapshot of the replica holds the change, which it then
// starts from (voters.go says why).
func (n *Node) recordVoter(ctx context.Context, shardID, replicaID uint64, logger *zap.Logger) {
	if n.voters.votes(shardID, replicaID) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if _, err := n.nh.SyncRead(ctx, shardID, nil); err != nil {
		return // the promotion may not be applied here yet
	}
	if _, err := n.nh.SyncRequestSnapshot(ctx, shardID, dragonboat.SnapshotOption{}); err != nil && !errors.Is(err, dragonboat.ErrRejected) {
		logger.Debug("snapshot of a promoted replica", zap.String("error", err.Error()))
		return // a snapshot at the applied index, taken before, is the one case refused
	}
	if err := n.voters.record(shardID, replicaID); err != nil {
		logger.Error("recording that the replica votes", zap.Error(err))
		return
	}
	logger.Info("the replica votes")
}

// addReplica starts replica r of partition p on this node, empty, joining the partition's shard.
func (n *Node) addReplica(p int, r Replica) {
	part := n.newPartition(p, r.ID)
	n.setPartition(p, part) // before it starts: the engine reports its leaders at once
	var err error
	if !n.nh.HasNodeInfo(part.shardID, r.ID) {
		dir, opts := n.cfg.PartitionLog(p)
		err = raftlog.RemoveLog(dir, opts)
	}
	for attempt := 0; err == nil; attempt++ {
		err = part.start(nil, true)
		if !errors.Is(err, dragonboat.ErrShardAlreadyExist) || attempt == 100 {
			break
		}
		err = nil
		time.Sleep(50 * time.Millisecond) // the replica this one replaces is still stopping
	}
	if err != nil {
		part.failed = err
		n.logger.Error("state partition replica not started", zap.Int("state_partition", p), zap.Uint64("replica", r.ID), zap.Error(err))
		return
	}
	n.logger.Info("started a replica the cluster placed on this node", zap.Int("state_partition", p), zap.Uint64("replica", r.ID))
	if n.watcher != nil {
		n.watcher.Started(part)
	}
}

// dropReplica stops this node's replica part, which its shard no longer has, and deletes its
// log and Raft state.
func (n *Node) dropReplica(ctx context.Context, part *Partition) {
	n.stopReplica(part)
	for {
		attempt, cancel := context.WithTimeout(ctx, stepTimeout)
		err := n.nh.SyncRemoveData(attempt, part.shardID, part.replicaID)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // the replica is still stopping
	}
	dir, opts := n.cfg.PartitionLog(part.index)
	if err := raftlog.RemoveLog(dir, opts); err != nil {
		n.logger.Warn("deleting the log of a removed replica", zap.Int("state_partition", part.index), zap.Error(err))
	}
	n.logger.Info("stopped a replica the cluster moved away, and deleted its log",
		zap.Int("state_partition", part.index), zap.Uint64("replica", part.replicaID))
}

// stopReplica stops this node's replica part, its shard first.
func (n *Node) stopReplica(part *Partition) {
	if n.watcher != nil && part.failed == nil {
		n.watcher.Stopping(part)
	}
	part.haltOnce.Do(func() { close(part.halted) })
	n.partsMu.Lock()
	if n.parts[part.index] == part {
		n.parts[part.index] = nil
	}
	n.partsMu.Unlock()
	if part.failed == nil {
		if err := n.nh.StopReplica(part.shardID, part.replicaID); err != nil && !errors.Is(err, dragonboat.ErrShardNotFound) {
			n.logger.Warn("stopping a replica", zap.Int("state_partition", part.index), zap.Error(err))
		}
	}
	_ = part.sm.Close()
}

// changeMembership takes the next step of partition part's membership change, which this node,
// as its leader, carries out.
func (n *Node) changeMembership(ctx context.Context, part *Partition) {
	rs := n.meta.replicas(part.index)
	if rs == nil || settled(rs) {
		return
	}
	read, cancel := context.WithTimeout(ctx, stepTimeout)
	m, err := n.nh.SyncGetShardMembership(read, part.shardID)
	cancel()
	if err != nil {
		part.logger.Debug("reading the shard's membership", zap.String("error", err.Error()))
		return
	}
	members := n.memberList()
	sh := shardChange{n: n, shardID: part.shardID, m: m, logger: part.logger}
	for _, r := range rs {
		// A replaced node's successor replica has the old one's address, which Raft allows
		// once in a shard: the old one, lost with the node's data, goes first.
		if r.State == ReplicaRemoving && slices.ContainsFunc(live(rs), func(l Replica) bool { return l.Node == r.Node }) {
			n.removeReplica(ctx, part, sh, rs, r)
			return
		}
	}
	pending := false
	for _, r := range rs {
		if r.State != ReplicaAdding && r.State != ReplicaReady {
			continue
		}
		pending = true
		voter, nonVoting := sh.has(r.ID)
		switch {
		case voter:
			n.propose(ctx, memberCommand{Op: opReplicaVoter, Node: r.Node, Partition: part.index, Replica: r.ID})
		case !nonVoting:
			sh.addNonVoting(ctx, r.ID, members[r.Node].RaftAddress)
			return
		case r.State == ReplicaReady:
			if sh.addVoter(ctx, r.ID, members[r.Node].RaftAddress) {
				n.propose(ctx, memberCommand{Op: opReplicaVoter, Node: r.Node, Partition: part.index, Replica: r.ID})
			}
			return
		}
	}
	if pending {
		return // replicas are removed once their successors vote
	}
	for _, r := range rs {
		if r.State == ReplicaRemoving {
			n.removeReplica(ctx, part, sh, rs, r)
			return
		}
	}
}

// removeReplica removes replica r from partition part's shard and records it dropped; if r is
// this node's replica, which leads, it hands the leadership over instead, and its successor
// leader removes it.
func (n *Node) removeReplica(ctx context.Context, part *Partition, sh shardChange, rs []Replica, r Replica) {
	if r.ID == part.replicaID {
		n.handLeadershipOver(part.shardID, part.logger, rs)
		return
	}
	if voter, nonVoting := sh.has(r.ID); (voter || nonVoting) && !sh.remove(ctx, r.ID) {
		return
	}
	n.propose(ctx, memberCommand{Op: opReplicaDropped, Node: r.Node, Partition: part.index, Replica: r.ID})
}

// handLeadershipOver asks for the leadership of a shard this node leads and leaves to move to
// the first voter of rs on another node.
func (n *Node) handLeadershipOver(shardID uint64, logger *zap.Logger, rs []Replica) {
	for _, r := range rs {
		if r.State == ReplicaVoter && r.Node != n.cfg.NodeID {
			logger.Info("handing the leadership over before this replica is removed", zap.Uint64("to", r.ID))
			if err := n.nh.RequestLeaderTransfer(shardID, r.ID); err != nil {
				logger.Debug("leadership transfer", zap.String("error", err.Error()))
			}
			return
		}
	}
}

// changeMetadataMembership takes the next step of a change of the metadata's own shard, if this
// node leads it: joining nodes' replicas are added, non-voting first, and made voters; the
// replicas of earlier incarnations and of removed nodes that hold no partition any more go.
func (n *Node) changeMetadataMembership(ctx context.Context) {
	leader, _, ok, err := n.nh.GetLeaderID(metadataShardID)
	if err != nil || !ok || leader != n.metaID {
		return
	}
	st := n.meta.snapshot()
	if !slices.ContainsFunc(slices.Collect(maps.Values(st.Members)), func(m Member) bool { return m.State != MemberActive || len(m.Retired) > 0 }) {
		return
	}
	read, cancel := context.WithTimeout(ctx, stepTimeout)
	ms, err := n.nh.SyncGetShardMembership(read, metadataShardID)
	cancel()
	if err != nil {
		return
	}
	sh := shardChange{n: n, shardID: metadataShardID, m: ms, logger: n.logger}
	for _, id := range slices.Sorted(maps.Keys(st.Members)) {
		if n.metadataStep(ctx, sh, id, st) {
			return // one configuration change per round: the next reads the new membership
		}
	}
}

// metadataStep takes the next step of node id's membership, and reports whether it changed the
// metadata's shard.
func (n *Node) metadataStep(ctx context.Context, sh shardChange, id uint64, st metadataState) bool {
	m := st.Members[id]
	voter, nonVoting := sh.has(m.MetaReplica)
	switch m.State {
	case MemberJoining:
		if n.retire(ctx, sh, id, m) {
			return true // the earlier incarnation had this address, which Raft allows once
		}
		switch {
		case voter:
			n.propose(ctx, memberCommand{Op: opActive, Node: id, Replica: m.MetaReplica})
		case !nonVoting:
			sh.addNonVoting(ctx, m.MetaReplica, m.RaftAddress)
			return true
		case m.MetaReady:
			if sh.addVoter(ctx, m.MetaReplica, m.RaftAddress) {
				n.propose(ctx, memberCommand{Op: opActive, Node: id, Replica: m.MetaReplica})
			}
			return true
		}
	case MemberActive:
		return n.retire(ctx, sh, id, m)
	case MemberRemoving:
		if !st.holdsNone(id) {
			return false
		}
		if m.MetaReplica == n.metaID {
			for other, om := range st.Members {
				if other != id && om.State == MemberActive {
					n.logger.Info("handing the metadata's leadership over before this node leaves", zap.Uint64("to", other))
					_ = n.nh.RequestLeaderTransfer(metadataShardID, om.MetaReplica)
					return true
				}
			}
			return false
		}
		if (voter || nonVoting) && !sh.remove(ctx, m.MetaReplica) {
			return true
		}
		n.propose(ctx, memberCommand{Op: opDropped, Node: id})
		return true
	}
	return false
}

// retire removes the first metadata replica of node id's earlier incarnations from the shard,
// and reports whether there was one.
func (n *Node) retire(ctx context.Context, sh shardChange, id uint64, m Member) bool {
	if len(m.Retired) == 0 {
		return false
	}
	old := m.Retired[0]
	if v, nv := sh.has(old); (v || nv) && !sh.remove(ctx, old) {
		return true
	}
	n.propose(ctx, memberCommand{Op: opRetired, Node: id, Replica: old})
	return true
}

// shardChange makes configuration changes of one Raft shard, from its membership as last read.
type shardChange struct {
	n       *Node
	shardID uint64
	m       *dragonboat.Membership
	logger  *zap.Logger
}

func (s shardChange) has(id uint64) (voter, nonVoting bool) {
	_, voter = s.m.Nodes[id]
	_, nonVoting = s.m.NonVotings[id]
	return voter, nonVoting
}

func (s shardChange) done(what string, id uint64, err error) bool {
	if err != nil {
		s.logger.Debug("configuration change", zap.String("change", what), zap.Uint64("target", id), zap.String("error", err.Error()))
		return false
	}
	s.logger.Info("configuration change", zap.String("change", what), zap.Uint64("target", id))
	return true
}

func (s shardChange) addNonVoting(ctx context.Context, id uint64, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	return s.done("add a non-voting replica", id, s.n.nh.SyncRequestAddNonVoting(ctx, s.shardID, id, addr, s.m.ConfigChangeID))
}

func (s shardChange) addVoter(ctx context.Context, id uint64, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	return s.done("make the replica a voter", id, s.n.nh.SyncRequestAddReplica(ctx, s.shardID, id, addr, s.m.ConfigChangeID))
}

func (s shardChange) remove(ctx context.Context, id uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	return s.done("remove the replica", id, s.n.nh.SyncRequestDeleteReplica(ctx, s.shardID, id, s.m.ConfigChangeID))
}
