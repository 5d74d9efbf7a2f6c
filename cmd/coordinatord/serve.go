package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/shardconfig"
	"github.com/coordinatord/coordinatord/internal/connlimit"
	"github.com/coordinatord/coordinatord/internal/datadir"
	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/journal"
	"github.com/coordinatord/coordinatord/internal/service"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// serveFlags are the command-line flags of the server (API.md, "Command line").
type serveFlags struct {
	configFile     string
	overrides      []string
	listen         string
	metricsListen  string
	advertise      string
	dataDir        string
	nodeID         int32
	raftListen     string
	initialCluster string
	join           string // --join: gRPC addresses of nodes of a running cluster
	raftAdvertise  string
	logLevel       string
	pprof          bool
	podName        string           // --node-id-from-pod-name
	sets           []*pflag.FlagSet // where the flags were registered, to tell which were given
}

func (f *serveFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.configFile, "config", "", "a Java-style properties file of broker-level configs (Kafka names)")
	fs.StringArrayVar(&f.overrides, "override", nil, "one broker-level config KEY=VALUE; wins over the environment and the file, not over a dynamic value set with IncrementalAlterConfigs (repeatable)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:7070", "gRPC address")
	fs.StringVar(&f.metricsListen, "metrics-listen", "127.0.0.1:7071", "HTTP address for /metrics, /healthz and /readyz")
	fs.StringVar(&f.advertise, "advertised-listen", "", "HOST:PORT that FindCoordinator returns (default: the --listen address, with this host's name if it listens on all interfaces or on a zoned IPv6 address)")
	fs.StringVar(&f.dataDir, "data-dir", "./data", "where the state logs and the config store live")
	fs.Int32Var(&f.nodeID, "node-id", 1, "this node's id (FindCoordinator, BROKER resource name; in a cluster its id in --initial-cluster)")
	fs.StringVar(&f.podName, "node-id-from-pod-name", "", "take --node-id from a StatefulSet pod's name (such as $(POD_NAME)): its ordinal, the number after the last '-', plus one")
	f.sets = append(f.sets, fs)
	fs.StringVar(&f.raftListen, "raft-listen", "127.0.0.1:7072", "cluster mode: this node's replication address (HOST:PORT)")
	fs.StringVar(&f.initialCluster, "initial-cluster", "", "cluster mode: ID=HOST:PORT,... the ids and replication addresses of the founding members, the same on every founding node; absent: a single node")
	fs.StringVar(&f.join, "join", "", "cluster mode: HOST:PORT,... gRPC addresses of nodes of a running cluster; a node started on an empty data directory asks them to add it, or to replace it if the cluster knows its id (a founding member named in --initial-cluster founds the cluster when none of them knows one)")
	fs.StringVar(&f.raftAdvertise, "raft-advertise", "", "cluster mode: the replication address the other nodes dial for this node (default: its address in --initial-cluster; required for a node that joins)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&f.pprof, "enable-pprof", false, "serve Go's runtime profiles at /debug/pprof/ on the metrics port")
}

// clusterMode reports whether the server runs as a node of a cluster.
func (f *serveFlags) clusterMode() bool { return f.initialCluster != "" || f.join != "" }

// nodeIDFromPodName sets the node id from --node-id-from-pod-name, if given: a StatefulSet names
// its pods NAME-0, NAME-1, ..., and node ids start at 1.
func (f *serveFlags) nodeIDFromPodName() error {
	if f.podName == "" {
		return nil
	}
	for _, fs := range f.sets {
		if fs.Changed("node-id") {
			return errors.New("--node-id and --node-id-from-pod-name: give one of them")
		}
	}
	i := strings.LastIndexByte(f.podName, '-')
	digits := f.podName[i+1:]
	ordinal, err := strconv.ParseInt(digits, 10, 32)
	if i < 0 || err != nil || strings.Trim(digits, "0123456789") != "" || ordinal >= math.MaxInt32 {
		return fmt.Errorf("--node-id-from-pod-name %q: want a StatefulSet pod's name, NAME-ORDINAL (such as coordinatord-0)", f.podName)
	}
	f.nodeID = int32(ordinal) + 1
	return nil
}

