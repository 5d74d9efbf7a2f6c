package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/shardconfig"
	"github.com/coordinatord/coordinatord/internal/cluster"
	"github.com/coordinatord/coordinatord/internal/connlimit"
	"github.com/coordinatord/coordinatord/internal/datadir"
	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/journal"
	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/service"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs"
)

// backend holds and serves the state partitions: a single node's logs, or this node's replicas of
// a cluster's.
type backend struct {
	cfg *groupcfg.Manager
	// shards are the partitions this node holds (all of them on a single node), by partition;
	// nil where it holds none.
	shards []*shard.Shard
	// parts is every partition as the service routes to it.
	parts []service.Partition
	// routes are parts on a cluster node, whose replicas come and go.
	routes  []*route
	watcher *replicaShards
	// coordinators names each partition's leader (nil: this node, a single node).
	coordinators func(p int) service.Coordinator
	// node is the cluster node (nil on a single node).
	node      *cluster.Node
	syncGroup *statelog.SyncGroup
	journal   *journal.Journal
	// checked is closed once the cluster's recorded partition count matched this node's.
	checked   chan struct{}
	checkOnce sync.Once
}

// backendFlags is what opening a backend needs beyond the configuration.
type backendFlags struct {
	f           *serveFlags
	static      *groupcfg.Static
	reg         prometheus.Registerer
	host        string
	port        int32
	exitOnErr   func(error) // stops the process on an error a replica can neither apply nor skip
	sec         *security
	connMetrics *connlimit.Metrics
}

// openSingle opens a single node's backend: the config store and one shard per state partition
// on its own log.
func openSingle(logger *zap.Logger, bf backendFlags) (*backend, error) {
	cfg, err := openConfig(logger, bf.f, bf.static, bf.reg)
	if err != nil {
		return nil, err
	}
	broker := cfg.Broker()
	logMetrics := statelog.NewMetrics(bf.reg)
	syncGroup, err := openSyncGroup(logger, bf.f.dataDir, broker, logMetrics)
	if err != nil {
		_ = cfg.Close()
		return nil, badConfig(err)
	}
	j, err := openJournal(logger, bf.f.dataDir, broker, logMetrics)
	if err != nil {
		if syncGroup != nil {
			_ = syncGroup.Close()
		}
		_ = cfg.Close()
		return nil, err
	}
	b := &backend{cfg: cfg, syncGroup: syncGroup, journal: j, checked: make(chan struct{})}
	b.markChecked()
	b.shards = openShards(logger, bf.f.dataDir, cfg, broker, bf.reg, logMetrics, syncGroup, j)
	b.parts = make([]service.Partition, len(b.shards))
	for i, s := range b.shards {
		b.parts[i] = s
	}
	return b, nil
}

