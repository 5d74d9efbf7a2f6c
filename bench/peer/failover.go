package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/client"
)

// failoverOptions are the flags of -failover.
type failoverOptions struct {
	load         int            // writes in flight in the background
	probeBackoff client.Backoff // the probing client's retries
}

// failoverSample is one kill: of which node, leading which state partition, and how long each
// step took from the kill (the writes) or from the restart (readiness and leaderships).
type failoverSample struct {
	node, partition int
	probe, std      time.Duration // kill → first acknowledged write of the partition
	ready           time.Duration // restart → /readyz 200
	rebalanced      time.Duration // restart → every partition led by its preferred leader
}

// failoverClients are the two clients that write to the killed partition: one retrying quickly,
// to see when the successor serves, and one with the client package's default retries, to see
// what a share-partition leader sees.
type failoverClients struct {
	probe, std *coordTarget
}

// runFailover kills the leader of a state partition of a three-node coordinatord o.failovers
// times and prints how long the partition took to accept writes again and the node to catch up.
func runFailover(ctx context.Context, o options) error {
	cfgs, err := parseConfigs(options{coordinatord: o.coordinatord, configs: "coord3"})
	if err != nil {
		return err
	}
	load, quiet := waitQuiet(ctx, o)
	dir, err := workDir(o, "failover")
	if err != nil {
		return err
	}
	defer cleanup(o, dir)
	cc, err := startCoordinatord(ctx, coordOptions{bin: cfgs[0].bin, nodes: 3, logLevel: o.logLevel}, dir)
	if err != nil {
		return err
	}
	defer cc.stop()
	if err := waitFor(ctx, nil, 2*time.Minute, 200*time.Millisecond, "leaderships at their preferred nodes", func() bool { return cc.preferred(ctx) }); err != nil {
		return err
	}
	var fc failoverClients
	if fc.probe, err = newCoordTarget(cc, 1, client.Options{RetryBackoff: o.fo.probeBackoff}); err != nil {
		return err
	}
	defer fc.probe.close()
	if fc.std, err = newCoordTarget(cc, 1, client.Options{}); err != nil {
		return err
	}
	defer fc.std.close()
	if err := fc.std.prepare(ctx, o.keys); err != nil {
		return err
	}
	w := newWorkload(o.keys)
	stopLoad, err := backgroundLoad(ctx, cc, w, o.fo.load)
	if err != nil {
		return err
	}
	var samples []failoverSample
	for i := range o.failovers {
		s, err := failoverOnce(ctx, cc, fc, w, i, o.keys)
		if err != nil {
			stopLoad()
			return fmt.Errorf("failover %d: %w", i+1, err)
		}
		logf("failover %d/%d: node %d (partition %d): write after %v (default client %v), ready after %v, leaders back after %v",
			i+1, o.failovers, s.node, s.partition, s.probe.Round(time.Millisecond), s.std.Round(time.Millisecond),
			s.ready.Round(time.Millisecond), s.rebalanced.Round(time.Millisecond))
		samples = append(samples, s)
	}
	bg := stopLoad()
	header := fmt.Sprintf("%s; three nodes, %d share partitions, %d writes in flight in the background; load %.2f at the start", machine(o), o.keys, o.fo.load, load)
	if !quiet {
		header += " (above -max-load)"
	}
	return writeFailoverReport(os.Stdout, header, o, samples, bg)
}

