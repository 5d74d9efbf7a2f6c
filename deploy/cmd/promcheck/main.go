package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/coordinatord/coordinatord/deploy/internal/promspec"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.prometheus, "prometheus", "http://127.0.0.1:9090", "base URL of the Prometheus to query")
	flag.StringVar(&cfg.dashboard, "dashboard", "monitoring/dashboard.json", "Grafana dashboard JSON")
	flag.StringVar(&cfg.rules, "rules", "monitoring/alerts.yaml", "Prometheus rules file")
	flag.StringVar(&cfg.interval, "rate-interval", "1m", "value of $__rate_interval, $__interval and $__range")
	flag.DurationVar(&cfg.lookback, "lookback", time.Hour, "how far back series are looked up")
	flag.DurationVar(&cfg.timeout, "timeout", 2*time.Minute, "time limit of the whole check")
	flag.BoolVar(&cfg.strict, "strict", false, "also fail on selectors that match no series and queries that return no data")
	flag.BoolVar(&cfg.ruleHealth, "rule-health", false, "also require every alert to be loaded by the Prometheus and to evaluate without error")
	flag.StringVar(&cfg.require, "require-data", "", "regular expression of metric names whose queries must return data (fail, not warn)")
	flag.StringVar(&cfg.job, "job", "coordinatord", "scrape job of the server, whose metrics must all be known to promspec")
	flag.Parse()
	failed, err := run(cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promcheck:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

type config struct {
	prometheus, dashboard, rules, interval, job string
	require                                     string
	lookback, timeout                           time.Duration
	strict, ruleHealth                          bool
}

// run checks every subject and reports to w; failed says whether any subject failed.
func run(cfg config, w io.Writer) (failed bool, err error) {
	base, err := url.Parse(cfg.prometheus)
	if err != nil {
		return false, fmt.Errorf("prometheus URL: %w", err)
	}
	dash, err := promspec.LoadDashboard(cfg.dashboard)
	if err != nil {
		return false, err
	}
	rules, err := promspec.LoadRules(cfg.rules)
	if err != nil {
		return false, err
	}
	subs, err := subjects(dash, rules)
	if err != nil {
		return false, err
	}
	var require *regexp.Regexp
	if cfg.require != "" {
		if require, err = regexp.Compile("^(?:" + cfg.require + ")$"); err != nil {
			return false, fmt.Errorf("-require-data: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	now := time.Now()
	c := &checker{
		api:      promAPI{base: base, client: &http.Client{Timeout: 30 * time.Second}},
		interval: cfg.interval,
		start:    now.Add(-cfg.lookback),
		end:      now,
		seen:     map[string]int{},
		require:  require,
	}
	health := map[string][]finding{} // by subject source
	if cfg.ruleHealth {
		findings, err := c.ruleHealth(ctx, rules)
		if err != nil {
			return false, err
		}
		for _, f := range findings {
			health[f.source] = append(health[f.source], f)
		}
	}
	passed, failures := 0, 0
	for _, s := range subs {
		findings, err := c.check(ctx, s)
		if err != nil {
			return false, err
		}
		findings = append(findings, health[s.source]...)
		bad := false
		for _, f := range findings {
			level := "WARN"
			if f.fatal || cfg.strict {
				level, bad = "FAIL", true
			}
			fmt.Fprintf(w, "%s %s: %s\n", level, f.source, f.problem)
		}
		if bad {
			failures++
			continue
		}
		passed++
		fmt.Fprintf(w, "ok   %s\n", s.source)
	}
	unknown, err := c.unknownNames(ctx, cfg.job)
	if err != nil {
		return false, err
	}
	if len(unknown) > 0 {
		failures++
		fmt.Fprintf(w, "FAIL exported metrics of job %q: not in promspec.ExportedKind: %s\n", cfg.job, strings.Join(unknown, ", "))
	} else {
		passed++
		fmt.Fprintf(w, "ok   exported metrics of job %q\n", cfg.job)
	}
	fmt.Fprintf(w, "promcheck: %d passed, %d failed\n", passed, failures)
	return failures > 0, nil
}