// serve runs the server until ctx ends, then shuts it down gracefully.
func serve(ctx context.Context, e env, f *serveFlags) (err error) {
	if err := f.nodeIDFromPodName(); err != nil {
		return badConfig(err)
	}
	if f.nodeID < 0 {
		return badConfig(fmt.Errorf("--node-id %d: want a node id >= 0", f.nodeID))
	}
	static, err := groupcfg.LoadStatic(groupcfg.Sources{File: f.configFile, Env: e.environ, Overrides: f.overrides})
	if err != nil {
		return badConfig(err)
	}
	logger, err := newLogger(e.stderr, f.logLevel)
	if err != nil {
		return badConfig(err)
	}
	defer func() { _ = logger.Sync() }()
	defer logStopError(logger, e, &err)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sec, err := newSecurity(logger.Named("security"), static.Broker(), reg)
	if err != nil {
		return badConfig(err)
	}
	if f.dataDir == "" {
		return badConfig(errors.New("--data-dir: want a directory for the state logs and the config store"))
	}
	applyMemoryLimit(logger, static.Broker(), e.environ, cgroupMemoryLimit)
	grpcCap, metricsCap, err := connectionCaps(logger, static.Broker(), fileDescriptorLimit(), f.clusterMode())
	if err != nil {
		return badConfig(err)
	}
	rawGRPC, rawMetrics, err := listen(f)
	if err != nil {
		return badConfig(err)
	}
	defer func() { _ = rawGRPC.Close() }()
	defer func() { _ = rawMetrics.Close() }()
	connMetrics := connlimit.NewMetrics(reg)
	grpcLis, metricsLis := limitListeners(logger, static.Broker(), rawGRPC, rawMetrics, grpcCap, metricsCap, connMetrics)
	host, port, err := advertisedAddr(f.advertise, grpcLis.Addr())
	if err != nil {
		return badConfig(err)
	}
	dirLock, err := takeDataDir(logger, f)
	if err != nil {
		return err
	}
	defer func() { _ = dirLock.Close() }()

	loadStart := time.Now()
	open := openSingle
	if f.clusterMode() {
		open = openCluster
	}
	b, err := open(logger, backendFlags{f: f, static: static, reg: reg, host: host, port: port,
		exitOnErr: exitOnReplicaFailure(logger), sec: sec, connMetrics: connMetrics})
	if err != nil {
		return err
	}
	broker := b.cfg.Broker()
	logEffectiveConfig(logger, f, b.cfg)
	srv := newGRPCServer(logger, b, sec, reg, f, grpcLis, host, port)
	sec.reloadOnHangup(ctx)

	var ready readiness
	httpSrv := newMetricsServer(logger, broker, newAdminMux(reg, b.shards, f.pprof, &ready, b.notReady), sec)
	errc := make(chan error, 2)
	go func() { errc <- serveErr("gRPC", srv.GRPC.Serve(grpcLis)) }()
	go func() {
		if httpSrv.TLSConfig != nil {
			errc <- serveErr("metrics HTTPS", httpSrv.ServeTLS(metricsLis, "", ""))
			return
		}
		errc <- serveErr("metrics HTTP", httpSrv.Serve(metricsLis))
	}()
	logServing(logger, f, grpcLis, metricsLis, host, port, len(b.shards), sec)

	// From the end of start-up, gRPC health follows whether any partition can serve.
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		b.waitReady(ctx, logger, loadStart)
		if ctx.Err() == nil {
			srv.SetServing(canServe(activePartitions(b.shards)))
			ready.serving.Store(true)
			go followPartitions(followCtx, b.shards, srv.SetServing)
		}
	}()

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutdown requested")
	case runErr = <-errc:
		logger.Error("server stopped unexpectedly", zap.Error(runErr))
	}
	stop(logger, b, srv, httpSrv, &ready, loaded, time.Duration(broker.ShutdownDrainTimeoutMs())*time.Millisecond)
	return runErr
}

// logStopError logs the error that ends the server as a JSON line when the log is not a
// terminal: log collectors parse every line of a JSON log, and the error is one of them instead
// of a plain-text line.
func logStopError(logger *zap.Logger, e env, err *error) {
	if *err == nil || isTerminal(e.stderr) {
		return
	}
	if ce := logger.Check(zap.ErrorLevel, "coordinatord stopped on an error"); ce != nil {
		ce.Write(zap.Error(*err))
		*err = loggedError{*err}
	}
}

