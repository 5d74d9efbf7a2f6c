package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/diskprobe"
	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/latency"
	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/loadgen"
	"github.com/coordinatord/coordinatord/internal/tlsconfig"
)

// Targets of docs/benchmarks.md that `bench load` checks.
const (
	targetThroughputRatio = 0.85 // write ÷ health calls per second at 64 in flight, at least
	targetP50Factor       = 1.2  // write p50 ≤ factor × (health p50 + fdatasync p50) at 1 in flight
	// targetPeerFactor: durable writes/s at 64 in flight ≥ this × the peer's (etcd's) puts/s, and
	// write p50 at 1 in flight ≤ the peer's p50 (docs/benchmarks.md, sections 8 and 9).
	targetPeerFactor = 2.0
)

// loadFlags are the flags of `bench load`.
type loadFlags struct {
	cfg          loadgen.Config
	phases       []string
	output       string
	quiet        bool
	fsyncDir     string
	fsyncSamples int
	// peerRate and peerP50 are etcd's puts/s at the same in-flight count and p50, measured in
	// the same session with the same client shape (bench-peer prints them): when set, the
	// write phase is judged against them.
	peerRate float64
	peerP50  time.Duration
	tls      clientTLS
}

func (f *loadFlags) config() (loadgen.Config, error) {
	cfg := f.cfg
	cfg.Phases = nil
	var errs []error
	for _, p := range f.phases {
		k, err := loadgen.ParseKind(strings.TrimSpace(p))
		if err != nil {
			errs = append(errs, fmt.Errorf("--phases: %w", err))
			continue
		}
		cfg.Phases = append(cfg.Phases, k)
	}
	if len(f.phases) == 0 {
		errs = append(errs, errors.New("--phases: want at least one of health, write"))
	}
	if f.output != "markdown" && f.output != "json" {
		errs = append(errs, fmt.Errorf("--output %q: want markdown or json", f.output))
	}
	if f.fsyncDir != "" {
		if f.fsyncSamples < 1 {
			errs = append(errs, fmt.Errorf("--fsync-samples %d: want at least 1", f.fsyncSamples))
		}
		if err := probeDirUsable(f.fsyncDir); err != nil {
			errs = append(errs, fmt.Errorf("--fsync-dir: %w", err))
		}
	}
	opts, err := f.tls.dialOptions()
	if err != nil {
		errs = append(errs, err)
	}
	cfg.DialOptions = opts
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	return cfg, errors.Join(errs...)
}

// checksP50 tells whether the run's report checks the write-latency target (and so measures
// fdatasync in --fsync-dir): Markdown output and both phases.
func (f *loadFlags) checksP50() bool {
	phases := strings.Join(f.phases, ",")
	return f.output == "markdown" && strings.Contains(phases, string(loadgen.KindHealth)) && strings.Contains(phases, string(loadgen.KindWrite))
}

