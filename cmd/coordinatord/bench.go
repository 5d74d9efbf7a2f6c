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
	var profileFile *os.File
	cmd.PersistentFlags().StringVar(&profile, "cpuprofile", "", "write a CPU profile of this process to FILE (go tool pprof)")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		if profile == "" {
			return nil
		}
		f, err := os.Create(profile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		profileFile = f
		return pprof.StartCPUProfile(f)
	}
	cmd.PersistentPostRunE = func(*cobra.Command, []string) error {
		if profileFile == nil {
			return nil
		}
		pprof.StopCPUProfile()
		return profileFile.Close()
	}
	cmd.AddCommand(
		newBenchTradeoffCommand(e),
		newBenchLoadCommand(e),
		newBenchFsyncCommand(e),
		newBenchRestartCommand(e),
	)
	return cmd
}