// takeDataDir checks the data directory and takes its lock: two servers on one data directory
// would overwrite each other's config store and fight over the state logs, so the second is
// refused before it reads anything.
func takeDataDir(logger *zap.Logger, f *serveFlags) (io.Closer, error) {
	if err := datadir.Check(logger, f.dataDir); err != nil {
		return nil, badConfig(err)
	}
	if !f.clusterMode() {
		if err := datadir.CheckMode(f.dataDir, false); err != nil {
			return nil, badConfig(err)
		}
	}
	dirLock, err := datadir.Lock(vfs.OS(), f.dataDir)
	if err != nil {
		return nil, fmt.Errorf("--data-dir %s: %w", f.dataDir, err)
	}
	return dirLock, nil
}

// newGRPCServer builds the gRPC server over the backend's partitions and configuration; conns
// closes the connections of clients that do not read their responses.
func newGRPCServer(logger *zap.Logger, b *backend, sec *security, reg prometheus.Registerer, f *serveFlags, conns service.ConnCloser, host string, port int32) *service.Server {
	broker := b.cfg.Broker()
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	state := service.NewStateServer(b.parts, service.StateOptions{
		NodeID: f.nodeID, Host: host, Port: port, Coordinators: b.coordinators,
		MaxPartitionsPerRequest: broker.MaxPartitionsPerRequest(),
		Metrics:                 service.NewMetrics(reg),
		Logger:                  logger.Named("grpc"),
		ResponseBytes:           broker.GRPCMaxPendingResponseBytes(),
		SendTimeout:             ms(broker.SendTimeoutMs()),
		Conns:                   conns,
	})
	configs := service.NewConfigServer(b.cfg, service.ConfigOptions{MaxResourcesPerRequest: broker.MaxAlterConfigResourcesPerRequest()})
	srv := service.NewServer(logger, state, configs, service.ServerOptions{
		Registerer:           reg,
		MaxRecvMsgBytes:      broker.GRPCMaxRecvMessageBytes(),
		MaxConcurrentStreams: uint32(broker.GRPCMaxConcurrentStreams()),
		KeepaliveMinTime:     ms(broker.GRPCKeepaliveMinTimeMs()),
		KeepaliveTime:        ms(broker.GRPCKeepaliveTimeMs()),
		KeepaliveTimeout:     ms(broker.GRPCKeepaliveTimeoutMs()),
		HandshakeTimeout:     ms(broker.HandshakeTimeoutMs()),
		MaxConnectionIdle:    ms(broker.ConnectionsMaxIdleMs()),
		Credentials:          sec.credentials(),
		Authorize:            sec.authorize(),
		AuthorizeStream:      sec.authorizeStream(),
	})
	pb.RegisterClusterServiceServer(srv.GRPC, &clusterAdmin{node: b.node})
	return srv
}

// logServing logs, once, where the server listens.
func logServing(logger *zap.Logger, f *serveFlags, grpcLis, metricsLis net.Listener, host string, port int32, partitions int, sec *security) {
	fields := []zap.Field{
		zap.String("grpc", grpcLis.Addr().String()),
		zap.String("metrics", metricsLis.Addr().String()),
		zap.String("advertised", net.JoinHostPort(host, strconv.Itoa(int(port)))),
		zap.String("data_dir", f.dataDir),
		zap.Int("partitions", partitions)}
	if f.clusterMode() {
		fields = append(fields, zap.String("raft", f.raftListen), zap.String("initial_cluster", f.initialCluster), zap.String("join", f.join))
	}
	logger.Info("serving", append(fields, sec.fields()...)...)
}

