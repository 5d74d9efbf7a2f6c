package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// newBenchCommand groups the benchmarks (docs/benchmarks.md, docs/snapshot-tuning.md).
func newBenchCommand(e env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmarks: snapshot-limit trade-off, gRPC load, restart time and disk floors",
		Long: "bench runs coordinatord's benchmarks. Each subcommand prints what it measured and the exact\n" +
			"configuration it ran with; docs/benchmarks.md and docs/snapshot-tuning.md explain the method\n" +
			"and record results.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmd.Help(); err != nil {
				return err
			}
			return usageError{errors.New("bench needs a subcommand: snapshot-tradeoff, load, fsync or restart")}
		},
	}
	// --cpuprofile profiles the benchmark process itself: the in-process shards of
	// snapshot-tradeoff and restart, or the load generator of load (the server is profiled on its
	// own side).
	var profile string
	cmd.PersistentFlags().StringVar(&profile, "cpuprofile", "", "write a CPU profile of this process to FILE (go tool pprof)")
	cmd.AddCommand(
		newBenchTradeoffCommand(e),
		newBenchLoadCommand(e),
		newBenchFsyncCommand(e),
		newBenchRestartCommand(e),
	)
	for _, sub := range cmd.Commands() {
		sub.RunE = withCPUProfile(&profile, sub.RunE)
	}
	return cmd
}

// withCPUProfile runs runE under a CPU profile written to *path (no profile when it is empty). The
// profile is written whether runE succeeds, fails or is interrupted: a PersistentPostRunE would
// not run after a failure.
func withCPUProfile(path *string, runE func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, a []string) (err error) {
		if *path == "" {
			return runE(cmd, a)
		}
		f, err := os.Create(*path)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if cerr := f.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("--cpuprofile: %w", cerr)
			}
		}()
		return runE(cmd, a)
	}
}
