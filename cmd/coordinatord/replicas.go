package main

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/shardconfig"
	"github.com/coordinatord/coordinatord/internal/cluster"
	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/service"
	"github.com/coordinatord/coordinatord/internal/shard"
)

// route is one state partition as the service calls it: this node's shard of it, or the
// answerer for a partition held elsewhere, switched as the cluster moves replicas.
type route struct {
	to atomic.Pointer[service.Partition]
}

func newRoute(p service.Partition) *route {
	r := &route{}
	r.set(p)
	return r
}

func (r *route) set(p service.Partition) { r.to.Store(&p) }
func (r *route) get() service.Partition  { return *r.to.Load() }

func (r *route) Initialize(ctx context.Context, q shard.InitializeRequest) shard.Result {
	return r.get().Initialize(ctx, q)
}
func (r *route) Read(ctx context.Context, q shard.ReadRequest) shard.ReadResult {
	return r.get().Read(ctx, q)
}
func (r *route) Write(ctx context.Context, q shard.WriteRequest) shard.Result {
	return r.get().Write(ctx, q)
}

// StartWrite queues the write on this node's shard; the answerer of a partition held elsewhere
// answers at once.
func (r *route) StartWrite(ctx context.Context, q shard.WriteRequest) *shard.Pending {
	p := r.get()
	if w, ok := p.(service.WriteStarter); ok {
		return w.StartWrite(ctx, q)
	}
	return shard.Answered(p.Write(ctx, q))
}
func (r *route) Delete(ctx context.Context, q shard.DeleteRequest) shard.Result {
	return r.get().Delete(ctx, q)
}
func (r *route) ReadSummary(ctx context.Context, q shard.SummaryRequest) shard.SummaryResult {
	return r.get().ReadSummary(ctx, q)
}

// replicaShards opens and closes the shards of the replicas a cluster node gains and loses after
// it started (cluster.ReplicaWatcher).
type replicaShards struct {
	logger  *zap.Logger
	b       *backend
	dataDir string
	broker  groupcfg.Broker
	metrics *shard.Metrics

	mu     sync.Mutex
	opened map[int]*shard.Shard // by partition, the shards opened after start
}

var _ cluster.ReplicaWatcher = (*replicaShards)(nil)

func newReplicaShards(logger *zap.Logger, b *backend, dataDir string, broker groupcfg.Broker, reg prometheus.Registerer) *replicaShards {
	return &replicaShards{logger: logger, b: b, dataDir: dataDir, broker: broker,
		metrics: shard.NewMetrics(reg, broker.MetricsGroupLabelMax()), opened: map[int]*shard.Shard{}}
}

// open opens the shard of this node's replica part.
func (w *replicaShards) open(part *cluster.Partition) *shard.Shard {
	pc := shardconfig.FromBroker(w.broker, w.dataDir, part.Index())
	pc.Shard.Metrics = w.metrics
	return shard.Open(w.logger, w.b.cfg, pc.Shard, part.ShardLog())
}

// Started opens the new replica's shard and routes the partition's keys to it.
func (w *replicaShards) Started(part *cluster.Partition) {
	s := w.open(part)
	w.mu.Lock()
	w.opened[part.Index()] = s
	w.mu.Unlock()
	w.b.routes[part.Index()].set(s)
}

// Stopping routes the partition's keys to its leader elsewhere, then closes the shard.
func (w *replicaShards) Stopping(part *cluster.Partition) {
	p := part.Index()
	w.b.routes[p].set(w.b.node.Remote(p))
	w.mu.Lock()
	s := w.opened[p]
	delete(w.opened, p)
	w.mu.Unlock()
	if s == nil && p < len(w.b.shards) {
		s = w.b.shards[p] // opened at start
	}
	if s != nil {
		if err := s.Close(); err != nil {
			w.logger.Warn("close the shard of a replica moved away", zap.Int("state_partition", p), zap.Error(err))
		}
	}
}

// closeAll closes the shards opened after start.
func (w *replicaShards) closeAll(logger *zap.Logger) {
	w.mu.Lock()
	var shards []*shard.Shard
	for _, s := range w.opened {
		shards = append(shards, s)
	}
	w.opened = map[int]*shard.Shard{}
	w.mu.Unlock()
	closeShards(logger, shards)
}