// stop shuts the server down: readiness turns 503, a cluster node hands its leaderships over,
// the calls in flight drain (a second signal cuts that short), the shards commit what they
// accepted and close, and the metrics server ends.
func stop(logger *zap.Logger, b *backend, srv *service.Server, httpSrv *http.Server, ready *readiness, loaded <-chan struct{}, drain time.Duration) {
	again := make(chan os.Signal, 1)
	signal.Notify(again, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(again)
	ready.stopping.Store(true) // /readyz: 503 while draining
	b.handOver(logger, min(drain, 10*time.Second))
	drainCalls(logger, srv.Shutdown, drain, again)
	<-loaded
	b.close(logger)
	httpCtx, cancel := context.WithTimeout(context.Background(), min(drain, 5*time.Second)) // a scrape or probe in progress
	defer cancel()
	_ = httpSrv.Shutdown(httpCtx)
	logger.Info("stopped")
}

// listen checks the two addresses and takes their ports, before anything is created on disk. An
// empty address would make net.Listen pick a random port on every interface.
func listen(f *serveFlags) (grpcLis, metricsLis net.Listener, err error) {
	for _, a := range []struct{ flag, addr string }{{"--listen", f.listen}, {"--metrics-listen", f.metricsListen}} {
		if a.addr == "" {
			return nil, nil, fmt.Errorf("%s \"\": want HOST:PORT (an empty address would listen on a random port of every interface)", a.flag)
		}
	}
	if grpcLis, err = net.Listen("tcp", f.listen); err != nil {
		return nil, nil, fmt.Errorf("--listen %s: %w", f.listen, err)
	}
	if metricsLis, err = net.Listen("tcp", f.metricsListen); err != nil {
		_ = grpcLis.Close()
		return nil, nil, fmt.Errorf("--metrics-listen %s: %w", f.metricsListen, err)
	}
	return grpcLis, metricsLis, nil
}

// openConfig opens the configuration store of the data directory, whose lock the caller holds,
// and creates the partition directories the server will load. The store records the partition
// count on first start and checks it later; a data directory whose store is new but which holds
// state partitions must agree with them. Every partition directory must be there once one holds
// records: checked here, before a new store is written, or once the store has checked the count.
func openConfig(logger *zap.Logger, f *serveFlags, static *groupcfg.Static, reg prometheus.Registerer) (*groupcfg.Manager, error) {
	newStore := !datadir.HasConfigStore(f.dataDir)
	if newStore {
		if err := datadir.CheckPartitionCount(f.dataDir, static.Broker().NumPartitions()); err != nil {
			return nil, badConfig(err)
		}
		if err := datadir.CheckMissingPartitions(f.dataDir, static.Broker().NumPartitions()); err != nil {
			return nil, err
		}
	}
	cfg, err := groupcfg.Open(logger.Named("config"), datadir.ConfigStore(f.dataDir), static, reg, groupcfg.Options{NodeID: f.nodeID})
	if err != nil {
		var se *groupcfg.StaticError
		if errors.As(err, &se) {
			return nil, badConfig(err)
		}
		return nil, fmt.Errorf("open configuration store in %s: %w", f.dataDir, err)
	}
	if !newStore {
		if err := datadir.CheckMissingPartitions(f.dataDir, cfg.Broker().NumPartitions()); err != nil {
			_ = cfg.Close()
			return nil, err
		}
	}
	datadir.CreatePartitionDirs(logger, vfs.OS(), f.dataDir, cfg.Broker().NumPartitions())
	return cfg, nil
}

// drainCalls runs shutdown (the gRPC server's: NOT_SERVING, stop accepting, wait for the calls in
// flight) for at most timeout, or until a signal arrives on again: a second SIGINT or SIGTERM
// cuts the drain short, as an operator pressing Ctrl-C twice means. Calls cancelled that way are
// logged.
func drainCalls(logger *zap.Logger, shutdown func(context.Context) bool, timeout time.Duration, again <-chan os.Signal) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	go func() {
		select {
		case <-again:
			logger.Warn("second stop signal: cancelling the calls still in flight")
			cancel()
		case <-ctx.Done():
		}
	}()
	if !shutdown(ctx) {
		logger.Warn("the drain ended before every call finished: the rest were cancelled",
			zap.Duration("shutdown.drain.timeout.ms", timeout))
	}
}

func serveErr(what string, err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s server stopped", what)
	}
	return fmt.Errorf("%s server: %w", what, err)
}

// openSyncGroup returns the file-system sync group that state.log.sync=filesystem asks for, or
// nil for per-file syncs. A kernel or file system that cannot honour it is a configuration
// error.
func openSyncGroup(logger *zap.Logger, dataDir string, b groupcfg.Broker, m *statelog.Metrics) (*statelog.SyncGroup, error) {
	if mode, _ := b.Text(groupcfg.KeyStateLogSync); mode != groupcfg.StateLogSyncFileSystem {
		return nil, nil
	}
	g, err := statelog.NewSyncGroup(logger.Named("statelog"), dataDir, statelog.SyncGroupOptions{Metrics: m})
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w (set %s=%s)", groupcfg.KeyStateLogSync, groupcfg.StateLogSyncFileSystem, err,
			groupcfg.KeyStateLogSync, groupcfg.StateLogSyncFile)
	}
	logger.Info("state logs share one file-system sync per group commit", zap.String("data_dir", dataDir))
	return g, nil
}

