package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/coordinatord/coordinatord/deploy/internal/promspec"
)

func main() {
	rules := flag.String("rules", "monitoring/alerts.yaml", "Prometheus rules file to read")
	out := flag.String("out", "monitoring/prometheusrule.yaml", "PrometheusRule manifest to write")
	name := flag.String("name", "coordinatord", "metadata.name of the PrometheusRule")
	flag.Parse()
	if err := run(*rules, *out, *name); err != nil {
		fmt.Fprintln(os.Stderr, "rulegen:", err)
		os.Exit(1)
	}
}

func run(rulesPath, outPath, name string) error {
	data, err := promspec.GeneratePrometheusRule(rulesPath, name)
	if err != nil {
		return err
	}
	if err := os.WriteFile(outPath, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Clean(outPath), err)
	}
	return nil
}
