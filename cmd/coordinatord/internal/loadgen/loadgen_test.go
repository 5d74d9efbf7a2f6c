package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/latency"
	"github.com/coordinatord/coordinatord/internal/datadir"
	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/service"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startServer runs a real coordinatord server (real shards on t.TempDir(), real config store) on
// 127.0.0.1 and returns its address; serving reports whether health turns SERVING, and wrap (if
// set) replaces the partitions the state service routes to.
func startServer(t *testing.T, serving bool, wrap func([]service.Partition) []service.Partition) string {
	t.Helper()
	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	static, err := groupcfg.LoadStatic(groupcfg.Sources{Overrides: []string{"share.coordinator.state.topic.num.partitions=3"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	cfg, err := groupcfg.Open(logger, datadir.ConfigStore(dir), static, reg, groupcfg.Options{NodeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Broker()
	shards := make([]*shard.Shard, b.NumPartitions())
	parts := make([]service.Partition, len(shards))
	for p := range shards {
		shards[p] = shard.Open(logger, cfg, shard.Options{Partition: p, AppendLingerMs: -1}, shard.NewLocalLog(logger, datadir.PartitionDir(dir, p), statelog.Options{}))
		parts[p] = shards[p]
	}
	if wrap != nil {
		parts = wrap(parts)
	}
	state := service.NewStateServer(parts, service.StateOptions{NodeID: 1, Host: "127.0.0.1", Port: 1})
	srv := service.NewServer(logger, state, service.NewConfigServer(cfg, service.ConfigOptions{}), service.ServerOptions{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.GRPC.Serve(lis) }()
	for _, s := range shards {
		if err := s.WaitLoaded(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	srv.SetServing(serving)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
		for _, s := range shards {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		}
		if err := cfg.Close(); err != nil {
			t.Error(err)
		}
	})
	return lis.Addr().String()
}

func validConfig() Config {
	return Config{Target: "127.0.0.1:1", Connections: 1, Concurrency: 1, Keys: 1, BatchesPerWrite: 1,
		Duration: time.Second, GroupID: "g"}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{name: "valid", mutate: func(*Config) {}},
		{name: "no target", mutate: func(c *Config) { c.Target = "" }, wantErr: "target"},
		{name: "no connections", mutate: func(c *Config) { c.Connections = 0 }, wantErr: "connections 0"},
		{name: "no concurrency", mutate: func(c *Config) { c.Concurrency = 0 }, wantErr: "concurrency 0"},
		{name: "no keys", mutate: func(c *Config) { c.Keys = 0 }, wantErr: "keys 0"},
		{name: "keys past int32 partition numbers", mutate: func(c *Config) { c.Keys = 1<<31 + 1 }, wantErr: "keys 2147483649: want 1 to 2147483648"},
		{name: "no batches", mutate: func(c *Config) { c.BatchesPerWrite = 0 }, wantErr: "batches per write 0"},
		{name: "no duration", mutate: func(c *Config) { c.Duration = 0 }, wantErr: "duration 0s"},
		{name: "negative warm-up", mutate: func(c *Config) { c.Warmup = -time.Second }, wantErr: "warm-up -1s"},
		{name: "no group", mutate: func(c *Config) { c.GroupID = "" }, wantErr: "group"},
		{name: "bad topic id", mutate: func(c *Config) { c.TopicID = "nope" }, wantErr: "\"nope\" is not a valid topic id"},
		{name: "unknown phase", mutate: func(c *Config) { c.Phases = []Kind{"read"} }, wantErr: "unknown phase \"read\""},
		{name: "phase twice", mutate: func(c *Config) { c.Phases = []Kind{KindWrite, KindWrite} }, wantErr: "listed twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.mutate(&c)
			err := c.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("want no error, got %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("want an error containing %q, got %v", tc.wantErr, err)
			}
		})
	}
}

func TestRunAgainstServer(t *testing.T) {
	addr := startServer(t, true, nil)
	var progress bytes.Buffer
	cfg := Config{
		Target: addr, Connections: 2, Concurrency: 4, Keys: 7, BatchesPerWrite: 3,
		Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond, GroupID: "g",
		Progress: &progress, ProgressEvery: 50 * time.Millisecond,
	}
	rep := mustRun(t, cfg)
	if len(rep.Phases) != 2 || rep.Phases[0].Kind != KindHealth || rep.Phases[1].Kind != KindWrite {
		t.Fatalf("want the health then the write phase, got %+v", rep.Phases)
	}
	for _, p := range rep.Phases {
		if p.Calls == 0 || p.Errors != 0 || p.Latency.Count != p.Calls || p.Throughput() <= 0 {
			t.Fatalf("phase %s: want error-free calls with latencies, got %+v", p.Kind, p)
		}
		if p.Latency.P50 <= 0 || p.Latency.P999 < p.Latency.P50 {
			t.Fatalf("phase %s: implausible latency %+v", p.Kind, p.Latency)
		}
	}
	q, ok := rep.Ratios()
	if !ok || q.Throughput <= 0 || q.P50 <= 0 {
		t.Fatalf("want ratios, got %+v %v", q, ok)
	}
	if !strings.Contains(progress.String(), "warm-up") || !strings.Contains(progress.String(), "write") {
		t.Fatalf("want progress lines for warm-up and both phases, got:\n%s", progress.String())
	}

	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| health |", "| write |", "| write ÷ health |", "p99.9"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var decoded struct {
		Phases []struct {
			Kind  string `json:"kind"`
			Calls int64  `json:"calls"`
		} `json:"phases"`
		Ratios *Ratios `json:"write_to_health"`
	}
	if err := json.Unmarshal(js.Bytes(), &decoded); err != nil {
		t.Fatal(err)
	}
	if len(decoded.Phases) != 2 || decoded.Phases[1].Calls != rep.Phases[1].Calls || decoded.Ratios == nil {
		t.Fatalf("JSON does not match the report: %s", js.String())
	}
}

// unavailable is a partition whose writes all fail as a shard's do while it reloads.
type unavailable struct{ service.Partition }

func (unavailable) Write(context.Context, shard.WriteRequest) shard.Result {
	return shard.Result{Code: kafkaerr.CoordinatorNotAvailable, Message: "reloading"}
}

func TestRunCountsFailures(t *testing.T) {
	addr := startServer(t, true, func(parts []service.Partition) []service.Partition {
		out := make([]service.Partition, len(parts))
		for i, p := range parts {
			out[i] = unavailable{p}
		}
		return out
	})
	cfg := Config{Target: addr, Connections: 1, Concurrency: 2, Keys: 2, BatchesPerWrite: 1,
		Duration: 200 * time.Millisecond, GroupID: "g", Phases: []Kind{KindWrite}}
	rep := mustRun(t, cfg)
	w := rep.Phases[0]
	if w.Calls == 0 || w.Errors != w.Calls || w.ErrorCauses["COORDINATOR_NOT_AVAILABLE"] != w.Calls || w.Throughput() != 0 {
		t.Fatalf("want every write failed and counted, got %+v", w)
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "write failures: COORDINATOR_NOT_AVAILABLE=") ||
		!strings.Contains(md.String(), "calls/s and the latencies only the successful ones") {
		t.Fatalf("markdown lacks the failure causes or what its columns count:\n%s", md.String())
	}
	// No write succeeded: the row has no latencies, rather than latencies of 0.
	if !strings.Contains(md.String(), "| – | – | – | – | – |") || strings.Contains(md.String(), "0.0µs") {
		t.Fatalf("markdown shows latencies for a phase without a successful call:\n%s", md.String())
	}
}

// TestRunInterrupted: the calls cut by an interruption (SIGINT ends the run's context) are not
// failures of the server, and the report says how much of the window was recorded.
func TestRunInterrupted(t *testing.T) {
	addr := startServer(t, true, nil)
	cfg := Config{Target: addr, Connections: 2, Concurrency: 8, Keys: 4, BatchesPerWrite: 1,
		Duration: time.Minute, GroupID: "g", Phases: []Kind{KindHealth}}
	// Cancelled as SIGINT cancels the command's context (a deadline would fail calls by itself).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(500*time.Millisecond, cancel)
	rep, err := Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want the run stopped by its context, got %v", err)
	}
	h := rep.Phases[0]
	if h.Calls == 0 || h.Errors != 0 || len(h.ErrorCauses) != 0 {
		t.Fatalf("want calls and no failures (the calls cut by the interruption are not the server's), got %+v", h)
	}
	if h.Elapsed <= 0 || h.Elapsed >= cfg.Duration {
		t.Fatalf("recorded window %v, want the part of %v before the interruption", h.Elapsed, cfg.Duration)
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "health was interrupted after ") {
		t.Fatalf("markdown does not say the phase was interrupted:\n%s", md.String())
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(200*time.Millisecond, cancel)
	cfg.Warmup = time.Minute
	rep, _ = Run(ctx, cfg)
	md.Reset()
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "health was interrupted in its warm-up") || strings.Contains(md.String(), "0.0µs") {
		t.Fatalf("markdown of a run interrupted in its warm-up:\n%s", md.String())
	}
}

func TestRunStopsWhenNotServing(t *testing.T) {
	addr := startServer(t, false, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	cfg := validConfig()
	cfg.Target = addr
	if _, err := Run(ctx, cfg); err == nil || !strings.Contains(err.Error(), "serve") {
		t.Fatalf("want a wait-for-serving error, got %v", err)
	}
}

// More callers than histograms: they share them, and every successful call is recorded once.
func TestRunManyCallersShareHistograms(t *testing.T) {
	addr := startServer(t, true, nil)
	cfg := Config{Target: addr, Connections: 2, Concurrency: 3*maxHistograms + 5, Keys: 1, BatchesPerWrite: 1,
		Duration: 300 * time.Millisecond, GroupID: "g", Phases: []Kind{KindHealth}}
	rep := mustRun(t, cfg)
	h := rep.Phases[0]
	if h.Calls == 0 || h.Errors != 0 || h.Latency.Count != h.Calls {
		t.Fatalf("want every counted call's latency recorded once, got %d calls, %d errors, %d latencies", h.Calls, h.Errors, h.Latency.Count)
	}
}

// The ratio row belongs to the table: notes about an interrupted phase come after it.
func TestMarkdownRatioRowEndsTheTable(t *testing.T) {
	lat := latency.Summary{Count: 10, P50: time.Millisecond, P90: time.Millisecond, P99: time.Millisecond, P999: time.Millisecond, Max: time.Millisecond}
	rep := &Report{Config: Config{Duration: time.Second}, Phases: []PhaseResult{
		{Kind: KindHealth, Calls: 10, Elapsed: time.Second, Latency: lat},
		{Kind: KindWrite, Calls: 10, Elapsed: 300 * time.Millisecond, Latency: lat},
	}}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\| write \|.*\n\| write ÷ health \|`).MatchString(md.String()) ||
		!strings.Contains(md.String(), "write was interrupted after 300ms") {
		t.Fatalf("the ratio row does not follow the write row, or the note is missing:\n%s", md.String())
	}
}

// mustRun runs cfg within a minute, failing the test if the run fails.
func mustRun(t *testing.T, cfg Config) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
