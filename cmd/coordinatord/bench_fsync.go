package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/diskprobe"
	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/latency"
)

// fsyncProbeBytes is what each probe appends before its fdatasync, about one write's frame: the
// default of `bench fsync --bytes` and the size `bench load --fsync-dir` uses.
const fsyncProbeBytes = 256

// maxProbeSamples bounds `bench fsync --samples`: at ~100 µs a sample, about 3 hours.
const maxProbeSamples = 100_000_000

// maxProbeFiles bounds `bench fsync --files` (the largest state.topic.num.partitions is 1000).
const maxProbeFiles = 1000

// fsyncFlags are the flags of `bench fsync`.
type fsyncFlags struct {
	dir   string
	probe diskprobe.SyncProbe
}

func (f *fsyncFlags) validate() error {
	var errs []error
	if f.dir == "" {
		errs = append(errs, errors.New("--dir: want the directory whose disk to measure (the server's --data-dir)"))
	}
	p := f.probe
	if p.Samples < 1 || p.Samples > maxProbeSamples {
		errs = append(errs, fmt.Errorf("--samples %d: want 1 to %d", p.Samples, maxProbeSamples))
	}
	if p.Bytes < 1 || p.Bytes > 64<<20 {
		errs = append(errs, fmt.Errorf("--bytes %d: want 1 to %d", p.Bytes, 64<<20))
	}
	if p.Idle < 0 || p.Idle > time.Second {
		errs = append(errs, fmt.Errorf("--idle %v: want 0 to 1s", p.Idle))
	}
	if p.Files < 1 || p.Files > maxProbeFiles {
		errs = append(errs, fmt.Errorf("--files %d: want 1 to %d", p.Files, maxProbeFiles))
	}
	if p.Preallocate && int64(p.Bytes)*int64((p.Samples+p.Files-1)/max(p.Files, 1)) > 1<<30 {
		errs = append(errs, fmt.Errorf("--preallocate: --bytes × --samples ÷ --files exceeds 1 GiB per file"))
	}
	return errors.Join(errs...)
}

func newBenchFsyncCommand(e env) *cobra.Command {
	f := &fsyncFlags{}
	cmd := &cobra.Command{
		Use:   "fsync",
		Short: "Measure one small append + fdatasync on a directory's disk (the durable-write floor)",
		Long: "fsync appends --bytes to a scratch file in --dir and calls fdatasync, --samples times, and prints\n" +
			"the latency distribution of the fdatasync calls and of each write+fdatasync pair. Run it on the\n" +
			"server's data directory: its p50 is the \"one fdatasync\" of the write-latency target. With --idle\n" +
			"it sleeps that long before each sample, so that the machine idles between syncs as it does\n" +
			"between the calls of a server with one call in flight. With --files the samples go to that many\n" +
			"files in turn, as a server's writes go to the logs of its state partitions; with --preallocate\n" +
			"each file's blocks are allocated (fallocate) before the samples, which then write inside it.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return badConfig(err)
			}
			res, err := diskprobe.SyncLatency(cmd.Context(), f.dir, f.probe)
			if err != nil {
				return err
			}
			printSyncResult(e, res)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.dir, "dir", "", "directory on the disk to measure (e.g. the server's --data-dir)")
	fs.IntVar(&f.probe.Samples, "samples", 2000, "number of append+fdatasync pairs")
	fs.IntVar(&f.probe.Bytes, "bytes", fsyncProbeBytes, "bytes appended before each fdatasync (about one write's frame)")
	fs.DurationVar(&f.probe.Idle, "idle", 0, "sleep before each sample (0: back to back)")
	fs.IntVar(&f.probe.Files, "files", 1, "files the samples go to in turn (a server writes to one log per state partition)")
	fs.BoolVar(&f.probe.Preallocate, "preallocate", false, "allocate each file's blocks first, so that the samples write inside it (Linux)")
	return cmd
}

func printSyncResult(e env, r diskprobe.SyncResult) {
	what := "append"
	if r.Preallocate {
		what = "write into allocated space"
	}
	fmt.Fprintf(e.stdout, "fdatasync on %s: %d samples of a %d-byte %s", r.Dir, r.Samples, r.Bytes, what)
	if r.Files > 1 {
		fmt.Fprintf(e.stdout, ", to %d files in turn", r.Files)
	}
	if r.Idle > 0 {
		fmt.Fprintf(e.stdout, ", each after %v idle", r.Idle)
	}
	fmt.Fprint(e.stdout, "\n\n")
	warnCreated(e, r)
	fmt.Fprintln(e.stdout, "| measured | p50 | p90 | p99 | p99.9 | max |")
	fmt.Fprintln(e.stdout, "|---|---:|---:|---:|---:|---:|")
	for _, row := range []struct {
		name string
		s    latency.Summary
	}{{"fdatasync", r.Sync}, {"write + fdatasync", r.WriteSync}} {
		fmt.Fprintf(e.stdout, "| %s | %s | %s | %s | %s | %s |\n", row.name, latency.Format(row.s.P50),
			latency.Format(row.s.P90), latency.Format(row.s.P99), latency.Format(row.s.P999), latency.Format(row.s.Max))
	}
}

// warnCreated says, on stderr, that the probe's directory did not exist: a mistyped path measures
// whatever disk holds its parent.
func warnCreated(e env, r diskprobe.SyncResult) {
	if r.Created {
		fmt.Fprintf(e.stderr, "note: %s did not exist; the probe ran in it as a new directory (removed again), on the disk of its parent\n", r.Dir)
	}
}
