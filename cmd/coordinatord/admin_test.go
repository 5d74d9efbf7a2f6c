package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/coordinatord/coordinatord/internal/datadir"
	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/service"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// TestReadyzWhileStopping: once the server is draining its calls before exit, both readiness
// probes answer 503, as the gRPC health service turns NOT_SERVING.
func TestReadyzWhileStopping(t *testing.T) {
	var ready readiness
	ready.serving.Store(true)
	mux := newAdminMux(prometheus.NewRegistry(), nil, false, &ready, nil)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(body)
	}
	for _, path := range []string{"/readyz", "/readyz?exclude=failed"} {
		if code, body := get(path); code != http.StatusOK {
			t.Fatalf("%s before stopping = %d %q, want 200", path, code, body)
		}
	}
	ready.stopping.Store(true)
	for _, path := range []string{"/readyz", "/readyz?exclude=failed"} {
		if code, body := get(path); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
			t.Fatalf("%s while stopping = %d %q, want 503 saying it is shutting down", path, code, body)
		}
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz while stopping = %d, want 200: the process is still alive", code)
	}
}

// oneProvider gives every group the snapshot limit 500.
type oneProvider struct{}

func (oneProvider) SnapshotUpdateRecordsPerSnapshot(string) int { return 500 }

// TestReadyzExcludeFailedFollowsGRPCHealth: /readyz?exclude=failed, the probes' endpoint, answers
// 503 until every partition finished its first load and 200 from then on, as gRPC health does,
// also while one partition reloads after a failed append; plain /readyz reports that partition.
// Neither says ready before gRPC health serves.
func TestReadyzExcludeFailedFollowsGRPCHealth(t *testing.T) {
	fsys := faultfs.Wrap(faultfs.NewCrashFS(), nil)
	reloading := shard.Open(zap.NewNop(), oneProvider{}, shard.Options{Partition: 0, RetryBackoff: time.Hour, MaxRetryBackoff: time.Hour},
		shard.NewLocalLog(nil, datadir.PartitionDir("/data", 0), statelog.Options{FS: fsys}))
	healthy := shard.Open(zap.NewNop(), oneProvider{}, shard.Options{Partition: 1},
		shard.NewLocalLog(nil, datadir.PartitionDir("/data", 1), statelog.Options{FS: faultfs.NewCrashFS()}))
	t.Cleanup(func() { fsys.SetInjector(nil); _ = reloading.Close(); _ = healthy.Close() })
	var ready readiness
	mux := newAdminMux(prometheus.NewRegistry(), []*shard.Shard{reloading, healthy}, false, &ready, nil)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	ctx := context.Background()
	for _, s := range []*shard.Shard{reloading, healthy} {
		if err := s.WaitLoaded(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Every partition is active, but start-up has not finished: gRPC health does not serve yet,
	// and neither probe may say ready before it.
	for _, path := range []string{"/readyz", "/readyz?exclude=failed"} {
		if code, body := get(path); code != http.StatusServiceUnavailable || !strings.Contains(body, "start-up has not finished") {
			t.Fatalf("%s before gRPC health serves: %d %q, want 503 saying start-up has not finished", path, code, body)
		}
	}
	ready.serving.Store(true)
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz once gRPC health serves: %d %q, want 200", code, body)
	}
	key := shard.Key{GroupID: "g", Partition: 0}
	if r := reloading.Initialize(ctx, shard.InitializeRequest{Key: key, StateEpoch: 1}); r.Code != kafkaerr.None {
		t.Fatal(r)
	}
	// Two failed appends in a row: the second reload waits for its backoff in Loading. The
	// reload's lock of the log directory tells that it has begun.
	locked := make(chan struct{}, 1)
	fsys.SetInjector(faultfs.InjectorFunc(func(op faultfs.Op) error {
		switch op.Kind {
		case faultfs.OpWrite:
			return syscall.ENOSPC
		case faultfs.OpLock:
			select {
			case locked <- struct{}{}:
			default:
			}
		}
		return nil
	}))
	write := func() {
		reloading.Write(ctx, shard.WriteRequest{Key: key, StateEpoch: 1, StateBatches: []shard.StateBatch{{FirstOffset: 0, LastOffset: 1}}})
	}
	loaded := reloading.Status().LoadDuration
	write()
	// Active again after the reload, not the status from before it: the reload has begun, and its
	// own load duration tells the two apart.
	select {
	case <-locked:
	case <-time.After(10 * time.Second):
		t.Fatal("no reload after the first failed append")
	}
	if err := reloading.WaitLoaded(ctx); err != nil {
		t.Fatalf("the partition did not serve again after its first failed append: %v", err)
	}
	if st := reloading.Status(); st.State != shard.Active || st.LoadDuration == loaded {
		t.Fatalf("status %+v after the reload, want Active with the reload's load duration", st)
	}
	write()
	// A call made after the second failure is answered only once the shard waits in Loading:
	// either the call finds that status, or the waiting shard answers it from the queue.
	if r := reloading.ReadSummary(ctx, shard.SummaryRequest{Key: key}); r.Code != kafkaerr.CoordinatorLoadInProgress {
		t.Fatalf("a call after a second failed append: %+v, want LOAD_IN_PROGRESS", r)
	}
	if st := reloading.Status().State; st != shard.Loading {
		t.Fatalf("partition state %v, want it loading after a second failed append", st)
	}
	if code, body := get("/readyz?exclude=failed"); code != http.StatusOK || !strings.Contains(body, "partition 0: loading") {
		t.Fatalf("/readyz?exclude=failed while one partition reloads: %d %q, want 200 naming it", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "partition 0: loading") {
		t.Fatalf("/readyz while one partition reloads: %d %q, want 503 naming it", code, body)
	}
}

// TestNotReadyWhileNoPartitionServes: once every partition of the node has failed (its data
// directory read-only), /readyz?exclude=failed answers 503 and gRPC health turns NOT_SERVING,
// over real sockets; once they recover, both say ready again.
func TestNotReadyWhileNoPartitionServes(t *testing.T) {
	fsys := faultfs.Wrap(faultfs.NewCrashFS(), nil)
	opts := func(p int) shard.Options {
		return shard.Options{Partition: p, RetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond}
	}
	shards := make([]*shard.Shard, 2)
	parts := make([]service.Partition, len(shards))
	for p := range shards {
		shards[p] = shard.Open(zap.NewNop(), oneProvider{}, opts(p), shard.NewLocalLog(nil, datadir.PartitionDir("/data", p), statelog.Options{FS: fsys}))
		parts[p] = shards[p]
	}
	t.Cleanup(func() {
		fsys.SetInjector(nil)
		for _, s := range shards {
			_ = s.Close()
		}
	})
	ctx := context.Background()
	for _, s := range shards {
		if err := s.WaitLoaded(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var ready readiness
	ready.serving.Store(true)
	httpLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpSrv := &http.Server{Handler: newAdminMux(prometheus.NewRegistry(), shards, false, &ready, nil)}
	go func() { _ = httpSrv.Serve(httpLis) }()
	t.Cleanup(func() { _ = httpSrv.Close() })
	grpcLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := service.NewServer(zap.NewNop(), service.NewStateServer(parts, service.StateOptions{}), pb.UnimplementedConfigServiceServer{}, service.ServerOptions{})
	go func() { _ = srv.GRPC.Serve(grpcLis) }()
	t.Cleanup(srv.GRPC.Stop)
	followCtx, stopFollowing := context.WithCancel(ctx)
	following := make(chan struct{})
	go func() { defer close(following); followPartitions(followCtx, shards, srv.SetServing) }()
	t.Cleanup(func() { stopFollowing(); <-following })

	conn, err := grpc.NewClient(grpcLis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	watch, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	nextHealth := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		for {
			r, err := watch.Recv()
			if err != nil {
				t.Fatalf("watch gRPC health: %v", err)
			}
			if r.GetStatus() == want {
				return
			}
		}
	}
	probe := func() (int, string) {
		resp, err := http.Get("http://" + httpLis.Addr().String() + "/readyz?exclude=failed")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	nextHealth(healthpb.HealthCheckResponse_SERVING)
	if code, body := probe(); code != http.StatusOK {
		t.Fatalf("/readyz?exclude=failed with every partition active: %d %q", code, body)
	}

	// The data directory turns read-only: every partition's next append fails, and so does every
	// load after it.
	keys := make([]shard.Key, len(shards))
	for p, s := range shards {
		keys[p] = shard.Key{GroupID: "g" + strconv.Itoa(p), Partition: int32(p)}
		if r := s.Initialize(ctx, shard.InitializeRequest{Key: keys[p], StateEpoch: 1}); r.Code != kafkaerr.None {
			t.Fatal(r)
		}
	}
	fsys.SetInjector(faultfs.InjectorFunc(func(faultfs.Op) error { return syscall.EROFS }))
	for p, s := range shards {
		s.Write(ctx, shard.WriteRequest{Key: keys[p], StateEpoch: 1, StateBatches: []shard.StateBatch{{FirstOffset: 0, LastOffset: 1}}})
	}
	nextHealth(healthpb.HealthCheckResponse_NOT_SERVING)
	if code, body := probe(); code != http.StatusServiceUnavailable || !strings.Contains(body, "no state partition of this node is active") {
		t.Fatalf("/readyz?exclude=failed with no partition active: %d %q, want 503 saying so", code, body)
	}

	fsys.SetInjector(nil) // writable again: the next retried load succeeds
	nextHealth(healthpb.HealthCheckResponse_SERVING)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if code, _ := probe(); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			code, body := probe()
			t.Fatalf("/readyz?exclude=failed after the partitions recovered: %d %q", code, body)
		}
	}
}

// TestDrainCalls: the drain ends when the calls do, at its timeout (logged), or at a second stop
// signal (logged), whichever comes first.
func TestDrainCalls(t *testing.T) {
	untilCancelled := func(ctx context.Context) bool { <-ctx.Done(); return false }
	for _, tc := range []struct {
		name     string
		shutdown func(context.Context) bool
		timeout  time.Duration
		signal   bool
		logged   string
	}{
		{"calls finish", func(context.Context) bool { return true }, time.Minute, false, ""},
		{"timeout", untilCancelled, 50 * time.Millisecond, false, "the drain ended before every call finished"},
		{"second signal", untilCancelled, time.Hour, true, "second stop signal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			again := make(chan os.Signal, 1)
			if tc.signal {
				again <- syscall.SIGTERM
			}
			done := make(chan struct{})
			go func() {
				drainCalls(zap.New(core), tc.shutdown, tc.timeout, again)
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("the drain did not end")
			}
			got := logs.FilterMessageSnippet(tc.logged).Len()
			if tc.logged == "" && logs.Len() != 0 || tc.logged != "" && got == 0 {
				t.Fatalf("log %v, want %q", logs.All(), tc.logged)
			}
		})
	}
}

func TestRunsServer(t *testing.T) {
	for args, want := range map[string]bool{
		"": true, "serve --data-dir d": true, "--data-dir d": true, "--help": true,
		"dump-log d": false, "bench load": false, "check-config --config f": false, "repair-log d": false,
	} {
		if got := runsServer(strings.Fields(args)); got != want {
			t.Errorf("runsServer(%q) = %v, want %v", args, got, want)
		}
	}
}

func TestVersionFlag(t *testing.T) {
	out, stderr, code := runTool(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "coordinatord version ") || !strings.Contains(out, "go1.") {
		t.Fatalf("--version: exit %d, %q %q", code, out, stderr)
	}
}

// TestDescribeBuild: --version reports the best of what the build recorded: the stamped version,
// else the module version, else "(devel)", with the VCS revision, commit time and modified flag
// when the build recorded them.
func TestDescribeBuild(t *testing.T) {
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "-trimpath", Value: "true"}, {Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "563c31f365c71f34e5bfc82686eacd193b3a4ed2"},
			{Key: "vcs.time", Value: "2026-03-01T21:08:18Z"}, {Key: "vcs.modified", Value: modified}}
	}
	info := func(version string, settings []debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/coordinatord/coordinatord", Version: version},
			Settings: settings}
	}
	const rev = "revision 563c31f365c71f34e5bfc82686eacd193b3a4ed2, committed 2026-03-01T21:08:18Z"
	for _, tc := range []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		want    string
	}{
		{"make build", "v1.4.0-3-g563c31f-dirty", info("v0.0.0-20260301210818-563c31f365c7+dirty", vcs("true")),
			"v1.4.0-3-g563c31f-dirty (" + rev + ", modified), go1.26.8"},
		{"go build in a checkout", "", info("v0.0.0-20260301210818-563c31f365c7", vcs("false")),
			"v0.0.0-20260301210818-563c31f365c7 (" + rev + "), go1.26.8"},
		{"VCS information without a module version", "", info("(devel)", vcs("true")),
			"(devel) (" + rev + ", modified), go1.26.8"},
		{"go install module@version", "", info("v1.4.0", nil), "v1.4.0, go1.26.8"},
		{"go run", "", info("(devel)", []debug.BuildSetting{{Key: "-buildmode", Value: "exe"}}), "(devel), go1.26.8"},
		{"no build information", "", nil, "(devel)"},
		{"stamped, no build information", "v1.4.0", nil, "v1.4.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := describeBuild(tc.stamped, tc.bi); got != tc.want {
				t.Fatalf("describeBuild = %q, want %q", got, tc.want)
			}
		})
	}
}
