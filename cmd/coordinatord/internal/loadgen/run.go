package loadgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/coordinatord/coordinatord/client"
	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/latency"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// callTimeout bounds one call, so that a stuck server cannot hang a run.
const callTimeout = 30 * time.Second

// readyTimeout bounds the wait for the server to report SERVING.
const readyTimeout = 2 * time.Minute

// PhaseResult is what one phase measured in its recorded window. A call counts when it started
// after the warm-up and finished before the window closed.
type PhaseResult struct {
	Kind        Kind
	Calls       int64            // calls counted, successful or not
	Errors      int64            // counted calls that failed (gRPC error or a non-NONE error code)
	ErrorCauses map[string]int64 // failed calls by cause (gRPC code or Kafka error code name)
	Elapsed     time.Duration    // length of the recorded window
	Latency     latency.Summary  // of the successful counted calls
}

// Throughput is successful calls per second of the recorded window.
func (p PhaseResult) Throughput() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Calls-p.Errors) / p.Elapsed.Seconds()
}

// Report is the outcome of a run: one result per phase, in the order run.
type Report struct {
	Config Config
	Phases []PhaseResult
}

// Phase returns the result of the phase of kind k.
func (r *Report) Phase(k Kind) (PhaseResult, bool) {
	for _, p := range r.Phases {
		if p.Kind == k {
			return p, true
		}
	}
	return PhaseResult{}, false
}

// Ratios compares the write phase with the health baseline of the same run.
type Ratios struct {
	Throughput float64 `json:"throughput"` // write ÷ health successful calls per second
	P50        float64 `json:"p50"`        // write ÷ health latency at each percentile
	P90        float64 `json:"p90"`
	P99        float64 `json:"p99"`
	P999       float64 `json:"p99_9"`
}

// Ratios returns write ÷ health for throughput and latency percentiles; false unless both phases
// ran and completed calls successfully.
func (r *Report) Ratios() (Ratios, bool) {
	w, ok1 := r.Phase(KindWrite)
	h, ok2 := r.Phase(KindHealth)
	if !ok1 || !ok2 || h.Throughput() == 0 || h.Latency.P50 == 0 || w.Latency.Count == 0 {
		return Ratios{}, false
	}
	div := func(a, b time.Duration) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	return Ratios{
		Throughput: w.Throughput() / h.Throughput(),
		P50:        div(w.Latency.P50, h.Latency.P50),
		P90:        div(w.Latency.P90, h.Latency.P90),
		P99:        div(w.Latency.P99, h.Latency.P99),
		P999:       div(w.Latency.P999, h.Latency.P999),
	}, true
}

// Run connects to cfg.Target, waits until the server reports SERVING, and runs cfg's phases in
// order. It stops early, returning what it has with ctx's error, when ctx ends.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	opts := cfg.DialOptions
	if opts == nil {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conns := make([]*grpc.ClientConn, cfg.Connections)
	for i := range conns {
		c, err := grpc.NewClient(cfg.Target, opts...)
		if err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("connect to %s: %w", cfg.Target, err)
		}
		conns[i] = c
	}
	defer closeAll(conns)
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "waiting for %s to report SERVING (at most %v)\n", cfg.Target, readyTimeout)
	}
	if err := waitServing(ctx, conns[0]); err != nil {
		return nil, fmt.Errorf("wait for %s to serve: %w", cfg.Target, err)
	}

	rep := &Report{Config: cfg}
	for _, kind := range cfg.Phases {
		var newCaller func(worker int) caller
		switch kind {
		case KindHealth:
			newCaller = func(w int) caller { return newHealthCaller(conns[w%len(conns)]) }
		case KindWrite:
			clients, err := stateClients(cfg, conns, opts)
			if err != nil {
				return rep, err
			}
			defer clients.close()
			ws, err := newWriteSet(ctx, clients.of(0), cfg)
			if err != nil {
				return rep, err
			}
			newCaller = func(w int) caller { return ws.caller(clients.of(w)) }
		}
		res, err := runPhase(ctx, cfg, kind, newCaller)
		rep.Phases = append(rep.Phases, res)
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// writeClients are the write phase's clients: one per connection, or one routing client per
// connection's worth of callers (Config.Cluster).
type writeClients struct {
	clients []stateClient
	routed  []*client.Client
}

func stateClients(cfg Config, conns []*grpc.ClientConn, opts []grpc.DialOption) (*writeClients, error) {
	wc := &writeClients{}
	for _, c := range conns {
		if !cfg.Cluster {
			wc.clients = append(wc.clients, connClient{pb.NewShareCoordinatorServiceClient(c)})
			continue
		}
		rc, err := client.New(client.Options{Bootstrap: []string{cfg.Target}, DialOptions: opts})
		if err != nil {
			wc.close()
			return nil, fmt.Errorf("a routing client of %s: %w", cfg.Target, err)
		}
		wc.routed = append(wc.routed, rc)
		wc.clients = append(wc.clients, rc)
	}
	return wc, nil
}

func (wc *writeClients) of(worker int) stateClient { return wc.clients[worker%len(wc.clients)] }

func (wc *writeClients) close() {
	for _, rc := range wc.routed {
		_ = rc.Close()
	}
}

func closeAll(conns []*grpc.ClientConn) {
	for _, c := range conns {
		if c != nil {
			_ = c.Close()
		}
	}
}

// waitServing waits, with the health Watch stream, until the server's overall status is SERVING.
func waitServing(ctx context.Context, conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		if resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
	}
}

