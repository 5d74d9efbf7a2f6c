package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordinatord/coordinatord/client"
)

// config is one row of the table: a system, its node count and, for coordinatord, the binary.
type config struct {
	id      string // as -configs names it
	system  string // "etcd" or "coordinatord"
	nodes   int
	raft    bool   // coordinatord: cluster mode even with one node
	variant string // coordinatord: the binary's label ("" with a single binary)
	bin     string
	// inFlight is coordinatord's client.Options.InFlightPerNode (negative: no coalescing);
	// perCall says the row's label names it (several values were measured).
	inFlight int
	perCall  bool
}

// label is the row's name in the tables.
func (c config) label() string {
	name := c.system
	var notes []string
	if c.variant != "" {
		notes = append(notes, c.variant)
	}
	if c.perCall && c.inFlight < 0 {
		notes = append(notes, "client uncoalesced")
	} else if c.perCall {
		notes = append(notes, fmt.Sprintf("client in flight %d", c.inFlight))
	}
	if len(notes) > 0 {
		name += " (" + strings.Join(notes, ", ") + ")"
	}
	switch {
	case c.system == "etcd" && c.nodes == 1:
		return name + " 1 member"
	case c.system == "etcd":
		return fmt.Sprintf("%s %d members", name, c.nodes)
	case c.raft:
		return name + " 1-node cluster"
	case c.nodes == 1:
		return name + " 1 node"
	}
	return fmt.Sprintf("%s %d nodes", name, c.nodes)
}

// parseConfigs expands -configs and -coordinatord into the rows of a round, in order: each
// coordinatord configuration once per binary.
func parseConfigs(o options) ([]config, error) {
	type binary struct{ label, path string }
	var bins []binary
	for _, item := range splitList(o.coordinatord) {
		label, path, ok := strings.Cut(item, "=")
		if !ok {
			label, path = "", item
		}
		bins = append(bins, binary{label, path})
	}
	if len(bins) == 0 {
		return nil, fmt.Errorf("-coordinatord names no binary")
	}
	for _, b := range bins {
		if len(bins) > 1 && b.label == "" {
			return nil, fmt.Errorf("-coordinatord %q: name each of several binaries LABEL=PATH", o.coordinatord)
		}
		if _, err := os.Stat(b.path); err != nil {
			return nil, fmt.Errorf("-coordinatord: %w (make build makes bin/coordinatord)", err)
		}
	}
	var inFlights []int
	for _, item := range splitList(o.clientInFlight) {
		n, err := strconv.Atoi(item)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("-client-in-flight %q: want a list of non-zero integers (negative: no coalescing)", o.clientInFlight)
		}
		inFlights = append(inFlights, n)
	}
	if len(inFlights) == 0 {
		inFlights = []int{client.DefaultInFlightPerNode}
	}
	var out []config
	for _, id := range splitList(o.configs) {
		switch id {
		case "etcd1", "etcd3":
			out = append(out, config{id: id, system: "etcd", nodes: int(id[4] - '0')})
		case "coord1", "coord3", "coord1raft":
			for _, b := range bins {
				for _, n := range inFlights {
					out = append(out, config{id: id, system: "coordinatord", nodes: int(id[5] - '0'), raft: id == "coord1raft", variant: b.label, bin: b.path,
						inFlight: n, perCall: len(inFlights) > 1})
				}
			}
		default:
			return nil, fmt.Errorf("-configs: unknown configuration %q (want etcd1, etcd3, coord1, coord3 or coord1raft)", id)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-configs names no configuration")
	}
	return out, nil
}

// result is what one configuration measured in one round.
type result struct {
	cfg   config
	round int
	load  float64 // 1-minute load average when it started
	quiet bool    // the load was below -max-load
	many  phase   // at -inflight
	one   phase   // at one in flight
}

