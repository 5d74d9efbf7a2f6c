package cluster

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// balanceInterval is how often a node looks for partitions it prefers to lead but does not.
const balanceInterval = 2 * time.Second

// Leaders are spread by preference: each partition has a preferred leader (see placement), and
// leadership goes back to it once it is caught up. The preferred leader asks, through the cluster
// metadata, during the current leader's term; that leader, which sees the request applied, hands
// the partition over with a Raft leadership transfer. A request names the term it was made in,
// so a later leader never acts on an old one, and a node asks only when it can take over at once
// (its replica caught up), so no transfer goes to a node that is down.

// balance is the loop of both halves: asking for the partitions this node prefers, and handing
// over the ones it leads that another node asked for.
func (n *Node) balance() {
	t := time.NewTicker(balanceInterval)
	defer t.Stop()
	for {
		changes := n.meta.changes()
		select {
		case <-n.stop:
			return
		case <-t.C:
			n.askToLead()
		case <-changes:
		}
		n.handOver()
	}
}

// askToLead asks to lead the partitions this node prefers, holds caught up, and another node
// leads, unless it asked in that leader's term already.
func (n *Node) askToLead() {
	if n.leaving.Load() {
		return
	}
	for _, p := range n.local() {
		if p.failed != nil || !p.CaughtUp() || n.preferredLeader(p.index) != n.cfg.NodeID {
			continue
		}
		r := p.Role()
		if r.Leader == 0 || r.Leader == n.cfg.NodeID {
			continue
		}
		if w, ok := n.meta.wanted(p.index); ok && w.Node == n.cfg.NodeID && w.Term == r.Term {
			continue
		}
		idx, hint := p.index, LeaderHint{Node: n.cfg.NodeID, Term: r.Term}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		if _, err := n.proposeMetadata(ctx, metadataCommand{Want: &idx, Hint: &hint}); err != nil {
			n.logger.Debug("asking to lead a preferred partition", zap.Int("state_partition", idx), zap.String("error", err.Error()))
		}
		cancel()
	}
}

// handOver transfers the leadership of the partitions this node leads to the node that asked for
// them in this term.
func (n *Node) handOver() {
	for _, p := range n.local() {
		if p.failed != nil {
			continue
		}
		r := p.Role()
		w, ok := n.meta.wanted(p.index)
		if !r.Leading || !ok || w.Term != r.Term || w.Node == n.cfg.NodeID {
			continue
		}
		to, held := n.replicaOn(p.index, w.Node)
		if !held {
			continue
		}
		if p.transferring.Swap(true) {
			continue
		}
		n.logger.Info("handing a state partition over to its preferred leader", zap.Int("state_partition", p.index), zap.Uint64("to", w.Node))
		if err := n.nh.RequestLeaderTransfer(p.shardID, to.ID); err != nil {
			n.logger.Debug("leadership transfer", zap.Int("state_partition", p.index), zap.String("error", err.Error()))
		}
		go func() {
			time.Sleep(n.cfg.Timing.RTT * time.Duration(n.cfg.Timing.ElectionTicks) * 2)
			p.transferring.Store(false)
		}()
	}
}

// TransferLeaderships hands every partition this node leads to another replica, and waits until
// they are led elsewhere or ctx ends: a planned stop then costs no election. From then on the node
// no longer asks to lead the partitions it prefers. It returns how many partitions this node
// still leads.
func (n *Node) TransferLeaderships(ctx context.Context) int {
	n.leaving.Store(true)
	var wg sync.WaitGroup
	for _, p := range n.local() {
		if p.failed != nil || !p.Role().Leading {
			continue
		}
		var targets []uint64 // the preferred leader first, then the other voters
		for _, r := range n.replicasOf(p.index) {
			if r.Node != n.cfg.NodeID && r.State == ReplicaVoter {
				targets = append(targets, r.ID)
			}
		}
		if len(targets) == 0 {
			continue // a single replica: nowhere to go
		}
		wg.Go(func() { n.handOff(ctx, p, targets) })
	}
	wg.Wait()
	left := 0
	for _, p := range n.local() {
		if p.Role().Leading {
			left++
		}
	}
	return left
}

// handOff asks for p's leadership to move to targets, in turn, until p is led elsewhere or ctx
// ends. dragonboat drops a transfer that has not completed within an election timeout, and one
// can fail: its target may be down, or skip its campaign because it has committed entries still
// to apply, as a loaded follower often has. So the node asks again, the next target, once a
// transfer had that long.
func (n *Node) handOff(ctx context.Context, p *Partition, targets []uint64) {
	patience := n.cfg.Timing.RTT * time.Duration(n.cfg.Timing.ElectionTicks+n.cfg.Timing.HeartbeatTicks)
	for i := 0; p.Role().Leading && ctx.Err() == nil; i++ {
		target := targets[i%len(targets)]
		if err := n.nh.RequestLeaderTransfer(p.shardID, target); err != nil {
			n.logger.Debug("leadership transfer", zap.Int("state_partition", p.index), zap.Uint64("to", target), zap.String("error", err.Error()))
		}
		asked := time.Now()
		for p.Role().Leading && ctx.Err() == nil && time.Since(asked) < patience {
			select {
			case <-ctx.Done():
			case <-time.After(n.cfg.Timing.RTT):
			}
		}
	}
}

// Leaders returns how many partitions this node leads now.
func (n *Node) Leaders() int {
	c := 0
	for _, p := range n.local() {
		if p.Role().Leading {
			c++
		}
	}
	return c
}