// openCluster opens a cluster node's backend: the replicated configuration, the Raft engine with
// this node's replicas, a shard on each of them, and answerers for the partitions held elsewhere.
func openCluster(logger *zap.Logger, bf backendFlags) (*backend, error) {
	f := bf.f
	var members map[uint64]string
	if f.initialCluster != "" || f.join == "" {
		var err error
		if members, err = cluster.ParseInitialCluster(f.initialCluster); err != nil {
			return nil, badConfig(fmt.Errorf("--initial-cluster: %w", err))
		}
	}
	if f.nodeID < 1 {
		return nil, badConfig(fmt.Errorf("--node-id %d: a cluster node's id must be ≥ 1", f.nodeID))
	}
	if err := datadir.CheckMode(f.dataDir, true); err != nil {
		return nil, badConfig(err)
	}
	raftAddress := f.raftAdvertise
	if raftAddress == "" {
		raftAddress = members[uint64(f.nodeID)]
	}
	if raftAddress == "" {
		return nil, badConfig(fmt.Errorf("--initial-cluster does not name this node (--node-id %d): name every founding node there; "+
			"a node that joins a running cluster needs --join and --raft-advertise HOST:PORT", f.nodeID))
	}
	join, err := joinCluster(logger.Named("join"), f, members, raftAddress, net.JoinHostPort(bf.host, strconv.Itoa(int(bf.port))), bf.sec)
	if err != nil {
		return nil, err
	}
	transport, err := raftTransport(logger, bf.static.Broker(), bf.sec, bf.connMetrics)
	if err != nil {
		return nil, badConfig(err)
	}
	b := &backend{checked: make(chan struct{})}
	cfg, err := groupcfg.OpenReplicated(logger.Named("config"), bf.static, bf.reg, groupcfg.Options{NodeID: f.nodeID},
		func(ctx context.Context, change []byte) error {
			_, err := b.node.ProposeConfig(ctx, change)
			return err
		})
	if err != nil {
		return nil, badConfig(err)
	}
	b.cfg = cfg
	broker := cfg.Broker()
	n := broker.NumPartitions()
	logMetrics := statelog.NewMetrics(bf.reg)
	cc := cluster.Config{
		NodeID: uint64(f.nodeID), ListenAddress: f.raftListen, InitialMembers: members, RaftAddress: raftAddress, Join: join,
		Dir: datadir.RaftDir(f.dataDir), Partitions: n, ReplicationFactor: broker.ReplicationFactor(),
		PartitionLog: func(p int) (string, statelog.Options) {
			pc := shardconfig.FromBroker(broker, f.dataDir, p)
			pc.Log.Metrics = logMetrics
			return pc.LogDir, pc.Log
		},
		ProposalTimeout: time.Duration(broker.WriteTimeoutMs()) * time.Millisecond,
		Fatal:           bf.exitOnErr,
		GRPCAddress:     net.JoinHostPort(bf.host, strconv.Itoa(int(bf.port))),
		Config:          cfg,
		Registerer:      bf.reg,
		Transport:       transport,
		PeerContact:     transport.LastContact,
	}
	if err := cc.Validate(); err != nil {
		return nil, badConfig(err)
	}
	if err := datadir.CheckPartitionCount(f.dataDir, n); err != nil {
		return nil, badConfig(err)
	}
	datadir.CreatePartitionDirs(logger, vfs.OS(), f.dataDir, n)
	node, err := cluster.Start(logger.Named("cluster"), cc)
	if err != nil {
		return nil, err
	}
	b.node = node
	b.openReplicaShards(logger, f.dataDir, broker, bf.reg)
	b.coordinators = func(p int) service.Coordinator { return coordinatorOf(node.Coordinator(p)) }
	go b.checkPartitionCount(logger, n, bf.exitOnErr)
	return b, nil
}

// openReplicaShards opens a shard on each replica this node holds, and an answerer for each
// partition it does not; then the node follows the cluster, which opens and closes the shards of
// the replicas it gains and loses.
func (b *backend) openReplicaShards(logger *zap.Logger, dataDir string, broker groupcfg.Broker, reg prometheus.Registerer) {
	b.watcher = newReplicaShards(logger.Named("shard"), b, dataDir, broker, reg)
	b.shards = make([]*shard.Shard, broker.NumPartitions())
	b.parts = make([]service.Partition, len(b.shards))
	b.routes = make([]*route, len(b.shards))
	for p := range b.shards {
		if part := b.node.Partition(p); part != nil {
			b.shards[p] = b.watcher.open(part)
			b.routes[p] = newRoute(b.shards[p])
		} else {
			b.routes[p] = newRoute(b.node.Remote(p))
		}
		b.parts[p] = b.routes[p]
	}
	b.node.Run(b.watcher)
}

// checkPartitionCount records the partition count in the cluster on its first start, or reads
// the one recorded, and stops the process if it is not this node's: the count decides which
// partition each key belongs to.
func (b *backend) checkPartitionCount(logger *zap.Logger, n int, exitOnErr func(error)) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-b.checked // closed when checked, or by close
		cancel()
	}()
	recorded, err := b.node.RecordPartitions(ctx)
	if err != nil {
		return // stopping
	}
	if recorded != n {
		exitOnErr(badConfig(fmt.Errorf("%s=%d, but the cluster was created with %d: changing it would route share-group state "+
			"keys to other partitions; start with %s=%d", groupcfg.KeyNumPartitions, n, recorded, groupcfg.KeyNumPartitions, recorded)))
		return
	}
	logger.Info("the cluster's partition count matches", zap.Int(groupcfg.KeyNumPartitions, n))
	b.markChecked()
}

