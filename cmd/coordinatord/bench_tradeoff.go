package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/tradeoff"
)

// Output files of `bench snapshot-tradeoff`, written into --out.
const (
	tradeoffCSV      = "snapshot-tradeoff.csv"
	tradeoffMarkdown = "snapshot-tradeoff.md"
)

// tradeoffFlags are the flags of `bench snapshot-tradeoff`.
type tradeoffFlags struct {
	cfg       tradeoff.Config
	cold      string
	segment   string
	out       string
	maxReplay time.Duration
	maxGrowth string
	sloRate   float64
	logLevel  string
	quiet     bool
	fromCSV   string
}

// config resolves the flags into a study configuration and its SLO.
func (f *tradeoffFlags) config() (tradeoff.Config, tradeoff.SLO, error) {
	cfg := f.cfg
	var errs []error
	switch f.cold {
	case "both":
		cfg.Cold = []bool{false, true}
	case "off":
		cfg.Cold = []bool{false}
	case "on":
		cfg.Cold = []bool{true}
	default:
		errs = append(errs, fmt.Errorf("--cold-snapshots %q: want off, on or both", f.cold))
	}
	seg, err := parseBytes(f.segment)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("--segment-bytes: %w", err))
	case seg >= math.MaxInt64:
		errs = append(errs, fmt.Errorf("--segment-bytes %s: want at most %d bytes", f.segment, int64(math.MaxInt64)))
	default:
		cfg.SegmentBytes = int64(seg)
	}
	slo := tradeoff.SLO{MaxReplaySeconds: f.maxReplay.Seconds(), WriteRate: f.sloRate}
	if !(f.sloRate >= 0) || math.IsInf(f.sloRate, 1) {
		errs = append(errs, fmt.Errorf("--slo-write-rate %v: want 0 or more", f.sloRate))
	}
	if f.maxReplay < 0 {
		errs = append(errs, fmt.Errorf("--max-replay %v: want 0 (not checked) or more", f.maxReplay))
	}
	if f.maxGrowth != "" {
		g, err := parseBytes(strings.TrimSuffix(f.maxGrowth, "/s"))
		if err != nil {
			errs = append(errs, fmt.Errorf("--max-log-growth: %w", err))
		}
		slo.MaxGrowthPerSecond = g
		if f.sloRate == 0 && cfg.Rate == 0 {
			errs = append(errs, errors.New("--max-log-growth needs --slo-write-rate (or a paced study, --rate): "+
				"unpaced, a run's growth per second is however fast this machine happened to write"))
		}
	}
	if f.out == "" {
		errs = append(errs, errors.New("--out: want a directory for the CSV, Markdown and PNG files"))
	}
	if f.fromCSV != "" {
		cfg.AllowOutOfRange = true // the limits are the file's, whatever --limits says
	}
	check := cfg
	if check.DataDir == "" {
		check.DataDir = os.TempDir() // runTradeoff makes a temporary directory there
	}
	if err := check.Validate(); err != nil {
		errs = append(errs, err)
	}
	return cfg, slo, errors.Join(errs...)
}

func newBenchTradeoffCommand(e env) *cobra.Command {
	f := &tradeoffFlags{}
	cmd := &cobra.Command{
		Use:   "snapshot-tradeoff",
		Short: "Measure replay time, log growth and pruning lag against the snapshot limit",
		Long: "snapshot-tradeoff runs a real shard on a real disk, in this process, once per snapshot limit\n" +
			"(share.snapshot.update.records.per.snapshot) and cold-partition snapshot mode, under the workload\n" +
			"the flags describe. Per run it measures log growth (bytes per second and per write), write\n" +
			"amplification (snapshot bytes / update bytes), the failover replay time of the pruned log\n" +
			"(reopen until ACTIVE) and the pruning lag (a record superseded -> its segment deletable). It writes\n" +
			"a CSV file, a Markdown table and PNG plots into --out and, given --max-replay and/or\n" +
			"--max-log-growth, prints the largest limit meeting them. Limits outside the validator's range\n" +
			"[200, 1000] need --allow-out-of-range-limits. docs/snapshot-tuning.md explains the method.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, slo, err := f.config()
			if err != nil {
				return badConfig(err)
			}
			if f.fromCSV != "" {
				return reportTradeoff(e, f, cfg, slo)
			}
			return runTradeoff(cmd, e, f, cfg, slo)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&f.cfg.Shape.SharePartitions, "share-partitions", 100, "share partitions written round-robin (one group)")
	fs.IntVar(&f.cfg.IdleSharePartitions, "idle-share-partitions", 0, "extra share partitions written once and then idle")
	fs.IntVar(&f.cfg.Shape.StateBatches, "state-batches", 50, "state batches each share partition holds (sets the snapshot size)")
	fs.IntVar(&f.cfg.Shape.BatchesPerWrite, "batches-per-write", 2, "state batches per write (sets the update size)")
	fs.StringVar(&f.cfg.Shape.GroupID, "group", "bench-tradeoff", "share group of the written share partitions")
	fs.IntSliceVar(&f.cfg.Limits, "limits", tradeoff.DefaultLimits, "snapshot limits to study")
	fs.BoolVar(&f.cfg.AllowOutOfRange, "allow-out-of-range-limits", false, "allow limits outside the validator's range [200, 1000]")
	fs.StringVar(&f.cold, "cold-snapshots", "both", "cold-partition snapshot modes to run: off, on or both")
	fs.DurationVar(&f.cfg.ColdInterval, "cold-interval", 5*time.Second, "cold-partition snapshot interval when on (share.coordinator.cold.partition.snapshot.interval.ms)")
	fs.IntVar(&f.cfg.Concurrency, "concurrency", 64, "writes in flight")
	fs.Float64Var(&f.cfg.Rate, "rate", 0, "measured writes per second (0: as fast as possible)")
	fs.Int64Var(&f.cfg.Writes, "writes", 0, "measured writes per run (0 and no --duration: one snapshot cycle, share partitions x (limit+1))")
	fs.DurationVar(&f.cfg.Duration, "duration", 0, "measured time per run, instead of --writes")
	fs.StringVar(&f.cfg.DataDir, "data-dir", "", "directory for the runs' logs, on the disk to measure (default: a temporary directory)")
	fs.BoolVar(&f.cfg.Keep, "keep", false, "keep each run's log directory")
	fs.StringVar(&f.segment, "segment-bytes", "8MiB", "segment size of the logs (share.coordinator.state.topic.segment.bytes)")
	fs.BoolVar(&f.cfg.DropCaches, "drop-caches", false, "drop the page cache before each replay so it reads the disk (Linux, root)")
	fs.StringVar(&f.out, "out", "snapshot-tradeoff", "directory for the CSV, Markdown and PNG outputs")
	fs.DurationVar(&f.maxReplay, "max-replay", 0, "SLO: longest acceptable failover replay time (0: not checked)")
	fs.StringVar(&f.maxGrowth, "max-log-growth", "", "SLO: largest acceptable log growth per second, e.g. 4MiB (empty: not checked)")
	fs.Float64Var(&f.sloRate, "slo-write-rate", 0, "write rate (writes/s) at which --max-log-growth is judged: bytes per write x this rate (0: the growth each run measured, meaningful with --rate)")
	fs.StringVar(&f.logLevel, "log-level", "warn", "log level of the shards: debug, info, warn or error")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress lines")
	fs.StringVar(&f.fromCSV, "from-csv", "", "report a study measured before (its "+tradeoffCSV+") with these SLOs instead of running one; give the study's workload flags for the plot titles")
	return cmd
}