// runComparison measures every configuration -rounds times, in turn, and prints the tables.
func runComparison(ctx context.Context, o options) error {
	cfgs, err := parseConfigs(o)
	if err != nil {
		return err
	}
	etcdBin := ""
	for _, c := range cfgs {
		if c.system == "etcd" && etcdBin == "" {
			if etcdBin, err = findEtcd(o.etcd, logf); err != nil {
				return err
			}
		}
	}
	var results []result
	for r := 1; r <= o.rounds; r++ {
		for _, c := range cfgs {
			logf("round %d/%d: %s", r, o.rounds, c.label())
			res, err := measure(ctx, o, c, etcdBin)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r, c.label(), err)
			}
			res.round = r
			logf("  %.0f writes/s at %d in flight (p50 %v), p50 %v at 1 in flight, %d errors",
				res.many.rate(), o.inflight, res.many.quantile(50), res.one.quantile(50), res.many.errors+res.one.errors)
			results = append(results, res)
		}
	}
	header := fmt.Sprintf("%s; %d in flight over %d clients, %d share partitions (etcd: keys), writes of %d bytes encoded (etcd: values of those bytes), %v recorded after %v warm-up; 1 in flight: %v after %v",
		machine(o), o.inflight, o.conns, o.keys, proto.Size(newWorkload(1).writeOf(0)), o.duration, o.warmup, o.oneDuration, o.oneWarmup)
	if etcdBin != "" {
		header += "; " + etcdVersion(etcdBin)
	}
	return writeReport(os.Stdout, header, o, results)
}

// measure starts one configuration on a fresh data directory, measures it and stops it.
func measure(ctx context.Context, o options, c config, etcdBin string) (result, error) {
	res := result{cfg: c}
	res.load, res.quiet = waitQuiet(ctx, o)
	dir, err := workDir(o, c.id)
	if err != nil {
		return res, err
	}
	defer cleanup(o, dir)
	var t target
	var profile func()
	switch c.system {
	case "etcd":
		ec, err := startEtcd(ctx, etcdBin, dir, c.nodes)
		if err != nil {
			return res, err
		}
		defer ec.stop()
		if t, err = newEtcdTarget(ec, o.conns); err != nil {
			return res, err
		}
	default:
		pprof := o.profile != "" && c.nodes > 1
		cc, err := startCoordinatord(ctx, coordOptions{bin: c.bin, nodes: c.nodes, raft: c.raft, pprof: pprof, logLevel: o.logLevel}, dir)
		if err != nil {
			return res, err
		}
		defer cc.stop()
		if t, err = newCoordTarget(cc, o.conns, client.Options{InFlightPerNode: c.inFlight}); err != nil {
			return res, err
		}
		if pprof {
			profile = func() { cc.profile(ctx, o, c) }
		}
	}
	defer t.close()
	if err := t.prepare(ctx, o.keys); err != nil {
		return res, err
	}
	w := newWorkload(o.keys)
	done := make(chan struct{})
	if profile != nil {
		go func() {
			defer close(done)
			select {
			case <-time.After(o.warmup + time.Second):
				profile()
			case <-ctx.Done():
			}
		}()
	} else {
		close(done)
	}
	res.many = runPhase(ctx, t, w, o.inflight, o.conns, o.warmup, o.duration)
	<-done
	res.one = runPhase(ctx, t, w, 1, 1, o.oneWarmup, o.oneDuration)
	return res, ctx.Err()
}

// profile takes a CPU profile of every node at once and writes each into o.profile.
func (c *coordCluster) profile(ctx context.Context, o options, cfg config) {
	if err := os.MkdirAll(o.profile, 0o755); err != nil {
		logf("profile: %v", err)
		return
	}
	var wg sync.WaitGroup
	for i, base := range c.admin {
		wg.Go(func() {
			name := filepath.Join(o.profile, fmt.Sprintf("%s%s-node%d-%s.pprof", cfg.id, strings.ReplaceAll(cfg.variant, "/", "x"), i+1, time.Now().Format("150405")))
			if err := fetch(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, o.profileSecs), name); err != nil {
				logf("profile of node %d: %v", i+1, err)
				return
			}
			logf("  CPU profile of node %d: %s", i+1, name)
		})
	}
	wg.Wait()
}

// fetch writes the body of a GET of url into the file path.
func fetch(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