// markChecked closes b.checked once.
func (b *backend) markChecked() { b.checkOnce.Do(func() { close(b.checked) }) }

// coordinatorOf is FindCoordinator's answer for a cluster partition's coordinator.
func coordinatorOf(c cluster.Coordinator) service.Coordinator {
	none := service.Coordinator{NodeID: -1, Port: -1}
	switch {
	case c.State == cluster.CoordinatorElecting:
		none.Code, none.Message = kafkaerr.CoordinatorNotAvailable, "The coordinator is not available: the key's state partition has no leader; an election is under way."
		return none
	case c.Address == "":
		none.Code, none.Message = kafkaerr.CoordinatorNotAvailable, fmt.Sprintf("The coordinator is not available: node %d leads the key's state partition, but its address is not known here yet.", c.Node)
		return none
	}
	host, portText, err := net.SplitHostPort(c.Address)
	port, perr := strconv.ParseUint(portText, 10, 16)
	if err != nil || perr != nil {
		none.Code, none.Message = kafkaerr.CoordinatorNotAvailable, fmt.Sprintf("The coordinator is not available: node %d advertises the address %q, which is not HOST:PORT.", c.Node, c.Address)
		return none
	}
	return service.Coordinator{NodeID: int32(c.Node), Host: host, Port: int32(port)}
}

// localShards returns the shards this node holds.
func (b *backend) localShards() []*shard.Shard {
	var out []*shard.Shard
	for _, s := range b.shards {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// notReady lists why the backend does not serve yet beyond its shards' states: a cluster node
// whose replicas have not caught up, or whose partition count the cluster has not confirmed.
func (b *backend) notReady() []string {
	if b.node == nil {
		return nil
	}
	var out []string
	select {
	case <-b.checked:
	default:
		out = append(out, "the cluster has not confirmed the partition count yet (no quorum of its metadata?)")
	}
	for p := range b.shards {
		if part := b.node.Partition(p); part != nil && part.Err() == nil && !part.CaughtUp() {
			out = append(out, fmt.Sprintf("partition %d: its replica is catching up with the cluster", p))
		}
	}
	return out
}

// waitReady waits until the shards have loaded and, on a cluster node, the replicas caught up
// and the partition count was confirmed, or ctx ends.
func (b *backend) waitReady(ctx context.Context, logger *zap.Logger, start time.Time) {
	waitLoaded(ctx, logger, b.shards, start)
	for len(b.notReady()) > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	if b.node != nil && ctx.Err() == nil {
		logger.Info("every replica of this node caught up with the cluster", zap.Duration("took", time.Since(start)))
	}
}

// handOver moves this node's leaderships to other replicas before a planned stop.
func (b *backend) handOver(logger *zap.Logger, timeout time.Duration) {
	if b.node == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	began, before := time.Now(), b.node.Leaders()
	left := b.node.TransferLeaderships(ctx)
	logger.Info("handed the leaderships of this node over", zap.Int("partitions", before-left), zap.Int("still_led", left),
		zap.Duration("took", time.Since(began)))
}

// close closes the shards (each commits what it accepted), then what they run on.
func (b *backend) close(logger *zap.Logger) {
	closeShards(logger, b.localShards())
	if b.watcher != nil {
		b.watcher.closeAll(logger)
	}
	if b.syncGroup != nil {
		if err := b.syncGroup.Close(); err != nil {
			logger.Error("close the file-system sync group", zap.Error(err))
		}
	}
	if b.journal != nil {
		if err := b.journal.Close(); err != nil {
			logger.Error("close the journal", zap.Error(err))
		}
	}
	if b.node != nil {
		b.markChecked()
		b.node.Close()
	}
	_ = b.cfg.Close()
}

// exitOnReplicaFailure is the cluster's Fatal: a replica that can neither apply a committed entry
// nor skip it must stop the process, which its peers replace meanwhile.
func exitOnReplicaFailure(logger *zap.Logger) func(error) {
	return func(err error) {
		logger.Error("stopping: a replica cannot go on", zap.Error(err))
		_ = logger.Sync()
		code := exitFailure
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		os.Exit(code)
	}
}
