// Command rulegen writes the prometheus-operator PrometheusRule of the monitoring component from
// the Prometheus rules file, so that the alerts have one source:
//
//	go run ./cmd/rulegen -rules monitoring/alerts.yaml -out monitoring/prometheusrule.yaml
package main
