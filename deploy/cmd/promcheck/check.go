package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/coordinatord/coordinatord/deploy/internal/promspec"
)

// subject is one expression to check: a dashboard query (evaluated) or an alert expression
// (only its selectors are looked up: an alert that is not firing returns nothing by design).
type subject struct {
	source   string
	expr     string
	evaluate bool
}

// finding is one problem found. A fatal finding fails the check; the others are printed as
// warnings unless the check is strict.
type finding struct {
	source  string
	problem string
	fatal   bool
}

// prometheusSeries are series Prometheus itself writes with the job's labels: those of every
// scrape, and the state of firing alerts.
var prometheusSeries = map[string]bool{
	"scrape_duration_seconds": true, "scrape_samples_scraped": true, "scrape_samples_post_metric_relabeling": true,
	"scrape_series_added": true, "ALERTS": true, "ALERTS_FOR_STATE": true,
}

// unknownNames returns the metric names of job's series that promspec does not know, sorted.
func (c *checker) unknownNames(ctx context.Context, job string) ([]string, error) {
	names, err := c.api.names(ctx, fmt.Sprintf("{job=%q}", job), c.start, c.end)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("job %q has no series: is it the server's scrape job?", job)
	}
	var unknown []string
	for _, n := range names {
		if !prometheusSeries[n] && !promspec.KnownSeriesName(n) {
			unknown = append(unknown, n)
		}
	}
	slices.Sort(unknown)
	return unknown, nil
}

// checker checks subjects against one Prometheus, looking each selector up once.
type checker struct {
	api      promAPI
	interval string
	start    time.Time
	end      time.Time
	seen     map[string]int // selector → series count
	// require matches the metrics whose queries must return data: their findings are fatal.
	require *regexp.Regexp
}

// check returns the findings for s: unparsable PromQL, a metric with no series at all or a
// failing query are fatal; a selector whose label matchers match no series, a query that returns
// no data, or a metric the server exports only in another configuration (TLS) are not (under a
// short load some label values never occur).
func (c *checker) check(ctx context.Context, s subject) ([]finding, error) {
	expr := promspec.Expand(s.expr, c.interval)
	selectors, err := promspec.Selectors(expr)
	if err != nil {
		return []finding{{source: s.source, problem: err.Error(), fatal: true}}, nil
	}
	required := false // a query of the metrics that must have data (-require-data)
	for _, sel := range selectors {
		required = required || (c.require != nil && c.require.MatchString(sel.Metric))
	}
	var out []finding
	for _, sel := range selectors {
		byName := fmt.Sprintf("{__name__=%q}", sel.Metric)
		n, err := c.count(ctx, byName)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			if cond := promspec.OnlyWith(sel.Metric); cond != "" {
				// Not fatal (the server checked may run without it), but never silent.
				out = append(out, finding{source: s.source, problem: fmt.Sprintf("metric %s has no series (exported only with %s)", sel.Metric, cond), fatal: required})
				continue
			}
			out = append(out, finding{source: s.source, problem: fmt.Sprintf("metric %s has no series", sel.Metric), fatal: true})
			continue
		}
		if n, err = c.count(ctx, sel.String()); err != nil {
			return nil, err
		}
		if n == 0 {
			out = append(out, finding{source: s.source, problem: fmt.Sprintf("selector %s matches no series", sel), fatal: required})
		}
	}
	if !s.evaluate {
		return out, nil
	}
	n, err := c.api.query(ctx, expr)
	if err != nil {
		return append(out, finding{source: s.source, problem: fmt.Sprintf("query %q failed: %v", expr, err), fatal: true}), nil
	}
	if n == 0 {
		out = append(out, finding{source: s.source, problem: fmt.Sprintf("query %q returned no data", expr), fatal: required})
	}
	return out, nil
}

func (c *checker) count(ctx context.Context, selector string) (int, error) {
	if n, ok := c.seen[selector]; ok {
		return n, nil
	}
	n, err := c.api.series(ctx, selector, c.start, c.end)
	if err != nil {
		return 0, fmt.Errorf("look up series %s: %w", selector, err)
	}
	c.seen[selector] = n
	return n, nil
}

// ruleHealth returns a fatal finding for every alert of the rules file that Prometheus has not
// loaded or whose last evaluation failed (an error such as many-to-many matching shows only on
// real series).
func (c *checker) ruleHealth(ctx context.Context, rules promspec.RulesFile) ([]finding, error) {
	loaded, err := c.api.rules(ctx)
	if err != nil {
		return nil, fmt.Errorf("list loaded rules: %w", err)
	}
	byName := map[string]ruleState{}
	for _, r := range loaded {
		if r.Type == "alerting" {
			byName[r.Name] = r
		}
	}
	var out []finding
	for _, a := range rules.Alerts() {
		r, ok := byName[a.Alert]
		switch {
		case !ok:
			out = append(out, finding{source: "alert " + a.Alert, problem: "not loaded by Prometheus", fatal: true})
		case r.Health == "err":
			out = append(out, finding{source: "alert " + a.Alert, problem: "evaluation failed: " + r.LastError, fatal: true})
		}
	}
	return out, nil
}

// subjects lists every dashboard query (evaluated) and every alert expression (selectors only).
func subjects(d promspec.Dashboard, rules promspec.RulesFile) ([]subject, error) {
	queries, err := d.Queries()
	if err != nil {
		return nil, err
	}
	var out []subject
	for _, q := range queries {
		out = append(out, subject{source: "dashboard " + q.Source, expr: q.Expr, evaluate: true})
	}
	for _, a := range rules.Alerts() {
		out = append(out, subject{source: "alert " + a.Alert, expr: a.Expr.String()})
	}
	return out, nil
}
