package promspec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	tests := []struct{ in, want string }{
		{`rate(x{job=~"$job"}[$__rate_interval])`, `rate(x{job=~".*"}[1m])`},
		{`x{a=~"${instance}",b=~"${partition:regex}"}`, `x{a=~".*",b=~".*"}`},
		{`increase(x[$__range]) / $__interval`, `increase(x[1m]) / 1m`},
		{`label_replace(x, "a", "$1", "b", "(.*)")`, `label_replace(x, "a", "$1", "b", "(.*)")`},
		{`x{a=~"foo$"}`, `x{a=~"foo$"}`},
	}
	for _, tt := range tests {
		if got := Expand(tt.in, "1m"); got != tt.want {
			t.Errorf("Expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSelectors(t *testing.T) {
	tests := []struct {
		expr    string
		want    []string // selectors as String() prints them
		wantErr bool
	}{
		{expr: `up{job="coordinatord"} == 0`, want: []string{`{job="coordinatord",__name__="up"}`}},
		{expr: `sum(rate(a_total{x!="1"}[5m])) / sum(rate(b_total[5m]))`, want: []string{`{x!="1",__name__="a_total"}`, `{__name__="b_total"}`}},
		{expr: `{__name__="up"}`, want: []string{`{__name__="up"}`}},
		{expr: `{job="x"}`, wantErr: true},
		{expr: `{__name__=~"sharecoord_.*"}`, wantErr: true},
		{expr: `sum(`, wantErr: true},
		{expr: `vector(1)`, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			sels, err := Selectors(tt.expr)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			var got []string
			for _, s := range sels {
				got = append(got, s.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("selectors %q, want %q", got, tt.want)
			}
		})
	}
}

func TestKnownSeriesName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"sharecoord_state_log_size_bytes", true},
		{"sharecoord_records_appended_total", true},
		{"sharecoord_fsync_duration_seconds_bucket", true},
		{"sharecoord_commit_batch_records_count", true},
		{"grpc_server_handling_seconds_sum", true},
		{"go_goroutines", true},
		{"process_resident_memory_bytes", true},
		{"up", true},
		{"sharecoord_fsync_duration_seconds", false},      // a histogram is read through its suffixes
		{"sharecoord_state_log_size_bytes_bucket", false}, // not a histogram
		{"sharecoord_records_appended", false},
		{"grpc_client_handled_total", false},
	}
	for _, tt := range tests {
		if got := KnownSeriesName(tt.name); got != tt.want {
			t.Errorf("KnownSeriesName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestVariableExpr(t *testing.T) {
	tests := []struct {
		name    string
		query   string // JSON of the variable's query field
		def     string
		want    string
		wantErr bool
	}{
		{name: "object", query: `{"query":"label_values(up{job=~\"$job\"}, instance)","refId":"A"}`, want: `up{job=~"$job"}`},
		{name: "text", query: `"label_values(sharecoord_state_log_size_bytes, job)"`, want: "sharecoord_state_log_size_bytes"},
		{name: "definition only", def: "query_result(sum(up))", want: "sum(up)"},
		{name: "label only", query: `"label_values(job)"`, want: ""},
		{name: "unsupported", query: `"metrics(sharecoord_.*)"`, wantErr: true},
		{name: "empty object", query: `{"refId":"A"}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Variable{Name: "v", Type: "query", Definition: tt.def}
			if tt.query != "" {
				v.Query = json.RawMessage(tt.query)
			}
			got, err := v.Expr()
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("Expr() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDashboardQueries(t *testing.T) {
	const dashboard = `{"uid":"u","title":"t","panels":[
	  {"id":1,"type":"row","title":"r","panels":[
	    {"id":2,"type":"timeseries","title":"inner","targets":[{"refId":"A","expr":"a_total"}]}]},
	  {"id":3,"type":"timeseries","title":"outer","targets":[
	    {"refId":"A","expr":"b_total"},{"refId":"B","expr":"hidden_total","hide":true}]}],
	  "templating":{"list":[
	    {"name":"datasource","type":"datasource","query":"prometheus"},
	    {"name":"job","type":"query","query":"label_values(c_total, job)"}]}}`
	path := filepath.Join(t.TempDir(), "d.json")
	if err := os.WriteFile(path, []byte(dashboard), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := LoadDashboard(path)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := d.Queries()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range qs {
		got = append(got, q.Source+" = "+q.Expr)
	}
	want := []string{
		`panel 2 "inner" A = a_total`,
		`panel 3 "outer" A = b_total`,
		`variable job = c_total`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("queries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLoadRulesIsStrict(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		alerts  int
		wantErr bool
	}{
		{name: "valid", text: "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n  - record: r\n    expr: up\n", alerts: 1},
		{name: "unknown field", text: "groups:\n- name: g\n  rules:\n  - alert: A\n    expression: up == 0\n", wantErr: true},
		{name: "duplicate field", text: "groups:\n- name: g\n  name: h\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(path, []byte(tt.text), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := LoadRules(path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if got := len(f.Alerts()); got != tt.alerts {
				t.Fatalf("%d alerts, want %d", got, tt.alerts)
			}
		})
	}
}

func TestGeneratePrometheusRule(t *testing.T) {
	path := filepath.Join(t.TempDir(), "alerts.yaml")
	text := "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    for: 5m\n    labels: {severity: critical}\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := GeneratePrometheusRule(path, "coordinatord")
	if err != nil {
		t.Fatal(err)
	}
	want := `# Code generated by cmd/rulegen from alerts.yaml. DO NOT EDIT.
# Edit alerts.yaml and run ` + "`go generate`" + ` in deploy/.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: coordinatord
spec:
  groups:
  - name: g
    rules:
    - alert: A
      expr: up == 0
      for: 5m
      labels:
        severity: critical
`
	if string(got) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

// TestExportedKindMatchesREADME keeps the list of exported families and the README's Metrics
// section in step: a metric added to the server is named in both or the check fails here,
// before the end-to-end scrape does.
func TestExportedKindMatchesREADME(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{} // families the README names
	var prefixes []string      // families it names as a group, as in sharecoord_state_log_*
	for _, field := range strings.FieldsFunc(string(readme), func(r rune) bool {
		return !(r == '_' || r == '*' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) {
		switch {
		case !strings.HasPrefix(field, "sharecoord_"):
		case strings.HasSuffix(field, "_*"):
			prefixes = append(prefixes, strings.TrimSuffix(field, "*"))
		default:
			named[field] = true
		}
	}
	for name := range named {
		if ExportedKind(name) == "" {
			t.Errorf("README names %s, which ExportedKind does not list", name)
		}
	}
	for family := range exportedKinds {
		if !strings.HasPrefix(family, "sharecoord_") || named[family] {
			continue
		}
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(family, p) }) {
			t.Errorf("ExportedKind lists %s, which the README does not name", family)
		}
	}
}