// reportTradeoff writes the outputs and the verdict of a study read back from its CSV file.
func reportTradeoff(e env, f *tradeoffFlags, cfg tradeoff.Config, slo tradeoff.SLO) error {
	fh, err := os.Open(f.fromCSV)
	if err != nil {
		return badConfig(fmt.Errorf("--from-csv: %w", err))
	}
	rows, err := tradeoff.ReadCSV(fh)
	_ = fh.Close()
	if err != nil {
		return badConfig(fmt.Errorf("--from-csv %s: %w", f.fromCSV, err))
	}
	return writeTradeoffReport(e, f, cfg, slo, rows)
}

func runTradeoff(cmd *cobra.Command, e env, f *tradeoffFlags, cfg tradeoff.Config, slo tradeoff.SLO) error {
	logger, err := newLogger(e.stderr, f.logLevel)
	if err != nil {
		return badConfig(err)
	}
	if cfg.DataDir == "" {
		tmp, err := os.MkdirTemp("", "coordinatord-tradeoff-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		cfg.DataDir = tmp
	}
	if !f.quiet {
		cfg.Progress = e.stderr
	}
	rows, runErr := tradeoff.Run(cmd.Context(), logger, cfg)
	if len(rows) == 0 {
		return runErr
	}
	if err := writeTradeoffReport(e, f, cfg, slo, rows); err != nil {
		return err
	}
	return runErr
}

// writeTradeoffReport writes the CSV, Markdown and PNG outputs into --out and prints the tables
// and the verdict.
func writeTradeoffReport(e env, f *tradeoffFlags, cfg tradeoff.Config, slo tradeoff.SLO, rows []tradeoff.Row) error {
	subtitle := cfg.Shape.String()
	if err := writeTradeoffOutputs(f.out, rows, slo, cfg.Rate, subtitle); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "workload: %s; %d writes in flight; segment %s; cold interval %v\n\n",
		subtitle, cfg.Concurrency, tradeoff.Bytes(float64(cfg.SegmentBytes)), cfg.ColdInterval)
	if err := tradeoff.WriteMarkdown(e.stdout, rows); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout)
	if err := slo.WriteVerdict(e.stdout, rows); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nwrote %s, %s, %s, %s and %s in %s\n", tradeoffCSV, tradeoffMarkdown,
		tradeoff.ReplayPlot, tradeoff.GrowthPlot, tradeoff.LagPlot, f.out)
	return nil
}

func writeTradeoffOutputs(dir string, rows []tradeoff.Row, slo tradeoff.SLO, rate float64, subtitle string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func(name string, fn func(*os.File) error) error {
		fh, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		err = fn(fh)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if err := write(tradeoffCSV, func(fh *os.File) error { return tradeoff.WriteCSV(fh, rows) }); err != nil {
		return err
	}
	if err := write(tradeoffMarkdown, func(fh *os.File) error {
		if err := tradeoff.WriteMarkdown(fh, rows); err != nil {
			return err
		}
		fmt.Fprintln(fh)
		return slo.WriteVerdict(fh, rows)
	}); err != nil {
		return err
	}
	return tradeoff.WritePlots(dir, rows, slo, rate, subtitle)
}

// parseBytes parses a byte count: a number with an optional unit B, KiB, MiB, GiB (powers of
// 1024) or KB, MB, GB (powers of 1000).
func parseBytes(s string) (float64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v >= 0) || math.IsInf(v, 1) {
		return 0, fmt.Errorf("%q is not a byte count: want a number with an optional unit B, KiB, MiB, GiB, KB, MB or GB", s)
	}
	return v * mult, nil
}
