package main

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/spf13/cobra"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/latency"
	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/restart"
	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/tradeoff"
)

// targetRestartRatio is the restart target: restart time ≤ ratio × (bytes ÷ sequential read bandwidth).
const targetRestartRatio = 1.5

// restartFlags are the flags of `bench restart`.
type restartFlags struct {
	spec        restart.Spec
	bytes       string
	dataDir     string
	regenerate  bool
	concurrency int
	runs        int
	dropCaches  bool
	logLevel    string
}

func (f *restartFlags) validate() (restart.Spec, error) {
	spec := f.spec
	var errs []error
	n, err := parseBytes(f.bytes)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("--bytes: %w", err))
		n = 1 << 20 // one error for the flag, not a second one from spec.Validate
	case n >= math.MaxInt64:
		errs = append(errs, fmt.Errorf("--bytes %s: want at most %d", f.bytes, int64(math.MaxInt64)))
		n = 1 << 20
	}
	spec.Bytes = int64(n)
	if f.dataDir == "" {
		errs = append(errs, errors.New("--data-dir: want a directory on the disk to measure (it is emptied when generating)"))
	}
	if f.concurrency < 1 {
		errs = append(errs, fmt.Errorf("--concurrency %d: want at least 1", f.concurrency))
	}
	if f.runs < 1 {
		errs = append(errs, fmt.Errorf("--runs %d: want at least 1", f.runs))
	}
	if err := spec.Validate(); err != nil {
		errs = append(errs, err)
	}
	return spec, errors.Join(errs...)
}

func newBenchRestartCommand(e env) *cobra.Command {
	f := &restartFlags{}
	cmd := &cobra.Command{
		Use:   "restart",
		Short: "Time a restart (every partition replayed until ACTIVE) against the disk's sequential read time",
		Long: "restart generates, once, a data directory of --partitions state partitions holding --bytes of\n" +
			"logs in total (real shards with the server's defaults, a deterministic workload; regenerated\n" +
			"when the parameters change or with --regenerate), then --runs times: reads every segment file\n" +
			"sequentially (the floor: bytes / sequential read bandwidth) and restarts all partitions as the\n" +
			"server does, timing until every one is ACTIVE. --drop-caches (Linux, root) drops the page cache\n" +
			"before each read and each restart so that both read the disk.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := f.validate()
			if err != nil {
				return badConfig(err)
			}
			logger, err := newLogger(e.stderr, f.logLevel)
			if err != nil {
				return badConfig(err)
			}
			if f.regenerate || !restart.Generated(f.dataDir, spec) {
				fmt.Fprintf(e.stderr, "generating %s of logs in %s\n", tradeoff.Bytes(float64(spec.Bytes)), f.dataDir)
				if _, err := restart.Generate(cmd.Context(), logger, f.dataDir, spec, f.concurrency, e.stderr); err != nil {
					return fmt.Errorf("generate: %w", err)
				}
			}
			var results []restart.Result
			for i := 0; i < f.runs; i++ {
				res, err := restart.Measure(cmd.Context(), logger, f.dataDir, spec, f.dropCaches)
				if err != nil {
					return err
				}
				results = append(results, res)
			}
			printRestart(e, spec, results)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.dataDir, "data-dir", "", "directory for the generated logs: new, empty or generated before (emptied when generating)")
	fs.IntVar(&f.spec.Partitions, "partitions", 50, "state partitions (share.coordinator.state.topic.num.partitions)")
	fs.StringVar(&f.bytes, "bytes", "1GiB", "total log bytes to generate")
	fs.IntVar(&f.spec.Limit, "limit", 500, "snapshot limit while generating")
	fs.StringVar(&f.spec.Shape.GroupID, "group", "bench-restart", "share group of the generated share partitions")
	fs.IntVar(&f.spec.Shape.SharePartitions, "share-partitions", 20000, "share partitions written round-robin")
	fs.IntVar(&f.spec.Shape.StateBatches, "state-batches", 50, "state batches each share partition holds")
	fs.IntVar(&f.spec.Shape.BatchesPerWrite, "batches-per-write", 2, "state batches per write")
	fs.BoolVar(&f.regenerate, "regenerate", false, "generate the logs even if the directory already holds them")
	fs.IntVar(&f.concurrency, "concurrency", 256, "writes in flight while generating")
	fs.IntVar(&f.runs, "runs", 3, "measurements")
	fs.BoolVar(&f.dropCaches, "drop-caches", false, "drop the page cache before each read and restart (Linux, root)")
	fs.StringVar(&f.logLevel, "log-level", "warn", "log level of the shards: debug, info, warn or error")
	return cmd
}

func printRestart(e env, spec restart.Spec, results []restart.Result) {
	r0 := results[0]
	fmt.Fprintf(e.stdout, "%d state partitions, %d segment files, %s; %d share partitions (%s); GOMAXPROCS %d; page cache dropped: %v\n\n",
		r0.Partitions, r0.Files, tradeoff.Bytes(float64(r0.Bytes)), r0.Keys, spec.Shape, r0.Procs, r0.ColdCache)
	fmt.Fprintln(e.stdout, "| run | sequential read | read bandwidth | restart (all ACTIVE) | restart ÷ read |")
	fmt.Fprintln(e.stdout, "|---:|---:|---:|---:|---:|")
	ratios := make([]float64, len(results))
	for i, r := range results {
		ratios[i] = r.Ratio()
		fmt.Fprintf(e.stdout, "| %d | %s | %s/s | %s | %.2f |\n", i+1, latency.Format(r.Read),
			tradeoff.Bytes(r.ReadBandwidth()), latency.Format(r.Restart), r.Ratio())
	}
	slices.Sort(ratios)
	fmt.Fprintf(e.stdout, "\nmedian restart ÷ read = %.2f (min %.2f, max %.2f; target <= %.1f)\n",
		median(ratios), ratios[0], ratios[len(ratios)-1], targetRestartRatio)
}

// median of sorted values (the mean of the middle two of an even count); at least one value.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
