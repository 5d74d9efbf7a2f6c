package main

import (
	"context"
	"fmt"
	"net/http"
	httppprof "net/http/pprof"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/coordinatord/coordinatord/internal/shard"
)

// readiness is what the readiness endpoints report besides the partitions' states; serve sets it
// when the gRPC health service changes.
type readiness struct {
	serving  atomic.Bool // every state partition finished its first load (gRPC health SERVING)
	stopping atomic.Bool // draining the calls in flight before exit (gRPC health NOT_SERVING)
}

// newAdminMux serves the operator endpoints on the metrics port:
//   - /metrics: Prometheus metrics from reg;
//   - /healthz: 200 while the process is up (liveness);
//   - /readyz: 200 when every state partition is active, else 503 with one line per partition
//     that is not, saying why (readiness detail for operators). /readyz?exclude=failed answers as
//     the gRPC health service does, for probes: 503 until every partition has finished its first
//     load, 200 from then on, while a partition that failed (a damaged log waits for an operator)
//     or reloads (after a failed append) serves no keys but the others do, still listing the
//     partitions that are not active. It answers 503 too while no partition of the node is
//     active (canServe), as the gRPC health service then turns NOT_SERVING: a node that serves no
//     key must not stay in service. Both answer 503 once the server drains its calls before it
//     exits, as the gRPC health service turns NOT_SERVING.
//   - /debug/pprof/: Go's runtime profiles, only with pprof (--enable-pprof).
//
// shards holds nil for a partition this node holds no replica of (a cluster); notReady, when set,
// lists what else keeps the node from serving (replicas of a cluster node catching up).
func newAdminMux(reg *prometheus.Registry, shards []*shard.Shard, pprof bool, ready *readiness, notReady func() []string) *http.ServeMux {
	mux := http.NewServeMux()
	if pprof {
		mux.HandleFunc("GET /debug/pprof/", httppprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", httppprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", httppprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", httppprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", httppprof.Trace)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		excludeFailed := false
		for _, x := range r.URL.Query()["exclude"] {
			if x != "failed" {
				http.Error(w, fmt.Sprintf("exclude=%q: only exclude=failed is known", x), http.StatusBadRequest)
				return
			}
			excludeFailed = true
		}
		if ready.stopping.Load() {
			http.Error(w, "shutting down: draining the calls in flight", http.StatusServiceUnavailable)
			return
		}
		var detail strings.Builder
		active, held := 0, 0
		for p, s := range shards {
			if s == nil {
				continue
			}
			held++
			st := s.Status()
			if st.State == shard.Active {
				active++
				continue
			}
			fmt.Fprintf(&detail, "partition %d: %s", p, st.State)
			if st.Err != nil {
				fmt.Fprintf(&detail, ": %v", st.Err)
			}
			detail.WriteByte('\n')
		}
		if !canServe(active, held) {
			detail.WriteString("no state partition of this node is active: it serves no key\n")
		}
		var pending []string
		if notReady != nil {
			pending = notReady()
		}
		for _, line := range pending {
			detail.WriteString(line + "\n")
		}
		if !ready.serving.Load() && len(pending) == 0 {
			// Between the last partition's load and the gRPC health service turning SERVING.
			detail.WriteString("start-up has not finished\n")
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ready.serving.Load() || !canServe(active, held) || !excludeFailed && active < held || !excludeFailed && len(pending) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintf(w, "%d/%d state partitions active\n%s", active, held, detail.String())
	})
	return mux
}

// canServe is the readiness threshold of a node that has finished starting: it serves at least
// one key, with at least one of the held state partitions active, or it holds none (a cluster
// node whose partitions all live elsewhere, which still answers FindCoordinator and redirects).
func canServe(active, held int) bool { return held == 0 || active > 0 }

// activePartitions counts the partitions of shards (nil: held elsewhere) this node holds and those
// of them that are active.
func activePartitions(shards []*shard.Shard) (active, held int) {
	for _, s := range shards {
		if s == nil {
			continue
		}
		held++
		if s.Status().State == shard.Active {
			active++
		}
	}
	return active, held
}

// followPartitions keeps setServing told whether the node can serve (canServe), at once and after
// every status change of a partition, until ctx ends. The gRPC health service follows it from the
// end of start-up, as /readyz?exclude=failed does.
func followPartitions(ctx context.Context, shards []*shard.Shard, setServing func(bool)) {
	changed := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, s := range shards {
		if s == nil {
			continue
		}
		ch := s.Changed() // before the first look at the statuses, so that no change is missed
		wg.Go(func() {
			for {
				select {
				case <-ch:
				case <-ctx.Done():
					return
				}
				ch = s.Changed()
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		})
	}
	serving := canServe(activePartitions(shards))
	setServing(serving)
	for {
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
		if now := canServe(activePartitions(shards)); now != serving {
			serving = now
			setServing(serving)
		}
	}
}
