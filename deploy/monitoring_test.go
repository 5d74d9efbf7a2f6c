package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/coordinatord/coordinatord/deploy/internal/promspec"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// Files of the monitoring component and the runbook they link to.
const (
	rulesPath          = "monitoring/alerts.yaml"
	rulesTestPath      = "monitoring/alerts_test.yaml"
	prometheusRulePath = "monitoring/prometheusrule.yaml"
	dashboardPath      = "monitoring/dashboard.json"
	operationsPath     = "../docs/operations.md"
	runbookURLPrefix   = "https://github.com/coordinatord/coordinatord/blob/main/docs/operations.md#"
	alertJob           = "coordinatord" // the job label the alert rules select on
	prometheusRuleName = "coordinatord"
)

// monitoringChecks hold for every deployment that includes the monitoring component.
func monitoringChecks() []check {
	return []check{
		{"ServiceMonitor selects the client Service", checkServiceMonitor},
		{"PrometheusRule carries the alert rules", checkPrometheusRule},
		{"dashboard ConfigMap", checkDashboardConfigMap},
	}
}

// checkServiceMonitor: each ServiceMonitor selects exactly one Service (in its namespace), by a
// port name that Service has, and sets job="coordinatord" as the alert rules expect.
func checkServiceMonitor(m *manifests) error {
	if len(m.serviceMonitors) != 1 {
		return fmt.Errorf("%d ServiceMonitors, want 1", len(m.serviceMonitors))
	}
	sm := m.serviceMonitors[0]
	sel, err := labelSelector(&sm.Spec.Selector)
	if err != nil {
		return fmt.Errorf("ServiceMonitor %s: %w", sm.Name, err)
	}
	if !sm.Spec.NamespaceSelector.Any && len(sm.Spec.NamespaceSelector.MatchNames) > 0 {
		return fmt.Errorf("ServiceMonitor %s must watch its own namespace, not %v", sm.Name, sm.Spec.NamespaceSelector.MatchNames)
	}
	var selected []string
	for _, s := range m.services {
		if s.Namespace != sm.Namespace || !sel.Matches(labels.Set(s.Labels)) {
			continue
		}
		selected = append(selected, s.Name)
		if s.Labels[sm.Spec.JobLabel] != alertJob {
			return fmt.Errorf("ServiceMonitor %s jobLabel %q gives job=%q on Service %s, want %q (alerts.yaml selects on it)",
				sm.Name, sm.Spec.JobLabel, s.Labels[sm.Spec.JobLabel], s.Name, alertJob)
		}
		if len(sm.Spec.Endpoints) == 0 {
			return fmt.Errorf("ServiceMonitor %s has no endpoints", sm.Name)
		}
		for _, ep := range sm.Spec.Endpoints {
			if ep.Port == "" {
				return fmt.Errorf("ServiceMonitor %s endpoint names no port", sm.Name)
			}
			found := false
			for _, p := range s.Spec.Ports {
				found = found || p.Name == ep.Port
			}
			if !found {
				return fmt.Errorf("ServiceMonitor %s endpoint port %q is not a port name of Service %s", sm.Name, ep.Port, s.Name)
			}
		}
	}
	if len(selected) != 1 {
		return fmt.Errorf("ServiceMonitor %s selects Services %v, want exactly one (the client Service)", sm.Name, selected)
	}
	return nil
}

// checkPrometheusRule: the rendered PrometheusRule's groups equal alerts.yaml.
func checkPrometheusRule(m *manifests) error {
	want, err := promspec.LoadRules(rulesPath)
	if err != nil {
		return err
	}
	if len(m.rules) != 1 {
		return fmt.Errorf("%d PrometheusRules, want 1", len(m.rules))
	}
	if !equality.Semantic.DeepEqual(m.rules[0].Spec.Groups, want.Groups) {
		return fmt.Errorf("PrometheusRule %s groups differ from %s: run go generate", m.rules[0].Name, rulesPath)
	}
	return nil
}

// checkDashboardConfigMap: the Grafana sidecar's ConfigMap holds exactly dashboard.json.
func checkDashboardConfigMap(m *manifests) error {
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		return err
	}
	var found int
	for _, cm := range m.configMaps {
		if cm.Labels["grafana_dashboard"] != "1" {
			continue
		}
		found++
		if len(cm.Data) != 1 {
			return fmt.Errorf("dashboard ConfigMap %s has %d keys, want 1", cm.Name, len(cm.Data))
		}
		for key, text := range cm.Data {
			if !strings.HasSuffix(key, ".json") {
				return fmt.Errorf("dashboard ConfigMap %s key %q does not end in .json", cm.Name, key)
			}
			if text != string(raw) {
				return fmt.Errorf("dashboard ConfigMap %s key %s differs from %s", cm.Name, key, dashboardPath)
			}
		}
	}
	if found != 1 {
		return fmt.Errorf("%d ConfigMaps labelled grafana_dashboard=1, want 1", found)
	}
	return nil
}

// runbookAnchors returns the GitHub anchor of every heading of the Markdown file at path.
func runbookAnchors(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	inFence := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		anchors[githubAnchor(title)] = true
	}
	return anchors, sc.Err()
}

var anchorDrop = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)

// githubAnchor returns the fragment GitHub gives a heading: lower case, punctuation other than
// hyphens and underscores removed, spaces turned into hyphens.
func githubAnchor(title string) string {
	title = strings.ReplaceAll(title, "`", "")
	return strings.ReplaceAll(anchorDrop.ReplaceAllString(strings.ToLower(title), ""), " ", "-")
}