// caller makes one call and returns "" on success or the cause of the failure.
type caller interface {
	call(ctx context.Context) string
}

// maxHistograms bounds the latency histograms of a phase. One costs ~220 KB (1 ns to a minute at
// three significant digits), so one per caller made --concurrency 10000 cost gigabytes; callers
// beyond this many share them, under a lock held only to record one value.
const maxHistograms = 64

// sharedHistogram is a latency histogram some of a phase's callers record into.
type sharedHistogram struct {
	mu sync.Mutex
	h  *latency.Histogram
}

func (s *sharedHistogram) record(d time.Duration) {
	s.mu.Lock()
	s.h.Record(d)
	s.mu.Unlock()
}

// worker is the part of a phase one goroutine owns.
type worker struct {
	hist   *sharedHistogram
	calls  int64
	errors int64
	causes map[string]int64
}

// phaseClock says when recording starts and ends.
type phaseClock struct {
	recordFrom, end time.Time
}

func runPhase(ctx context.Context, cfg Config, kind Kind, newCaller func(int) caller) (PhaseResult, error) {
	began := time.Now()
	clock := phaseClock{recordFrom: began.Add(cfg.Warmup)}
	clock.end = clock.recordFrom.Add(cfg.Duration)

	var done, failed atomic.Int64 // every call, warm-up included, for the progress line
	hists := make([]*sharedHistogram, min(cfg.Concurrency, maxHistograms))
	for i := range hists {
		hists[i] = &sharedHistogram{h: latency.New()}
	}
	workers := make([]*worker, cfg.Concurrency)
	var wg sync.WaitGroup
	for i := range workers {
		w := &worker{hist: hists[i%len(hists)], causes: map[string]int64{}}
		workers[i] = w
		c := newCaller(i)
		wg.Go(func() {
			for {
				start := time.Now()
				if !start.Before(clock.end) || ctx.Err() != nil {
					return
				}
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				cause := c.call(cctx)
				cancel()
				finish := time.Now()
				if ctx.Err() != nil {
					// The run was interrupted (SIGINT): the call may have been cut by that, which
					// is no failure of the server's. The phase's window ends here.
					return
				}
				done.Add(1)
				if cause != "" {
					failed.Add(1)
				}
				if start.Before(clock.recordFrom) || finish.After(clock.end) {
					continue
				}
				w.calls++
				if cause != "" {
					w.errors++
					w.causes[cause]++
					continue
				}
				w.hist.record(finish.Sub(start))
			}
		})
	}
	stopProgress := startProgress(cfg, kind, clock, began, &done, &failed)
	wg.Wait()
	stopProgress()

	res := PhaseResult{Kind: kind, Elapsed: cfg.Duration, ErrorCauses: map[string]int64{}}
	hist := latency.New()
	for _, h := range hists {
		hist.Merge(h.h)
	}
	for _, w := range workers {
		res.Calls += w.calls
		res.Errors += w.errors
		for c, n := range w.causes {
			res.ErrorCauses[c] += n
		}
	}
	res.Latency = hist.Summary()
	if err := ctx.Err(); err != nil {
		if now := time.Now(); now.Before(clock.end) {
			res.Elapsed = max(now.Sub(clock.recordFrom), 0)
		}
		return res, fmt.Errorf("phase %s stopped: %w", kind, err)
	}
	if res.Calls == 0 {
		return res, errors.New("phase " + string(kind) + ": no call completed in the recorded window")
	}
	return res, nil
}

// startProgress prints a progress line every cfg.ProgressEvery until the returned stop is called.
func startProgress(cfg Config, kind Kind, clock phaseClock, began time.Time, done, failed *atomic.Int64) (stop func()) {
	if cfg.Progress == nil {
		return func() {}
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(cfg.ProgressEvery)
		defer t.Stop()
		last, lastAt := int64(0), began
		for {
			select {
			case <-quit:
				return
			case now := <-t.C:
				n := done.Load()
				rate := float64(n-last) / now.Sub(lastAt).Seconds()
				last, lastAt = n, now
				stage := fmt.Sprintf("%5.1fs/%vs", now.Sub(clock.recordFrom).Seconds(), cfg.Duration.Seconds())
				if now.Before(clock.recordFrom) {
					stage = fmt.Sprintf("warm-up %4.1fs/%vs", now.Sub(began).Seconds(), cfg.Warmup.Seconds())
				}
				fmt.Fprintf(cfg.Progress, "%-6s %-18s calls=%-9d rate=%9.0f/s errors=%d\n", kind, stage, n, rate, failed.Load())
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}
