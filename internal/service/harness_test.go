package service

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordinatord/coordinatord/internal/connlimit"
	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const topicA = "P6hfZFcXRWKz_CyWP2avpg" // Kafka Uuid text form (API.md example)
const topicB = "ASNFZ4mrze8BI0VniavN7w"

// testServer is a real gRPC server on 127.0.0.1 over real shards and a real config store.
type testServer struct {
	t        *testing.T
	srv      *Server
	stateSrv *StateServer
	lis      *connlimit.Listener
	shards   []*shard.Shard
	cfg      *groupcfg.Manager
	reg      *prometheus.Registry
	metrics  *Metrics
	conn     *grpc.ClientConn
	state    pb.ShareCoordinatorServiceClient
	config   pb.ConfigServiceClient
	serveErr chan error
}

type testOptions struct {
	partitions int
	overrides  []string
	// wrap replaces the partitions the state server routes to (fault injection).
	wrap func([]Partition) []Partition
	// state and server, when set, adjust the options of the state server and of the gRPC server.
	state  func(*StateOptions)
	server func(*ServerOptions)
}

func startServer(t *testing.T, o testOptions) *testServer {
	t.Helper()
	if o.partitions == 0 {
		o.partitions = 3
	}
	logger := zaptest.NewLogger(t)
	overrides := append([]string{"share.coordinator.state.topic.num.partitions=" + strconv.Itoa(o.partitions)}, o.overrides...)
	static, err := groupcfg.LoadStatic(groupcfg.Sources{Overrides: overrides})
	if err != nil {
		t.Fatalf("static config: %v", err)
	}
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	cfg, err := groupcfg.Open(logger, filepath.Join(dir, "config", "store"), static, reg, groupcfg.Options{NodeID: 1})
	if err != nil {
		t.Fatalf("open config: %v", err)
	}
	b := cfg.Broker()
	metrics := shard.NewMetrics(reg, b.MetricsGroupLabelMax())
	shards := make([]*shard.Shard, b.NumPartitions())
	parts := make([]Partition, len(shards))
	for p := range shards {
		shards[p] = shard.Open(logger, cfg, shard.Options{Partition: p, Metrics: metrics, AppendLingerMs: -1}, shard.NewLocalLog(logger, filepath.Join(dir, strconv.Itoa(p)), statelog.Options{}))
		parts[p] = shards[p]
	}
	for _, s := range shards {
		if err := s.WaitLoaded(context.Background()); err != nil {
			t.Fatalf("load shard: %v", err)
		}
	}
	if o.wrap != nil {
		parts = o.wrap(parts)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := connlimit.New(inner, "grpc", connlimit.Limits{}, nil, logger)
	svcMetrics := NewMetrics(reg)
	so := StateOptions{
		NodeID: 1, Host: "127.0.0.1", Port: 7070,
		MaxPartitionsPerRequest: b.MaxPartitionsPerRequest(),
		Metrics:                 svcMetrics,
		Logger:                  logger,
		Conns:                   lis,
	}
	if o.state != nil {
		o.state(&so)
	}
	state := NewStateServer(parts, so)
	sopts := ServerOptions{Registerer: reg, MaxRecvMsgBytes: b.GRPCMaxRecvMessageBytes()}
	if o.server != nil {
		o.server(&sopts)
	}
	configs := NewConfigServer(cfg, ConfigOptions{MaxResourcesPerRequest: b.MaxAlterConfigResourcesPerRequest()})
	srv := NewServer(logger, state, configs, sopts)
	ts := &testServer{t: t, srv: srv, stateSrv: state, lis: lis, shards: shards, cfg: cfg, reg: reg, metrics: svcMetrics, serveErr: make(chan error, 1)}
	go func() { ts.serveErr <- srv.GRPC.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ts.conn = conn
	ts.state = pb.NewShareCoordinatorServiceClient(conn)
	ts.config = pb.NewConfigServiceClient(conn)
	t.Cleanup(ts.stop)
	return ts
}

// stop shuts everything down; safe to call twice.
func (ts *testServer) stop() {
	if ts.conn == nil {
		return
	}
	_ = ts.conn.Close()
	ts.conn = nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ts.srv.Shutdown(ctx)
	<-ts.serveErr
	for _, s := range ts.shards {
		if err := s.Close(); err != nil {
			ts.t.Errorf("close shard: %v", err)
		}
	}
	if err := ts.cfg.Close(); err != nil {
		ts.t.Errorf("close config: %v", err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func initReq(group, topic string, partition, stateEpoch int32, startOffset int64) *pb.InitializeShareGroupStateRequest {
	return &pb.InitializeShareGroupStateRequest{GroupId: group, Topics: []*pb.InitializeStateTopic{{
		TopicId: topic, Partitions: []*pb.InitializeStatePartition{{Partition: partition, StateEpoch: stateEpoch, StartOffset: startOffset}},
	}}}
}

func writeReq(group, topic string, partition, stateEpoch, leaderEpoch int32, startOffset int64, batches ...*pb.StateBatch) *pb.WriteShareGroupStateRequest {
	return &pb.WriteShareGroupStateRequest{GroupId: group, Topics: []*pb.WriteStateTopic{{
		TopicId: topic, Partitions: []*pb.WriteStatePartition{{
			Partition: partition, StateEpoch: stateEpoch, LeaderEpoch: leaderEpoch, StartOffset: startOffset, StateBatches: batches,
		}},
	}}}
}

func readReq(group, topic string, partition, leaderEpoch int32) *pb.ReadShareGroupStateRequest {
	return &pb.ReadShareGroupStateRequest{GroupId: group, Topics: []*pb.ReadStateTopic{{
		TopicId: topic, Partitions: []*pb.ReadStatePartition{{Partition: partition, LeaderEpoch: leaderEpoch}},
	}}}
}

func batch(first, last int64, state, count int32) *pb.StateBatch {
	return &pb.StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: state, DeliveryCount: count}
}
