package main

import (
	"errors"

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
	cmd.AddCommand(
		newBenchTradeoffCommand(e),
		newBenchLoadCommand(e),
		newBenchFsyncCommand(e),
		newBenchRestartCommand(e),
	)
	return cmd
}