// openJournal replays, into the state logs, what a journal in dataDir holds that they may lack
// (whatever state.log.sync is now: a node may have run with journal before), and, with
// state.log.sync=journal, opens the journal the logs then write to; otherwise it removes the
// emptied journal. Without a journal directory and another mode it does nothing.
func openJournal(logger *zap.Logger, dataDir string, b groupcfg.Broker, m *statelog.Metrics) (*journal.Journal, error) {
	dir := datadir.JournalDir(dataDir)
	mode, _ := b.Text(groupcfg.KeyStateLogSync)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) && mode != groupcfg.StateLogSyncJournal {
		return nil, nil
	}
	opts := shardconfig.FromBroker(b, dataDir, 0).Log
	opts.Name, opts.Metrics = "", nil
	partitions := make([]int, b.NumPartitions())
	for p := range partitions {
		partitions[p] = p
	}
	held, err := recoverJournal(logger.Named("journal"), dataDir, partitions, opts)
	if err != nil {
		return nil, err
	}
	if mode != groupcfg.StateLogSyncJournal && len(held) > 0 {
		// Removing the journal would drop the only copy of those partitions' appends, and
		// without it nothing would stop their logs from loading without them.
		logger.Warn("the journal holds appends of state partitions whose logs recovery could not open: "+
			"running with the journal until they are recovered", zap.Ints("state_partitions", held), zap.String(groupcfg.KeyStateLogSync, mode))
		mode = groupcfg.StateLogSyncJournal
	}
	if mode != groupcfg.StateLogSyncJournal {
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("remove the journal %s, whose records are in the state logs now: %w", dir, err)
		}
		logger.Info("the journal's records are in the state logs; removed it", zap.String(groupcfg.KeyStateLogSync, mode))
		return nil, nil
	}
	j, err := journal.Open(logger.Named("journal"), dir, journal.Options{Metrics: m})
	if err != nil {
		return nil, err
	}
	logger.Info("state logs share one journal: one write and one fdatasync per group commit", zap.String("dir", dir))
	return j, nil
}

// recoverJournal appends to the logs of the state partitions of dataDir what its journal holds
// past its checkpoint (journal.Recover), and returns the partitions it holds.
func recoverJournal(logger *zap.Logger, dataDir string, partitions []int, opts statelog.Options) ([]int, error) {
	dir := datadir.JournalDir(dataDir)
	logs := make(map[int]string, len(partitions))
	for _, p := range partitions {
		logs[p] = datadir.PartitionDir(dataDir, p)
	}
	held, err := journal.Recover(logger, dir, logs, opts, nil)
	if err != nil {
		return nil, fmt.Errorf("recover the journal %s: %w", dir, err)
	}
	return held, nil
}

// openShards starts one shard per state partition; they load in the background. syncGroup or
// j, if not nil, makes their appends durable together.
func openShards(logger *zap.Logger, dataDir string, provider shard.Provider, b groupcfg.Broker, reg prometheus.Registerer,
	logMetrics *statelog.Metrics, syncGroup *statelog.SyncGroup, j *journal.Journal) []*shard.Shard {
	shardMetrics := shard.NewMetrics(reg, b.MetricsGroupLabelMax())
	shards := make([]*shard.Shard, b.NumPartitions())
	for p := range shards {
		pc := shardconfig.FromBroker(b, dataDir, p)
		pc.Log.Metrics, pc.Log.SyncGroup, pc.Shard.Metrics = logMetrics, syncGroup, shardMetrics
		if j != nil { // the journal makes the appends durable, whatever state.log.sync says
			pc.Log.SyncGroup, pc.Log.Journal = nil, j.Log(p)
		}
		l := logger.Named("shard")
		shards[p] = shard.Open(l, provider, pc.Shard, pc.LocalLog(l.With(zap.Int("state_partition", p))))
	}
	return shards
}