// backgroundLoad keeps n writes in flight over every share partition until the returned stop,
// which returns what they recorded.
func backgroundLoad(ctx context.Context, cc *coordCluster, w *workload, n int) (stop func() phase, err error) {
	if n == 0 {
		return func() phase { return phase{} }, nil
	}
	t, err := newCoordTarget(cc, 1, client.Options{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan phase, 1)
	go func() { done <- runPhase(ctx, t, w, n, 1, 0, 24*time.Hour) }()
	return func() phase {
		cancel()
		p := <-done
		t.close()
		return p
	}, nil
}

// failoverOnce kills the node leading the state partition of a share partition (chosen so that
// the kills take turns through the nodes), measures until both clients have written it again,
// restarts the node and waits until it is ready and the leaderships are back where they were.
func failoverOnce(ctx context.Context, cc *coordCluster, fc failoverClients, w *workload, i, keys int) (failoverSample, error) {
	k, s, err := pickVictim(ctx, cc, fc, (i%len(cc.nodes))+1, i, keys)
	if err != nil {
		return s, err
	}
	// Both clients write once, so that they know the leader about to be killed.
	for _, t := range []*coordTarget{fc.probe, fc.std} {
		if cause := t.writer(0)(ctx, k, w.writeOf(k)); cause != "" {
			return s, fmt.Errorf("write before the kill: %s", cause)
		}
	}
	victim := cc.nodes[s.node-1]
	killed := time.Now()
	victim.kill()
	var wg sync.WaitGroup
	var errs [2]error
	for j, t := range []*coordTarget{fc.probe, fc.std} {
		took := []*time.Duration{&s.probe, &s.std}[j]
		wg.Go(func() { *took, errs[j] = writeUntilAcknowledged(ctx, t, w, k, killed) })
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return s, err
	}
	restarted := time.Now()
	if err := victim.start(); err != nil {
		return s, err
	}
	if err := cc.waitNodeReady(ctx, s.node-1, 5*time.Minute); err != nil {
		return s, err
	}
	s.ready = time.Since(restarted)
	if err := waitFor(ctx, nil, 2*time.Minute, 100*time.Millisecond, "leaderships back at their preferred nodes", func() bool { return cc.preferred(ctx) }); err != nil {
		return s, err
	}
	s.rebalanced = time.Since(restarted)
	return s, nil
}

// pickVictim finds a share partition, from the i-th on, whose state partition node leads, as
// the node itself reports it.
func pickVictim(ctx context.Context, cc *coordCluster, fc failoverClients, node, i, keys int) (int, failoverSample, error) {
	leaders, _, err := cc.leaders(ctx)
	if err != nil {
		return 0, failoverSample{}, err
	}
	for j := range keys {
		k := (i + j) % keys
		owner, err := fc.std.clients[0].Owner(ctx, benchGroup, benchTopic, int32(k))
		if err != nil {
			return 0, failoverSample{}, err
		}
		if p := int(owner.StatePartition); leaders[p] == node {
			return k, failoverSample{node: node, partition: p}, nil
		}
	}
	return 0, failoverSample{}, fmt.Errorf("no share partition of the %d maps to a state partition node %d leads", keys, node)
}

// writeUntilAcknowledged writes share partition k with t until a write is acknowledged, and
// returns the time from killed to that acknowledgement.
func writeUntilAcknowledged(ctx context.Context, t *coordTarget, w *workload, k int, killed time.Time) (time.Duration, error) {
	write := t.writer(0)
	var causes []string
	for time.Since(killed) < time.Minute {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		cause := write(cctx, k, w.writeOf(k))
		cancel()
		if cause == "" {
			return time.Since(killed), nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		causes = append(causes, cause)
	}
	return 0, fmt.Errorf("no write acknowledged a minute after the kill: %s", strings.Join(causes, "; "))
}

// writeFailoverReport prints the distribution of each measure and every sample.
func writeFailoverReport(out io.Writer, header string, o options, samples []failoverSample, bg phase) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", header)
	measures := []struct {
		name string
		get  func(failoverSample) time.Duration
	}{
		{fmt.Sprintf("kill → first acknowledged write, probing client (retries after %v–%v)", o.fo.probeBackoff.Initial, o.fo.probeBackoff.Max), func(s failoverSample) time.Duration { return s.probe }},
		{fmt.Sprintf("kill → first acknowledged write, client with default retries (%v–%v)", client.DefaultInitialBackoff, client.DefaultMaxBackoff), func(s failoverSample) time.Duration { return s.std }},
		{"restart → /readyz 200 (caught up)", func(s failoverSample) time.Duration { return s.ready }},
		{"restart → every partition led by its preferred leader", func(s failoverSample) time.Duration { return s.rebalanced }},
	}
	fmt.Fprintf(&b, "| measure (%d kills) | min | p50 | p99 | max |\n|---|---:|---:|---:|---:|\n", len(samples))
	for _, m := range measures {
		var xs []time.Duration
		for _, s := range samples {
			xs = append(xs, m.get(s))
		}
		slices.Sort(xs)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", m.name, dur(xs[0]), dur(nearestRank(xs, 0.50)), dur(nearestRank(xs, 0.99)), dur(xs[len(xs)-1]))
	}
	b.WriteString("\npercentiles by nearest rank (with fewer than 100 kills, p99 is the largest)\n\n")
	b.WriteString("| kill | node | state partition | write (probing) | write (default) | ready | leaders back |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, s := range samples {
		fmt.Fprintf(&b, "| %d | %d | %d | %s | %s | %s | %s |\n", i+1, s.node, s.partition, dur(s.probe), dur(s.std), dur(s.ready), dur(s.rebalanced))
	}
	if bg.calls > 0 {
		fmt.Fprintf(&b, "\nbackground writes: %s acknowledged, %s failed\n", count(float64(bg.calls-bg.errors)), count(float64(bg.errors)))
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// nearestRank is the q-quantile of sorted xs by the nearest-rank method.
func nearestRank(xs []time.Duration, q float64) time.Duration {
	i := max(int(math.Ceil(q*float64(len(xs))))-1, 0)
	return xs[min(i, len(xs)-1)]
}
