package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/memlimit"
	"github.com/coordinatord/coordinatord/internal/connlimit"
	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/raftnet"
)

// memoryLimitShare is the part of a cgroup's memory limit the Go runtime's soft limit is set to:
// the rest is headroom for what the runtime does not count (goroutine stacks being grown, memory
// not yet returned to the system) before the kernel's limit.
const memoryLimitShare = 0.9

// applyMemoryLimit sets the Go runtime's soft memory limit: memory.limit.bytes when set, else
// GOMEMLIMIT when the environment sets it (the runtime read it at start), else 90 % of the
// cgroup's memory limit, else none. It logs the limit in force and where it came from.
func applyMemoryLimit(logger *zap.Logger, b groupcfg.Broker, environ []string, cgroup func() (int64, bool)) {
	limit, source := int64(0), ""
	switch {
	case b.MemoryLimitBytes() > 0:
		limit, source = b.MemoryLimitBytes(), "memory.limit.bytes"
		debug.SetMemoryLimit(limit)
	case hasEnv(environ, "GOMEMLIMIT"):
		limit, source = debug.SetMemoryLimit(-1), "GOMEMLIMIT"
	default:
		if n, ok := cgroup(); ok {
			limit, source = int64(float64(n)*memoryLimitShare), fmt.Sprintf("90 %% of the cgroup's memory limit of %d bytes", n)
			debug.SetMemoryLimit(limit)
		}
	}
	if source == "" {
		logger.Info("no memory limit: the Go runtime collects by GOGC alone (set memory.limit.bytes, or run in a container with a memory limit)")
		return
	}
	logger.Info("Go memory limit", zap.Int64("bytes", limit), zap.String("from", source))
}

// cgroupMemoryLimit is the memory limit of this process's cgroup.
func cgroupMemoryLimit() (int64, bool) { return memlimit.Cgroup(os.DirFS("/")) }

func hasEnv(environ []string, name string) bool {
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); k == name {
			return true
		}
	}
	return false
}

// reservedDescriptors is how many file descriptors the connection caps of the two ports leave to
// the rest of the process: per state partition its log's open segment and the files a load, a
// prune or a sync opens for a moment; the config store, the standard streams, the runtime's
// poller; in cluster mode the Raft engine's log store and snapshots, and the replication port's
// connections (raftConns, raft.max.connections; not counted for a single node).
func reservedDescriptors(partitions int, cluster bool, raftConns int) int {
	n := 256 + 4*partitions
	if cluster {
		n += 384 + raftConns
	}
	return n
}

// connectionCaps returns the connection caps of the gRPC and the metrics ports: their settings,
// lowered (with a warning) so that the file descriptor limit (ulimit -n), whose soft limit the Go
// runtime raised to the hard one at start, keeps reservedDescriptors for the state logs. A limit
// too low for even that is an error.
func connectionCaps(logger *zap.Logger, b groupcfg.Broker, fdLimit uint64, cluster bool) (grpcCap, metricsCap int, err error) {
	grpcCap, metricsCap = b.GRPCMaxConnections(), b.MetricsMaxConnections()
	reserved := reservedDescriptors(b.NumPartitions(), cluster, b.RaftMaxConnections())
	if fdLimit >= uint64(reserved+grpcCap+metricsCap) {
		return grpcCap, metricsCap, nil
	}
	left := int(fdLimit) - reserved
	metricsCap = min(metricsCap, max(left/16, 1))
	if left-metricsCap < 1 {
		return 0, 0, fmt.Errorf("the file descriptor limit (ulimit -n) is %d: the state logs of %d partitions need %d of them, which leaves none for connections; raise it",
			fdLimit, b.NumPartitions(), reserved)
	}
	grpcCap = min(grpcCap, left-metricsCap)
	logger.Warn("the file descriptor limit (ulimit -n) is too low for the connection caps: they are lowered so that the state logs keep theirs",
		zap.Uint64("file_descriptor_limit", fdLimit), zap.Int("reserved_for_state_logs", reserved),
		zap.Int("grpc.max.connections", grpcCap), zap.Int("metrics.max.connections", metricsCap))
	return grpcCap, metricsCap, nil
}

// fileDescriptorLimit is the process's soft limit of open files.
func fileDescriptorLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return ^uint64(0)
	}
	return rl.Cur
}

// limitListeners wraps the two ports' listeners in their connection bounds.
func limitListeners(logger *zap.Logger, b groupcfg.Broker, grpcLis, metricsLis net.Listener, grpcCap, metricsCap int, m *connlimit.Metrics) (*connlimit.Listener, *connlimit.Listener) {
	l := logger.Named("connections")
	send := time.Duration(b.SendTimeoutMs()) * time.Millisecond
	g := connlimit.New(grpcLis, "grpc", connlimit.Limits{
		MaxConnections: grpcCap, MaxPerIP: b.MaxConnectionsPerIP(), PerIPOverrides: b.MaxConnectionsPerIPOverrides(),
		WriteTimeout: send, MaxConnectionsKey: "grpc.max.connections", MaxPerIPKey: "max.connections.per.ip",
	}, m, l)
	h := connlimit.New(metricsLis, "metrics", connlimit.Limits{
		MaxConnections: metricsCap, MaxPerIP: b.MetricsMaxConnectionsPerIP(),
		WriteTimeout: send, MaxConnectionsKey: "metrics.max.connections", MaxPerIPKey: "metrics.max.connections.per.ip",
	}, m, l)
	return g, h
}

// newMetricsServer is the HTTP server of the metrics port: a connection has
// connections.handshake.timeout.ms to send its request headers (and complete its TLS handshake),
// and one without a request is closed after connections.max.idle.ms.
func newMetricsServer(logger *zap.Logger, b groupcfg.Broker, handler http.Handler, sec *security) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: time.Duration(b.HandshakeTimeoutMs()) * time.Millisecond,
		IdleTimeout:       time.Duration(b.ConnectionsMaxIdleMs()) * time.Millisecond,
		TLSConfig:         sec.metricsTLSConfig(),
		ErrorLog:          zap.NewStdLog(logger.Named("metrics-http")), // handshake errors and the like, as JSON too
	}
}

// raftTransport is the replication port's transport (--raft-listen): the connection bounds and
// timeouts of the gRPC port, raft.max.connections in all and a quarter of it per IP address, and
// mutual TLS over the peer CA when TLS is on.
func raftTransport(logger *zap.Logger, b groupcfg.Broker, sec *security, m *connlimit.Metrics) (*raftnet.Factory, error) {
	peer, err := sec.peerTLS()
	if err != nil {
		return nil, err
	}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	logger = logger.Named("raft-transport")
	if peer == nil {
		logger.Warn("the replication port is plaintext and authenticates no one: it must be reachable by the cluster's nodes only (set tls.enabled and tls.peer.ca.file for mutual TLS)")
	}
	caps := b.RaftMaxConnections()
	return raftnet.NewFactory(raftnet.Options{
		Limits: connlimit.Limits{
			MaxConnections: caps, MaxPerIP: max(caps/4, 2),
			MaxConnectionsKey: "raft.max.connections", MaxPerIPKey: "raft.max.connections / 4",
		},
		Metrics:          m,
		TLS:              peer,
		MinTLSVersion:    sec.minTLSVersion(),
		HandshakeTimeout: ms(b.HandshakeTimeoutMs()),
		IdleTimeout:      ms(b.ConnectionsMaxIdleMs()),
		SendTimeout:      ms(b.SendTimeoutMs()),
		Logger:           logger,
	}), nil
}
