package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// options are the command-line flags.
type options struct {
	coordinatord   string
	etcd           string
	configs        string
	clientInFlight string
	inflight       int
	conns          int
	keys           int
	warmup         time.Duration
	duration       time.Duration
	oneWarmup      time.Duration
	oneDuration    time.Duration
	rounds         int
	maxLoad        float64
	loadWait       time.Duration
	dir            string
	keep           bool
	profile        string
	profileSecs    int
	logLevel       string

	failover  bool
	failovers int
	fo        failoverOptions
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench-peer", flag.ContinueOnError)
	fs.StringVar(&o.coordinatord, "coordinatord", "bin/coordinatord", "the coordinatord binary; several, as LABEL=PATH,LABEL=PATH, run each coordinatord configuration once per binary (to compare builds)")
	fs.StringVar(&o.etcd, "etcd", "", "the etcd binary (default: etcd on PATH, installed from Debian's etcd-server when missing and apt-get runs as root)")
	fs.StringVar(&o.configs, "configs", "etcd1,coord1,etcd3,coord3", "configurations in the order of each round: etcd1, etcd3, coord1 (single node), coord3 (three-node cluster), coord1raft (cluster mode with one node)")
	fs.StringVar(&o.clientInFlight, "client-in-flight", "", "coordinatord's client: requests per node, method and group outstanding before calls are coalesced (client.Options.InFlightPerNode; negative: no coalescing); several, as N,N, run each coordinatord configuration once per value (default: the client's default)")
	fs.IntVar(&o.inflight, "inflight", 64, "writes in flight in the throughput measurement")
	fs.IntVar(&o.conns, "conns", 4, "clients (each with its own connections) the writes in flight are spread over")
	fs.IntVar(&o.keys, "keys", 256, "share partitions (etcd: keys) written, round-robin")
	fs.DurationVar(&o.warmup, "warmup", 5*time.Second, "unrecorded time before the throughput measurement")
	fs.DurationVar(&o.duration, "duration", 15*time.Second, "recorded time of the throughput measurement")
	fs.DurationVar(&o.oneWarmup, "latency-warmup", 2*time.Second, "unrecorded time before the measurement at one write in flight")
	fs.DurationVar(&o.oneDuration, "latency-duration", 10*time.Second, "recorded time of the measurement at one write in flight")
	fs.IntVar(&o.rounds, "rounds", 1, "times the configurations are measured, in turn")
	fs.Float64Var(&o.maxLoad, "max-load", 0.5, "before each configuration, wait until the 1-minute load average is below this (0: do not wait)")
	fs.DurationVar(&o.loadWait, "load-wait", 20*time.Minute, "wait at most this long for the load to fall; a configuration started above -max-load is marked")
	fs.StringVar(&o.dir, "dir", "", "where the servers' data directories are made (default: the system's temporary directory); use a directory on the disk to measure")
	fs.BoolVar(&o.keep, "keep", false, "keep the data directories and server logs")
	fs.StringVar(&o.profile, "profile", "", "write CPU profiles of every coordinatord node of the three-node configurations, taken during the throughput measurement, into this directory")
	fs.IntVar(&o.profileSecs, "profile-seconds", 10, "length of each CPU profile")
	fs.StringVar(&o.logLevel, "server-log-level", "warn", "coordinatord's --log-level (its logs are in the data directory: see -keep)")
	fs.BoolVar(&o.failover, "failover", false, "measure failover on a three-node coordinatord instead of comparing with etcd")
	fs.IntVar(&o.failovers, "failovers", 20, "with -failover: leaders killed, one at a time")
	fs.IntVar(&o.fo.load, "failover-load", 4, "with -failover: writes kept in flight over every share partition while the leaders are killed (0: none)")
	fs.DurationVar(&o.fo.probeBackoff.Initial, "probe-backoff", 10*time.Millisecond, "with -failover: first retry wait of the probing client")
	fs.DurationVar(&o.fo.probeBackoff.Max, "probe-backoff-max", 50*time.Millisecond, "with -failover: longest retry wait of the probing client")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var errs []error
	if o.inflight < 1 || o.conns < 1 || o.keys < 1 || o.rounds < 1 || o.failovers < 1 || o.fo.load < 0 {
		errs = append(errs, errors.New("-inflight, -conns, -keys, -rounds and -failovers must be at least 1, -failover-load at least 0"))
	}
	if o.duration <= 0 || o.oneDuration <= 0 || o.warmup < 0 || o.oneWarmup < 0 {
		errs = append(errs, errors.New("durations must be positive and warm-ups not negative"))
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	return o, errors.Join(errs...)
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-peer:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.failover {
		err = runFailover(ctx, o)
	} else {
		err = runComparison(ctx, o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-peer:", err)
		os.Exit(1)
	}
}

// logf prints a progress line on stderr.
func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", a...)
}

// workDir makes the directory of one server's data and logs.
func workDir(o options, name string) (string, error) {
	return os.MkdirTemp(o.dir, "bench-peer-"+name+"-")
}

// cleanup removes a work directory unless -keep.
func cleanup(o options, dir string) {
	if o.keep {
		logf("kept %s", dir)
		return
	}
	_ = os.RemoveAll(dir)
}

// machine describes where the run happens, for the report's header.
func machine(o options) string {
	dir := o.dir
	if dir == "" {
		dir = os.TempDir()
	}
	return fmt.Sprintf("%s/%s, %d CPUs (GOMAXPROCS %d), data under %s (%s)", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(),
		runtime.GOMAXPROCS(0), dir, fsType(dir))
}

// loadAverage is the 1-minute load average.
func loadAverage() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	var l float64
	_, err = fmt.Sscanf(string(b), "%f", &l)
	return l, err
}

// waitQuiet waits until the 1-minute load average is below o.maxLoad, for at most o.loadWait, and
// returns the load it ended with and whether that is below the limit.
func waitQuiet(ctx context.Context, o options) (float64, bool) {
	began, said := time.Now(), time.Time{}
	for {
		l, err := loadAverage()
		if err != nil || o.maxLoad <= 0 || l < o.maxLoad {
			return l, true
		}
		if time.Since(began) > o.loadWait {
			logf("the load is %.2f after waiting %v: measuring anyway (marked)", l, o.loadWait)
			return l, false
		}
		if time.Since(said) > 30*time.Second {
			logf("waiting for the 1-minute load average (%.2f) to fall below %.2f", l, o.maxLoad)
			said = time.Now()
		}
		select {
		case <-ctx.Done():
			return l, false
		case <-time.After(2 * time.Second):
		}
	}
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