// waitLoaded waits until every shard has finished loading (active, or failed for good) and logs
// the outcome once, with the time since start, when the shards started loading: how many loaded
// and failed, the records they replayed and the keys they hold, and the slowest. (Each shard logs
// its own load at DEBUG, unless it was unusual.)
func waitLoaded(ctx context.Context, logger *zap.Logger, shards []*shard.Shard, start time.Time) {
	var wg sync.WaitGroup
	errs := make([]error, len(shards))
	for i, s := range shards {
		if s != nil { // a partition this node holds no replica of
			wg.Go(func() { errs[i] = s.WaitLoaded(ctx) })
		}
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	var loaded, failed int
	var records, keys int64
	slowest, slowestTook := -1, time.Duration(0)
	for p, err := range errs {
		switch {
		case err != nil:
			failed++
			logger.Error("state partition failed to load; its keys answer COORDINATOR_NOT_AVAILABLE",
				zap.Int("state_partition", p), zap.Error(err))
		case shards[p] != nil:
			loaded++
			st := shards[p].Stats()
			records, keys = records+st.LoadedRecords, keys+st.Keys
			if slowest < 0 || st.LoadTime > slowestTook {
				slowest, slowestTook = p, st.LoadTime
			}
		}
	}
	fields := []zap.Field{zap.Int("partitions", len(shards)), zap.Int("loaded", loaded), zap.Int("failed", failed),
		zap.Int64("records", records), zap.Int64("keys", keys)}
	if slowest >= 0 {
		fields = append(fields, zap.Int("slowest_partition", slowest), zap.Duration("slowest_took", slowestTook))
	}
	logger.Info("state partitions loaded", append(fields, zap.Duration("took", time.Since(start)))...)
}

// closeShards closes every shard in parallel: each commits what it accepted and closes its log.
func closeShards(logger *zap.Logger, shards []*shard.Shard) {
	var wg sync.WaitGroup
	for p, s := range shards {
		wg.Go(func() {
			if err := s.Close(); err != nil {
				logger.Error("close state partition", zap.Int("state_partition", p), zap.Error(err))
			}
		})
	}
	wg.Wait()
}

// logEffectiveConfig logs, once, the configuration the server runs with (secrets masked).
func logEffectiveConfig(logger *zap.Logger, f *serveFlags, cfg *groupcfg.Manager) {
	entries := cfg.Effective()
	fields := make([]zap.Field, 0, len(entries))
	for _, en := range entries {
		v := en.Value + " (" + en.Source.String()
		if en.Origin != "" {
			v += ", " + en.Origin
		}
		fields = append(fields, zap.String(en.Name, v+")"))
	}
	logger.Info("starting coordinatord",
		zap.String("version", versionString()),
		zap.Int32("node_id", f.nodeID),
		zap.String("listen", f.listen),
		zap.String("metrics_listen", f.metricsListen),
		zap.String("data_dir", f.dataDir),
		zap.String("config_file", f.configFile),
		zap.Dict("config", fields...))
}

// advertisedAddr returns the host and port FindCoordinator answers with.
func advertisedAddr(flag string, listen net.Addr) (string, int32, error) {
	hostport := flag
	if hostport == "" {
		hostport = listen.String()
	}
	host, portText, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, fmt.Errorf("--advertised-listen %q: want HOST:PORT: %w", flag, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return "", 0, fmt.Errorf("--advertised-listen %q: port %q is not a port number (1 to 65535)", flag, portText)
	}
	ip, ipErr := netip.ParseAddr(host)
	switch {
	case flag != "" && ipErr == nil && ip.Zone() != "":
		return "", 0, fmt.Errorf("--advertised-listen %q: an IPv6 zone (%%%s) means nothing to other hosts; advertise an address or host name they can reach", flag, ip.Zone())
	case flag != "" && ipErr != nil && !isHostName(host):
		return "", 0, fmt.Errorf("--advertised-listen %q: host %q is neither an IP address nor a host name (letters, digits, '-', '_' and '.')", flag, host)
	}
	// Listening on all interfaces, or on a link-local address whose zone means nothing to other
	// hosts, the host name is the address to give clients.
	if host == "" || (ipErr == nil && (ip.IsUnspecified() || ip.Zone() != "")) {
		if host, err = os.Hostname(); err != nil {
			return "", 0, fmt.Errorf("the listen address %s cannot be advertised and the host name is unknown (%w): set --advertised-listen", hostport, err)
		}
	}
	return host, int32(port), nil
}

// isHostName reports whether host is written as a DNS host name: letters, digits, '-', '_' and
// '.' only (the empty host is left to advertisedAddr).
func isHostName(host string) bool {
	for _, c := range host {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
