package main

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/coordinatord/coordinatord/internal/shard"
)

// newAdminMux serves the operator endpoints on the metrics port:
//   - /metrics: Prometheus metrics from reg;
//   - /healthz: 200 while the process is up (liveness);
//   - /readyz: 200 when every state partition is active, else 503 with one line per partition
//     that is not, saying why (readiness detail for operators).
func newAdminMux(reg *prometheus.Registry, shards []*shard.Shard) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		var detail strings.Builder
		active := 0
		for p, s := range shards {
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
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if active < len(shards) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintf(w, "%d/%d state partitions active\n%s", active, len(shards), detail.String())
	})
	return mux
}
