package client

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/service"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// startServer runs coordinatord's own gRPC server as a single node, over real state partitions
// in a temporary data directory, on a loopback port, and returns its address.
func startServer(t *testing.T, partitions int) string {
	t.Helper()
	logger := zaptest.NewLogger(t)
	static, err := groupcfg.LoadStatic(groupcfg.Sources{Overrides: []string{
		"share.coordinator.state.topic.num.partitions=" + strconv.Itoa(partitions)}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg, err := groupcfg.Open(logger, filepath.Join(dir, "config", "store"), static, nil, groupcfg.Options{NodeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOrFail(t, "config", cfg.Close) })
	parts := make([]service.Partition, partitions)
	for p := range parts {
		s := shard.Open(logger, cfg, shard.Options{Partition: p, AppendLingerMs: -1}, shard.NewLocalLog(logger, filepath.Join(dir, strconv.Itoa(p)), statelog.Options{}))
		t.Cleanup(func() { closeOrFail(t, "shard", s.Close) })
		if err := s.WaitLoaded(context.Background()); err != nil {
			t.Fatal(err)
		}
		parts[p] = s
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	state := service.NewStateServer(parts, service.StateOptions{NodeID: 1, Host: "127.0.0.1", Port: int32(lis.Addr().(*net.TCPAddr).Port)})
	srv := service.NewServer(logger, state, service.NewConfigServer(cfg, service.ConfigOptions{}), service.ServerOptions{})
	served := make(chan error, 1)
	go func() { served <- srv.GRPC.Serve(lis) }()
	t.Cleanup(func() { // runs first: the server stops before what it serves closes
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-served
	})
	return lis.Addr().String()
}

func closeOrFail(t *testing.T, what string, closeFn func() error) {
	if err := closeFn(); err != nil {
		t.Errorf("close %s: %v", what, err)
	}
}

// TestAgainstTheServer makes the same calls through the client and straight to a single
// coordinatord node, which answers FindCoordinator with itself: the answers must be the same
// messages, for a request that names a topic in two entries and spans several state partitions.
func TestAgainstTheServer(t *testing.T) {
	addr := startServer(t, 4)
	c, err := New(Options{Bootstrap: []string{addr}, Logger: zaptest.NewLogger(t),
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	direct := pb.NewShareCoordinatorServiceClient(conn)
	ctx := ctxT(t, 30*time.Second)
	specs := []spec{{topicA, []int32{0, 1, 2}}, {topicB, []int32{3, 0}}, {topicA, []int32{7, 4}}}

	same := func(what string, viaClient, viaServer proto.Message, errClient, errServer error) {
		t.Helper()
		if errClient != nil || errServer != nil {
			t.Fatalf("%s: client error %v, server error %v", what, errClient, errServer)
		}
		if !proto.Equal(viaClient, viaServer) {
			t.Errorf("%s through the client:\n%v\nstraight to the server:\n%v", what, viaClient, viaServer)
		}
	}

	initialize := initializeRequest(specs)
	ci, err1 := c.InitializeShareGroupState(ctx, initialize)
	si, err2 := direct.InitializeShareGroupState(ctx, initialize) // the same again: idempotent
	same("Initialize", ci, si, err1, err2)

	if cw, err := c.WriteShareGroupState(ctx, writeRequest(specs)); err != nil {
		t.Fatal(err)
	} else {
		for _, r := range flat(cw.GetResults()) {
			if r.code != pb.ErrorCode_ERROR_CODE_NONE {
				t.Errorf("write %+v", r)
			}
		}
	}
	fenced := writeRequest(specs)
	fenced.Topics[1].Partitions[0].StateEpoch = 0
	cw, err1 := c.WriteShareGroupState(ctx, fenced)
	sw, err2 := direct.WriteShareGroupState(ctx, fenced)
	same("Write with one stale state epoch", cw, sw, err1, err2)

	cr, err1 := c.ReadShareGroupState(ctx, readRequest(specs))
	sr, err2 := direct.ReadShareGroupState(ctx, readRequest(specs))
	same("Read", cr, sr, err1, err2)

	sum, del := summaryRequest(specs), deleteRequest(specs)
	cs, err1 := c.ReadShareGroupStateSummary(ctx, sum)
	ss, err2 := direct.ReadShareGroupStateSummary(ctx, sum)
	same("ReadSummary", cs, ss, err1, err2)

	cd, err1 := c.DeleteShareGroupState(ctx, del)
	sd, err2 := direct.DeleteShareGroupState(ctx, del) // deleting absent state succeeds
	same("Delete", cd, sd, err1, err2)

	if s := c.Stats(); s.Lookups != 1 || s.Retries != 0 || s.Requests != 6 {
		t.Errorf("stats %+v, want one lookup, then one request per call", s)
	}

	// A topic id that does not parse: FindCoordinator refuses its key, so the client answers it
	// with that refusal; the code is the server's, the message FindCoordinator's.
	bad := writeRequest([]spec{{topicB, []int32{0}}, {"not-a-topic-id", []int32{0}}})
	cw, err1 = c.WriteShareGroupState(ctx, bad)
	sw, err2 = direct.WriteShareGroupState(ctx, bad)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	viaClient, viaServer := flat(cw.GetResults()), flat(sw.GetResults())
	for i := range viaServer {
		if viaClient[i].topic != viaServer[i].topic || viaClient[i].code != viaServer[i].code {
			t.Errorf("result %d through the client %+v, straight to the server %+v", i, viaClient[i], viaServer[i])
		}
	}
}