// probeDirUsable refuses, before a run, a --fsync-dir that the fdatasync probe would refuse after
// it: one that is not a directory, or is missing with no directory to create it in.
func probeDirUsable(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		st, err = os.Stat(filepath.Dir(dir))
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

func newBenchLoadCommand(e env) *cobra.Command {
	f := &loadFlags{}
	cmd := &cobra.Command{
		Use:   "load",
		Short: "End-to-end gRPC load against a running server: durable writes vs the health-check baseline",
		Long: "load keeps --concurrency calls in flight over --connections connections against --target, first\n" +
			"grpc.health.v1.Health/Check (the baseline: no durable work), then WriteShareGroupState on --keys\n" +
			"share partitions of --group (initialized first), each phase --warmup unrecorded then --duration\n" +
			"recorded. It prints throughput, p50/p90/p99/p99.9 latency and errors per phase and their ratios.\n" +
			"With --fsync-dir (the server's data directory, same machine) the Markdown report of a run with\n" +
			"both phases also gives --fsync-samples fdatasync latencies there and checks the write-latency\n" +
			"target: write p50 <= 1.2 x (health p50 + fdatasync p50). With --peer-writes-per-sec and --peer-p50,\n" +
			"etcd's figures of the same session and client shape (bench-peer prints them), the write phase is\n" +
			"judged against the write-path targets instead: writes/s >= 2 x etcd's puts/s at 64 in flight, and\n" +
			"write p50 <= etcd's at 1 in flight.\n\n" +
			"A server with tls.enabled=true needs --tls (or any --tls-* flag): --tls-ca-file when its\n" +
			"certificate is not signed by a CA of this system, --tls-cert-file and --tls-key-file when it\n" +
			"requires client certificates (tls.client.auth=required).\n\n" +
			"The exit status is 1 when a recorded call failed (the report shows the causes): such figures\n" +
			"do not describe a working server. A missed target does not change the exit status.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config()
			if err != nil {
				return badConfig(err)
			}
			if f.fsyncDir != "" && !f.checksP50() {
				fmt.Fprintln(e.stderr, "note: --fsync-dir is not measured: the fdatasync check is part of the Markdown report of a run with both phases (--output markdown, --phases health,write)")
			}
			if !f.quiet {
				cfg.Progress = e.stderr
			}
			rep, err := loadgen.Run(cmd.Context(), cfg)
			if status.Code(err) == codes.Unavailable && cfg.DialOptions == nil {
				err = fmt.Errorf("%w (a server with tls.enabled=true needs --tls)", err)
			}
			if rep != nil && len(rep.Phases) > 0 {
				if werr := writeLoadReport(e, f, rep); werr != nil && err == nil {
					err = werr
				}
			}
			if err != nil {
				return err
			}
			if err := failedCalls(rep); err != nil {
				return err
			}
			return checkLoadTargets(cmd.Context(), e, f, rep)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.cfg.Target, "target", "127.0.0.1:7070", "host:port of the server's gRPC listener")
	fs.IntVar(&f.cfg.Concurrency, "concurrency", 64, "calls in flight")
	fs.IntVar(&f.cfg.Connections, "connections", 4, "client connections (calls are spread over them)")
	fs.BoolVar(&f.cfg.Cluster, "cluster", false, "a cluster: send each write to its state partition's leader, found through --target (the client package)")
	fs.IntVar(&f.cfg.Keys, "keys", 1000, "share partitions written, round-robin")
	fs.IntVar(&f.cfg.BatchesPerWrite, "batches-per-write", 2, "state batches in each write")
	fs.DurationVar(&f.cfg.Duration, "duration", 20*time.Second, "recorded time per phase")
	fs.DurationVar(&f.cfg.Warmup, "warmup", 5*time.Second, "unrecorded time before each phase's recording")
	fs.StringVar(&f.cfg.GroupID, "group", "bench-load", "share group of the written share partitions")
	fs.StringVar(&f.cfg.TopicID, "topic-id", loadgen.DefaultTopicID, "topic id of the written share partitions")
	fs.StringSliceVar(&f.phases, "phases", []string{"health", "write"}, "phases to run, in order: health, write")
	fs.DurationVar(&f.cfg.ProgressEvery, "progress-every", time.Second, "interval of the progress lines on stderr")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress lines")
	fs.StringVar(&f.output, "output", "markdown", "report format: markdown or json")
	fs.StringVar(&f.fsyncDir, "fsync-dir", "", "also measure fdatasync in this directory (the server's --data-dir) and check the p50 target (Markdown output, both phases)")
	fs.IntVar(&f.fsyncSamples, "fsync-samples", 2000, "fdatasync samples for --fsync-dir")
	fs.Float64Var(&f.peerRate, "peer-writes-per-sec", 0, "etcd's puts/s at the same --concurrency, measured in the same session (bench-peer): judge the write phase against 2 x it")
	fs.DurationVar(&f.peerP50, "peer-p50", 0, "etcd's put p50 at the same --concurrency, measured in the same session (bench-peer): judge the write p50 against it")
	f.tls.register(fs, "--target")
	return cmd
}

// failedCalls is the error of a run in which recorded calls failed, nil when none did.
func failedCalls(rep *loadgen.Report) error {
	var calls, failed int64
	for _, p := range rep.Phases {
		calls += p.Calls
		failed += p.Errors
	}
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d recorded calls failed (causes above): the figures do not describe a working server", failed, calls)
}

// clientTLS are the TLS flags of the commands that call a server (`bench load`, `cluster`).
type clientTLS struct {
	enabled                               bool
	caFile, certFile, keyFile, serverName string
}

// register adds the TLS flags to fs; target names the flag of the server's address.
func (t *clientTLS) register(fs *pflag.FlagSet, target string) {
	fs.BoolVar(&t.enabled, "tls", false, "connect with TLS (implied by every other --tls-* flag)")
	fs.StringVar(&t.caFile, "tls-ca-file", "", "PEM file of the CA certificates that verify the server's certificate (default: the system's)")
	fs.StringVar(&t.certFile, "tls-cert-file", "", "PEM file of the client certificate, for a server that requires one (with --tls-key-file)")
	fs.StringVar(&t.keyFile, "tls-key-file", "", "PEM file of the client certificate's private key")
	fs.StringVar(&t.serverName, "tls-server-name", "", "name the server's certificate must carry (default: the host of "+target+")")
}

// dialOptions returns the client's transport credentials: nil (plaintext) unless a TLS flag is
// set.
func (t clientTLS) dialOptions() ([]grpc.DialOption, error) {
	if !t.enabled && t.caFile == "" && t.certFile == "" && t.keyFile == "" && t.serverName == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.serverName}
	var errs []error
	if t.caFile != "" {
		pool, err := tlsconfig.ReadCertPool(t.caFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--tls-ca-file %s: %w", t.caFile, err))
		}
		cfg.RootCAs = pool
	}
	switch {
	case (t.certFile == "") != (t.keyFile == ""):
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file: give both or neither"))
	case t.certFile != "":
		cert, err := tls.LoadX509KeyPair(t.certFile, t.keyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--tls-cert-file, --tls-key-file: %w", err))
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}, nil
}

func writeLoadReport(e env, f *loadFlags, rep *loadgen.Report) error {
	if f.output == "json" {
		return rep.WriteJSON(e.stdout)
	}
	return rep.WriteMarkdown(e.stdout)
}

// checkLoadTargets prints how the run compares with the targets that apply to its shape. It only
// informs: the exit status says whether the run worked, not whether a target was met.
func checkLoadTargets(ctx context.Context, e env, f *loadFlags, rep *loadgen.Report) error {
	if f.output == "json" {
		return nil
	}
	if f.peerRate > 0 || f.peerP50 > 0 {
		checkPeerTargets(e, f, rep)
		return nil
	}
	q, ok := rep.Ratios()
	if !ok {
		return nil
	}
	throughput := "met"
	if q.Throughput < targetThroughputRatio {
		throughput = "missed"
	}
	fmt.Fprintf(e.stdout, "\nthroughput write ÷ health = %.3f at %d in flight, target >= %.2f: %s (the target applies at 64 in flight)\n",
		q.Throughput, rep.Config.Concurrency, targetThroughputRatio, throughput)
	if f.fsyncDir == "" {
		return nil
	}
	res, err := diskprobe.SyncLatency(ctx, f.fsyncDir, diskprobe.SyncProbe{Samples: f.fsyncSamples, Bytes: fsyncProbeBytes})
	if err != nil {
		return err
	}
	w, _ := rep.Phase(loadgen.KindWrite)
	h, _ := rep.Phase(loadgen.KindHealth)
	bound := time.Duration(targetP50Factor * float64(h.Latency.P50+res.Sync.P50))
	verdict := "met"
	if w.Latency.P50 > bound {
		verdict = "missed"
	}
	warnCreated(e, res)
	fmt.Fprintf(e.stdout, "fdatasync p50 on %s = %s (%d samples)\n", f.fsyncDir, latency.Format(res.Sync.P50), res.Samples)
	fmt.Fprintf(e.stdout, "write p50 %s vs %.1f x (health p50 %s + fdatasync p50 %s) = %s at %d in flight: %s (the target applies at 1 in flight)\n",
		latency.Format(w.Latency.P50), targetP50Factor, latency.Format(h.Latency.P50), latency.Format(res.Sync.P50),
		latency.Format(bound), rep.Config.Concurrency, verdict)
	return nil
}

// checkPeerTargets prints the write phase against the write-path targets, relative to etcd's
// figures of the same session: durable writes/s ≥ 2 × etcd's puts/s (at 64 in flight), and write
// p50 ≤ etcd's (at 1 in flight).
func checkPeerTargets(e env, f *loadFlags, rep *loadgen.Report) {
	w, ok := rep.Phase(loadgen.KindWrite)
	if !ok {
		return
	}
	verdict := func(met bool) string {
		if met {
			return "met"
		}
		return "missed"
	}
	if f.peerRate > 0 {
		ratio := w.Throughput() / f.peerRate
		fmt.Fprintf(e.stdout, "\ndurable writes %.0f/s vs etcd %.0f/s = %.3f x at %d in flight, target >= %.1f x: %s (the target applies at 64 in flight)\n",
			w.Throughput(), f.peerRate, ratio, rep.Config.Concurrency, targetPeerFactor, verdict(ratio >= targetPeerFactor))
	}
	if f.peerP50 > 0 {
		fmt.Fprintf(e.stdout, "write p50 %s vs etcd p50 %s = %.3f x at %d in flight, target <= 1 x: %s (the target applies at 1 in flight)\n",
			latency.Format(w.Latency.P50), latency.Format(f.peerP50), float64(w.Latency.P50)/float64(f.peerP50), rep.Config.Concurrency,
			verdict(w.Latency.P50 <= f.peerP50))
	}
}
