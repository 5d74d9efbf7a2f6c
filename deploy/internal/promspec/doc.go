// Package promspec reads coordinatord's monitoring assets — the Prometheus alerting rules and the
// Grafana dashboard — and takes their PromQL apart. The deploy tests, the PrometheusRule
// generator (cmd/rulegen) and the live check against a Prometheus (cmd/promcheck) share it.
package promspec