// alertProblems lists what is wrong with the alert rules: a missing severity, summary,
// description or runbook, a runbook anchor that is not a heading of the operations guide, a
// selector of a metric the server does not export, or a metric-less selector.
func alertProblems(rules promspec.RulesFile, anchors map[string]bool) []error {
	var problems []error
	severities := map[string]bool{"critical": true, "warning": true, "info": true}
	for _, a := range rules.Alerts() {
		if !severities[a.Labels["severity"]] {
			problems = append(problems, fmt.Errorf("alert %s: severity %q, want critical, warning or info", a.Alert, a.Labels["severity"]))
		}
		for _, key := range []string{"summary", "description"} {
			if strings.TrimSpace(a.Annotations[key]) == "" {
				problems = append(problems, fmt.Errorf("alert %s has no %s", a.Alert, key))
			}
		}
		anchor, ok := strings.CutPrefix(a.Annotations["runbook_url"], runbookURLPrefix)
		switch {
		case !ok:
			problems = append(problems, fmt.Errorf("alert %s: runbook_url %q does not start with %s", a.Alert, a.Annotations["runbook_url"], runbookURLPrefix))
		case !anchors[anchor]:
			problems = append(problems, fmt.Errorf("alert %s: runbook anchor #%s is not a heading of %s", a.Alert, anchor, operationsPath))
		}
		selectors, err := promspec.Selectors(a.Expr.String())
		if err != nil {
			problems = append(problems, fmt.Errorf("alert %s: %w", a.Alert, err))
		}
		for _, s := range selectors {
			if !promspec.KnownSeriesName(s.Metric) {
				problems = append(problems, fmt.Errorf("alert %s reads %s, which coordinatord does not export", a.Alert, s.Metric))
			}
		}
	}
	return problems
}

// dashboardProblems lists what is wrong with the dashboard: no uid or title, duplicate panel
// ids, a panel without queries, a query that does not parse after variable expansion, an
// undefined variable, or a metric the server does not export.
func dashboardProblems(d promspec.Dashboard) []error {
	var problems []error
	if d.UID == "" || d.Title == "" {
		problems = append(problems, errors.New("dashboard has no uid or title"))
	}
	ids := map[int]bool{}
	for _, p := range d.AllPanels() {
		if ids[p.ID] {
			problems = append(problems, fmt.Errorf("panel id %d used twice", p.ID))
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		queries := 0
		for _, t := range p.Targets {
			if strings.TrimSpace(t.Expr) != "" && !t.Hide {
				queries++
			}
		}
		if queries == 0 {
			problems = append(problems, fmt.Errorf("panel %d %q has no queries", p.ID, p.Title))
		}
	}
	defined := map[string]bool{}
	for _, v := range d.Templating.List {
		defined[v.Name] = true
	}
	queries, err := d.Queries()
	if err != nil {
		return append(problems, err)
	}
	variable := regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)`)
	for _, q := range queries {
		for _, m := range variable.FindAllStringSubmatch(q.Expr, -1) {
			if !defined[m[1]] && !strings.HasPrefix(m[1], "__") {
				problems = append(problems, fmt.Errorf("%s uses undefined variable $%s", q.Source, m[1]))
			}
		}
		selectors, err := promspec.Selectors(promspec.Expand(q.Expr, "5m"))
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", q.Source, err))
		}
		for _, s := range selectors {
			if !promspec.KnownSeriesName(s.Metric) {
				problems = append(problems, fmt.Errorf("%s reads %s, which coordinatord does not export", q.Source, s.Metric))
			}
		}
	}
	return problems
}

// promtoolTests is the part of a promtool rule-test file that the coverage check reads.
type promtoolTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			EvalTime  string            `json:"eval_time"`
			AlertName string            `json:"alertname"`
			ExpAlerts []json.RawMessage `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// untestedAlerts returns the alerts of rules that the promtool tests do not both fire (a
// non-empty exp_alerts) and clear (an empty exp_alerts at a later eval_time of the same test).
func untestedAlerts(rules promspec.RulesFile, tests promtoolTests) ([]string, error) {
	covered := map[string]bool{}
	for _, tc := range tests.Tests {
		firedAt := map[string]model.Duration{}
		for _, at := range tc.AlertRuleTest {
			t, err := model.ParseDuration(at.EvalTime)
			if err != nil {
				return nil, fmt.Errorf("test %q: eval_time %q: %w", tc.Name, at.EvalTime, err)
			}
			if len(at.ExpAlerts) > 0 {
				if first, ok := firedAt[at.AlertName]; !ok || t < first {
					firedAt[at.AlertName] = t
				}
			}
		}
		for _, at := range tc.AlertRuleTest {
			t, _ := model.ParseDuration(at.EvalTime)
			if first, ok := firedAt[at.AlertName]; ok && len(at.ExpAlerts) == 0 && t > first {
				covered[at.AlertName] = true
			}
		}
	}
	var missing []string
	for _, a := range rules.Alerts() {
		if !covered[a.Alert] {
			missing = append(missing, a.Alert)
		}
	}
	return missing, nil
}

func loadPromtoolTests(path string) (promtoolTests, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return promtoolTests{}, err
	}
	var t promtoolTests
	// Not strict: promtool's format has many fields this check does not need.
	if err := yaml.Unmarshal(data, &t); err != nil {
		return promtoolTests{}, fmt.Errorf("decode %s: %w", path, err)
	}
	return t, nil
}
