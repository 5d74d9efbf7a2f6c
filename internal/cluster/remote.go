package cluster

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/shard"
)

// RemotePartition answers for a state partition this node holds no replica of (a cluster of
// more nodes than the replication factor): NOT_COORDINATOR naming the leader its leader last
// announced, or COORDINATOR_NOT_AVAILABLE while none is known.
type RemotePartition struct {
	n *Node
	p int
}

// Remote returns the answerer of state partition p, which this node holds no replica of.
func (n *Node) Remote(p int) *RemotePartition { return &RemotePartition{n: n, p: p} }

func (r *RemotePartition) result() shard.Result {
	c := r.n.Coordinator(r.p)
	role := shard.Role{}
	if c.State == CoordinatorKnown {
		role.LeaderNode, role.LeaderAddress = int64(c.Node), c.Address
	}
	return shard.NotLeading(r.p, role)
}

// Initialize answers for the partition's leader.
func (r *RemotePartition) Initialize(context.Context, shard.InitializeRequest) shard.Result {
	return r.result()
}

// Read answers for the partition's leader.
func (r *RemotePartition) Read(context.Context, shard.ReadRequest) shard.ReadResult {
	return shard.ReadResult{Result: r.result()}
}

// Write answers for the partition's leader.
func (r *RemotePartition) Write(context.Context, shard.WriteRequest) shard.Result { return r.result() }

// Delete answers for the partition's leader.
func (r *RemotePartition) Delete(context.Context, shard.DeleteRequest) shard.Result {
	return r.result()
}

// ReadSummary answers for the partition's leader.
func (r *RemotePartition) ReadSummary(context.Context, shard.SummaryRequest) shard.SummaryResult {
	return shard.SummaryResult{Result: r.result()}
}
