// Command promcheck checks the Grafana dashboard and the alert rules against a live Prometheus
// that scrapes coordinatord: every dashboard query must run, and no query or alert expression
// may name a metric that has no series. It prints one line per expression and a closing
// "promcheck: N passed, N failed" line, and exits 1 if any expression failed.
//
//	promcheck -prometheus http://127.0.0.1:9090 -dashboard monitoring/dashboard.json -rules monitoring/alerts.yaml
//
// With -strict, selectors whose label matchers match no series and queries that return no data
// fail too; without it they are reported as warnings. With -rule-health, every alert must also
// be loaded by that Prometheus (as a rule file) and its last evaluation must have succeeded.
// Every metric the scrape job (-job) exports must be one that promspec knows, so that its list,
// against which dashboards and alerts are checked offline, cannot fall behind the server.
package main
