package deploy

import (
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/deploy/internal/promspec"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

func TestAlertRules(t *testing.T) {
	rules, err := promspec.LoadRules(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules.Alerts()) == 0 {
		t.Fatalf("%s has no alerts", rulesPath)
	}
	anchors, err := runbookAnchors(operationsPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range alertProblems(rules, anchors) {
		t.Error(p)
	}
	tests, err := loadPromtoolTests(rulesTestPath)
	if err != nil {
		t.Fatal(err)
	}
	missing, err := untestedAlerts(rules, tests)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("alerts without a promtool test that fires and clears them in %s: %v", rulesTestPath, missing)
	}
}

func TestAlertProblems(t *testing.T) {
	good := monitoringv1.Rule{
		Alert:  "X",
		Expr:   intstr.FromString(`up{job="coordinatord"} == 0`),
		Labels: map[string]string{"severity": "critical"},
		Annotations: map[string]string{
			"summary": "s", "description": "d", "runbook_url": runbookURLPrefix + "x",
		},
	}
	anchors := map[string]bool{"x": true}
	tests := []struct {
		name   string
		mutate func(r *monitoringv1.Rule)
		want   string // "" for no problem
	}{
		{name: "good", mutate: func(*monitoringv1.Rule) {}},
		{name: "unknown anchor", mutate: func(r *monitoringv1.Rule) { r.Annotations["runbook_url"] = runbookURLPrefix + "y" }, want: "not a heading"},
		{name: "other document", mutate: func(r *monitoringv1.Rule) { r.Annotations["runbook_url"] = "https://example.com/#x" }, want: "does not start"},
		{name: "no severity", mutate: func(r *monitoringv1.Rule) { delete(r.Labels, "severity") }, want: "severity"},
		{name: "no summary", mutate: func(r *monitoringv1.Rule) { delete(r.Annotations, "summary") }, want: "no summary"},
		{name: "unexported metric", mutate: func(r *monitoringv1.Rule) { r.Expr = intstr.FromString("sharecoord_writes_total > 0") }, want: "does not export"},
		{name: "histogram without suffix", mutate: func(r *monitoringv1.Rule) {
			r.Expr = intstr.FromString("rate(sharecoord_fsync_duration_seconds[5m]) > 0")
		}, want: "does not export"},
		{name: "bad PromQL", mutate: func(r *monitoringv1.Rule) { r.Expr = intstr.FromString("rate(up[5m] > 0") }, want: "parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good.DeepCopy()
			tt.mutate(r)
			problems := alertProblems(promspec.RulesFile{Groups: []monitoringv1.RuleGroup{{Name: "g", Rules: []monitoringv1.Rule{*r}}}}, anchors)
			checkProblems(t, problems, tt.want)
		})
	}
}

