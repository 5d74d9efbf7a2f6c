package main

import (
	"fmt"
	"net/http"
	httppprof "net/http/pprof"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/coordinatord/coordinatord/internal/shard"
)

// newAdminMux serves the operator endpoints on the metrics port:
//   - /metrics: Prometheus metrics from reg;
//   - /healthz: 200 while the process is up (liveness);
//   - /readyz: 200 when every state partition is active, else 503 with one line per partition
//     that is not, saying why (readiness detail for operators). /readyz?exclude=failed does not
//     count partitions that failed to load (a damaged log waits for an operator) against
//     readiness, still listing them: it turns 200 once every partition has finished loading, as
//     the gRPC health service does — the probe to use where gRPC probes cannot (TLS). Both answer
//     503 once stopping is set (the server drains its calls before it exits), as the gRPC health
//     service turns NOT_SERVING.
//   - /debug/pprof/: Go's runtime profiles, only with pprof (--enable-pprof).
func newAdminMux(reg *prometheus.Registry, shards []*shard.Shard, pprof bool, stopping *atomic.Bool) *http.ServeMux {
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
		if stopping.Load() {
			http.Error(w, "shutting down: draining the calls in flight", http.StatusServiceUnavailable)
			return
		}
		var detail strings.Builder
		active, ready := 0, 0
		for p, s := range shards {
			st := s.Status()
			if st.State == shard.Active {
				active++
				ready++
				continue
			}
			if st.State == shard.Failed && excludeFailed {
				ready++
			}
			fmt.Fprintf(&detail, "partition %d: %s", p, st.State)
			if st.Err != nil {
				fmt.Fprintf(&detail, ": %v", st.Err)
			}
			detail.WriteByte('\n')
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ready < len(shards) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintf(w, "%d/%d state partitions active\n%s", active, len(shards), detail.String())
	})
	return mux
}
