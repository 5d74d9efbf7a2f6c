package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/coordinatord/coordinatord/deploy/internal/promspec"
)

// fakePrometheus answers /api/v1/series from a fixed set of series, /api/v1/query with one
// sample when every selector of the query matches a series (none otherwise), and /api/v1/rules
// with loaded, and /api/v1/label/__name__/values with the names of the series. A query that
// contains "fail_me" gets an API error.
func fakePrometheus(t *testing.T, series []labels.Labels, loaded []ruleState) *httptest.Server {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	matches := func(ms []*labels.Matcher) int {
		n := 0
		for _, s := range series {
			ok := true
			for _, m := range ms {
				ok = ok && m.Matches(s.Get(m.Name))
			}
			if ok {
				n++
			}
		}
		return n
	}
	reply := func(w http.ResponseWriter, data any) {
		if err := json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": data}); err != nil {
			t.Error(err)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/series", func(w http.ResponseWriter, r *http.Request) {
		ms, err := p.ParseMetricSelector(r.URL.Query().Get("match[]"))
		if err != nil {
			t.Errorf("bad series selector: %v", err)
			return
		}
		out := make([]map[string]string, matches(ms))
		for i := range out {
			out[i] = map[string]string{}
		}
		reply(w, out)
	})
	mux.HandleFunc("/api/v1/query", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("query")
		if strings.Contains(q, "fail_me") {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": "bad_data", "error": "boom"})
			return
		}
		sels, err := promspec.Selectors(q)
		if err != nil {
			t.Errorf("bad query %q: %v", q, err)
			return
		}
		result := []any{map[string]any{"metric": map[string]string{}, "value": []any{1, "1"}}}
		for _, s := range sels {
			if matches(s.Matchers) == 0 {
				result = []any{}
			}
		}
		reply(w, map[string]any{"resultType": "vector", "result": result})
	})
	mux.HandleFunc("/api/v1/label/__name__/values", func(w http.ResponseWriter, r *http.Request) {
		ms, err := p.ParseMetricSelector(r.URL.Query().Get("match[]"))
		if err != nil {
			t.Errorf("bad names selector: %v", err)
			return
		}
		var names []string
		for _, s := range series {
			ok := true
			for _, m := range ms {
				ok = ok && m.Matches(s.Get(m.Name))
			}
			if ok && !slices.Contains(names, s.Get("__name__")) {
				names = append(names, s.Get("__name__"))
			}
		}
		reply(w, names)
	})
	mux.HandleFunc("/api/v1/rules", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]any{"groups": []any{map[string]any{"name": "g", "rules": loaded}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestRun(t *testing.T) {
	series := []labels.Labels{
		labels.FromStrings("__name__", "up", "job", "coordinatord"),
		labels.FromStrings("__name__", "sharecoord_state_log_size_bytes", "job", "coordinatord", "partition", "0"),
		labels.FromStrings("__name__", "sharecoord_state_operations_total", "job", "coordinatord", "operation", "write", "code", "NONE"),
	}
	tests := []struct {
		name       string
		panelExprs []string
		alertExpr  string
		strict     bool
		require    string          // -require-data
		extra      []labels.Labels // series besides the common ones
		ruleHealth []ruleState     // nil: -rule-health off
		wantFailed bool
		wantOutput []string
	}{
		{name: "all present",
			panelExprs: []string{`sum(sharecoord_state_log_size_bytes{job=~"$job"})`},
			alertExpr:  `up{job="coordinatord"} == 0`,
			wantOutput: []string{"promcheck: 4 passed, 0 failed"}},
		{name: "metric without series fails",
			panelExprs: []string{`sum(sharecoord_share_partitions)`},
			alertExpr:  `up == 0`,
			wantFailed: true,
			wantOutput: []string{"FAIL dashboard panel 1", "sharecoord_share_partitions has no series", "promcheck: 3 passed, 1 failed"}},
		{name: "alert metric without series fails",
			panelExprs: []string{`up`},
			alertExpr:  `sharecoord_group_config_clamped > 0`,
			wantFailed: true,
			wantOutput: []string{"FAIL alert A: metric sharecoord_group_config_clamped has no series"}},
		{name: "a metric exported only with TLS only warns",
			panelExprs: []string{`up`},
			alertExpr:  `sharecoord_tls_certificate_not_after_seconds - time() < 86400`,
			wantOutput: []string{"WARN alert A: metric sharecoord_tls_certificate_not_after_seconds has no series (exported only with tls.enabled=true)", "promcheck: 4 passed, 0 failed"}},
		{name: "unmatched label values only warn",
			panelExprs: []string{`sum(rate(sharecoord_state_operations_total{code!="NONE"}[$__rate_interval]))`},
			alertExpr:  `up == 0`,
			wantOutput: []string{`WARN dashboard panel 1 "p" A: selector`, "returned no data", "promcheck: 4 passed, 0 failed"}},
		{name: "unmatched label values fail when strict",
			panelExprs: []string{`sum(rate(sharecoord_state_operations_total{code!="NONE"}[$__rate_interval]))`},
			alertExpr:  `up == 0`,
			strict:     true,
			wantFailed: true,
			wantOutput: []string{"promcheck: 3 passed, 1 failed"}},
		{name: "required metrics must have data",
			panelExprs: []string{`sum(rate(sharecoord_state_operations_total{code!="NONE"}[$__rate_interval]))`, `up`},
			alertExpr:  `sharecoord_tls_certificate_not_after_seconds - time() < 86400`,
			require:    `sharecoord_(state_operations|tls)_.*`,
			wantFailed: true,
			wantOutput: []string{`FAIL dashboard panel 1 "p" A: selector`, "FAIL alert A: metric sharecoord_tls_certificate_not_after_seconds has no series",
				"promcheck: 3 passed, 2 failed"}},
		{name: "healthy rule",
			panelExprs: []string{`up`},
			alertExpr:  `up == 0`,
			ruleHealth: []ruleState{{Name: "A", Type: "alerting", Health: "ok"}},
			wantOutput: []string{"ok   alert A", "promcheck: 4 passed, 0 failed"}},
		{name: "rule failing to evaluate",
			panelExprs: []string{`up`},
			alertExpr:  `up == 0`,
			ruleHealth: []ruleState{{Name: "A", Type: "alerting", Health: "err", LastError: "many-to-many matching not allowed"}},
			wantFailed: true,
			wantOutput: []string{"FAIL alert A: evaluation failed: many-to-many", "promcheck: 3 passed, 1 failed"}},
		{name: "rule not loaded",
			panelExprs: []string{`up`},
			alertExpr:  `up == 0`,
			ruleHealth: []ruleState{{Name: "B", Type: "alerting", Health: "ok"}},
			wantFailed: true,
			wantOutput: []string{"FAIL alert A: not loaded by Prometheus"}},
		{name: "an exported metric promspec does not know fails",
			panelExprs: []string{`up`},
			alertExpr:  `up == 0`,
			extra:      []labels.Labels{labels.FromStrings("__name__", "sharecoord_new_total", "job", "coordinatord")},
			wantFailed: true,
			wantOutput: []string{`FAIL exported metrics of job "coordinatord": not in promspec.ExportedKind: sharecoord_new_total`, "promcheck: 3 passed, 1 failed"}},
		{name: "query error fails",
			panelExprs: []string{`up + fail_me`},
			alertExpr:  `up == 0`,
			wantFailed: true,
			wantOutput: []string{"bad_data: boom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakePrometheus(t, append(slices.Clone(series), tt.extra...), tt.ruleHealth)
			dir := t.TempDir()
			cfg := config{
				prometheus: srv.URL,
				dashboard:  writeDashboard(t, dir, tt.panelExprs),
				rules:      writeRules(t, dir, tt.alertExpr),
				interval:   "1m",
				job:        "coordinatord",
				lookback:   time.Hour,
				timeout:    time.Minute,
				strict:     tt.strict,
				require:    tt.require,
				ruleHealth: tt.ruleHealth != nil,
			}
			var out bytes.Buffer
			failed, err := run(cfg, &out)
			if err != nil {
				t.Fatal(err)
			}
			if failed != tt.wantFailed {
				t.Errorf("failed = %v, want %v", failed, tt.wantFailed)
			}
			for _, want := range tt.wantOutput {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

func writeDashboard(t *testing.T, dir string, exprs []string) string {
	t.Helper()
	var panels []map[string]any
	for i, e := range exprs {
		panels = append(panels, map[string]any{"id": i + 1, "title": "p", "type": "timeseries",
			"targets": []map[string]any{{"refId": "A", "expr": e}}})
	}
	d := map[string]any{"uid": "u", "title": "t", "panels": panels,
		"templating": map[string]any{"list": []map[string]any{
			{"name": "job", "type": "query", "query": "label_values(up, job)"}}}}
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "dashboard.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeRules(t *testing.T, dir, expr string) string {
	t.Helper()
	text := "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: '" + expr + "'\n"
	path := filepath.Join(dir, "alerts.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens on its address any more
	dir := t.TempDir()
	cfg := config{
		prometheus: srv.URL, dashboard: writeDashboard(t, dir, []string{"up"}),
		rules: writeRules(t, dir, "up == 0"), interval: "1m", lookback: time.Hour, timeout: time.Minute,
	}
	if _, err := run(cfg, &bytes.Buffer{}); err == nil {
		t.Fatal("run succeeded against a closed server")
	}
}