func TestUntestedAlerts(t *testing.T) {
	rules := promspec.RulesFile{Groups: []monitoringv1.RuleGroup{{Name: "g", Rules: []monitoringv1.Rule{{Alert: "A"}}}}}
	tests := []struct {
		name  string
		yaml  string
		wantA bool // whether A is reported untested
	}{
		{name: "fires and clears", yaml: `tests: [{alert_rule_test: [{eval_time: 1m, alertname: A, exp_alerts: [{exp_labels: {}}]}, {eval_time: 5m, alertname: A, exp_alerts: []}]}]`},
		{name: "clears before firing only", wantA: true, yaml: `tests: [{alert_rule_test: [{eval_time: 5m, alertname: A, exp_alerts: [{exp_labels: {}}]}, {eval_time: 1m, alertname: A, exp_alerts: []}]}]`},
		{name: "only fires", wantA: true, yaml: `tests: [{alert_rule_test: [{eval_time: 1m, alertname: A, exp_alerts: [{exp_labels: {}}]}]}]`},
		{name: "other alert", wantA: true, yaml: `tests: [{alert_rule_test: [{eval_time: 1m, alertname: B, exp_alerts: [{exp_labels: {}}]}, {eval_time: 5m, alertname: B, exp_alerts: []}]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pt promtoolTests
			if err := yaml.Unmarshal([]byte(tt.yaml), &pt); err != nil {
				t.Fatal(err)
			}
			missing, err := untestedAlerts(rules, pt)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(missing) == 1; got != tt.wantA {
				t.Fatalf("untested %v, want A reported: %v", missing, tt.wantA)
			}
		})
	}
}

func TestDashboard(t *testing.T) {
	d, err := promspec.LoadDashboard(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dashboardProblems(d) {
		t.Error(p)
	}
	queries, err := d.Queries()
	if err != nil {
		t.Fatal(err)
	}
	// The panels the operators' guide promises, by the metrics they read.
	for _, metric := range []string{
		"sharecoord_write_latency_seconds_bucket", "grpc_server_handling_seconds_bucket",
		"grpc_server_handled_total", "sharecoord_group_records_appended_total",
		"sharecoord_state_log_size_bytes", "sharecoord_state_log_start_offset",
		"sharecoord_state_log_end_offset", "sharecoord_last_pruned_offset",
		"sharecoord_partition_load_seconds", "sharecoord_state_operations_total",
		"sharecoord_fsync_duration_seconds_bucket", "sharecoord_commit_batch_records_bucket",
		"sharecoord_share_partitions",
	} {
		found := false
		for _, q := range queries {
			found = found || strings.Contains(q.Expr, metric)
		}
		if !found {
			t.Errorf("no dashboard query reads %s", metric)
		}
	}
}

func TestDashboardProblems(t *testing.T) {
	panel := func(id int, exprs ...string) promspec.Panel {
		p := promspec.Panel{ID: id, Title: "p", Type: "timeseries"}
		for _, e := range exprs {
			p.Targets = append(p.Targets, promspec.Target{RefID: "A", Expr: e})
		}
		return p
	}
	tests := []struct {
		name   string
		panels []promspec.Panel
		want   string
	}{
		{name: "good", panels: []promspec.Panel{{ID: 1, Type: "row"}, panel(2, `sum(rate(sharecoord_records_appended_total{job=~"$job"}[$__rate_interval]))`)}},
		{name: "panel without query", panels: []promspec.Panel{panel(1)}, want: "no queries"},
		{name: "duplicate id", panels: []promspec.Panel{panel(1, "up"), panel(1, "up")}, want: "used twice"},
		{name: "undefined variable", panels: []promspec.Panel{panel(1, `up{instance=~"$node"}`)}, want: "undefined variable"},
		{name: "unknown metric", panels: []promspec.Panel{panel(1, "sharecoord_write_latency_seconds")}, want: "does not export"},
		{name: "nested in a collapsed row", panels: []promspec.Panel{{ID: 1, Type: "row", Panels: []promspec.Panel{panel(2, "nope_total")}}}, want: "does not export"},
		{name: "bad PromQL", panels: []promspec.Panel{panel(1, "sum(up")}, want: "parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := promspec.Dashboard{UID: "u", Title: "t", Panels: tt.panels}
			d.Templating.List = []promspec.Variable{{Name: "job", Type: "custom"}}
			checkProblems(t, dashboardProblems(d), tt.want)
		})
	}
}

// checkProblems fails t unless problems is empty when want is "", or its first problem contains
// want otherwise.
func checkProblems(t *testing.T, problems []error, want string) {
	t.Helper()
	if want == "" {
		if len(problems) != 0 {
			t.Fatalf("problems %v, want none", problems)
		}
		return
	}
	if len(problems) == 0 || !strings.Contains(problems[0].Error(), want) {
		t.Fatalf("problems %v, want one containing %q", problems, want)
	}
}

func TestGithubAnchor(t *testing.T) {
	tests := []struct{ title, want string }{
		{"CoordinatordDown", "coordinatorddown"},
		{"Upgrading past the 200 floor", "upgrading-past-the-200-floor"},
		{"Backup and inspection: `dump-log`", "backup-and-inspection-dump-log"},
		{"Tuning per-group snapshot limits", "tuning-per-group-snapshot-limits"},
	}
	for _, tt := range tests {
		if got := githubAnchor(tt.title); got != tt.want {
			t.Errorf("githubAnchor(%q) = %q, want %q", tt.title, got, tt.want)
		}
	}
}
