// Package deploy holds coordinatord's deployment assets and the tests that check them without a
// cluster or a container engine:
//
//   - ../Dockerfile and ../.dockerignore (dockerfile_test.go parses them with BuildKit's parser
//     and linter);
//   - base/ (kustomize base), overlays/example/ (an example overlay) and monitoring/ (a kustomize
//     component: ServiceMonitor, PrometheusRule, Grafana dashboard), which render_test.go
//     renders in-process and decodes strictly into the Kubernetes and prometheus-operator types;
//   - monitoring/alerts.yaml, the alerting rules, from which monitoring/prometheusrule.yaml is
//     generated (go generate) and whose promtool unit tests are monitoring/alerts_test.yaml.
//
// check.sh runs all of it; e2e-prometheus.sh checks the dashboard and alert queries against a
// real Prometheus scraping a running coordinatord.
package deploy

//go:generate go run ./cmd/rulegen -rules monitoring/alerts.yaml -out monitoring/prometheusrule.yaml
