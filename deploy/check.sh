#!/usr/bin/env bash
# Checks coordinatord's deployment assets without a cluster or a container engine:
#   1. go vet and go test of the deploy module (Dockerfile lint and properties, kustomize
#      rendering decoded strictly into the Kubernetes and prometheus-operator types, probes,
#      ports, volumes, ServiceMonitor, PrometheusRule, runbook links, Grafana dashboard);
#   2. `kustomize build` of the base and the example overlay with the kustomize CLI
#      (installed with `go install` into bin/tools when missing);
#   3. `promtool check rules` and `promtool test rules` on the alert rules (promtool comes from
#      Debian's prometheus package, installed with apt-get when missing and apt-get is usable).
# Usage: deploy/check.sh   (from any directory)
set -euo pipefail

KUSTOMIZE_VERSION=v5.8.2 # the newest kustomize that builds with Go 1.26

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
tools="$root/bin/tools"
cd "$here"

# shellcheck source=lib.sh
. ./lib.sh

step "deploy module: go vet, go test"
run go vet ./...
run go test -count=1 ./...

step "kustomize build"
kustomize=${KUSTOMIZE:-$tools/kustomize}
if [ ! -x "$kustomize" ] || [ "$("$kustomize" version 2>/dev/null)" != "$KUSTOMIZE_VERSION" ]; then
	run env GOBIN="$tools" go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
	kustomize=$tools/kustomize
fi
for dir in base overlays/example; do
	printf '+ %s build %s\n' "$kustomize" "$dir"
	out=$("$kustomize" build "$dir")
	printf '  %s: %s objects (%s)\n' "$dir" "$(grep -c '^kind:' <<<"$out")" \
		"$(grep '^kind:' <<<"$out" | sed 's/^kind: //' | sort | uniq -c | awk '{printf "%s%s %s", sep, $1, $2; sep=", "}')"
done

step "promtool"
ensure_prometheus
run promtool --version
run promtool check rules monitoring/alerts.yaml
(cd monitoring && run promtool test rules alerts_test.yaml)

printf '\ndeploy/check.sh: all checks passed\n'
