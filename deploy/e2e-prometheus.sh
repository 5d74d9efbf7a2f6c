#!/usr/bin/env bash
# End-to-end check of the dashboard and the alerts against a real Prometheus:
#   1. starts coordinatord ($COORDINATORD_BIN, built from ../cmd/coordinatord when unset) on
#      127.0.0.1 with a temporary data directory and the base properties file;
#   2. starts Prometheus (Debian's package) on 127.0.0.1, scraping the metrics port as job
#      "coordinatord" every 2 s and loading monitoring/alerts.yaml;
#   3. runs a short load with `coordinatord bench load`;
#   4. runs cmd/promcheck: every dashboard query must run, no dashboard query or alert expression
#      may name a metric without series, every alert must be loaded and evaluate cleanly, and
#      every metric the server exports must be in promspec's list the offline checks use;
#   5. stops coordinatord with SIGTERM and reports how it exited;
#   6. does the same with a three-node cluster (gRPC ports GRPC_PORT+100, +110, +120, each with
#      its metrics and replication ports next to it) under `bench load --cluster`, where every
#      query of the cluster's metrics (sharecoord_raft_*) must return data.
# Only 127.0.0.1 is used. Ports: GRPC_PORT, METRICS_PORT, PROM_PORT (defaults 17070, 17071, 19090).
# Usage: COORDINATORD_BIN=/path/to/coordinatord deploy/e2e-prometheus.sh   (from any directory)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$here"
# shellcheck source=lib.sh
. ./lib.sh

GRPC_PORT=${GRPC_PORT:-17070}
METRICS_PORT=${METRICS_PORT:-17071}
PROM_PORT=${PROM_PORT:-19090}
SCRAPE_INTERVAL=2s
prom_url="http://127.0.0.1:$PROM_PORT"
metrics_url="http://127.0.0.1:$METRICS_PORT"

work=$(mktemp -d)
server_pid=""
prom_pid=""
cluster_pids=()
cleanup() {
	status=$?
	for pid in "$prom_pid" "$server_pid" "${cluster_pids[@]}"; do
		if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
		fi
	done
	if [ "$status" -ne 0 ]; then
		for log in "$work"/*.log; do
			[ -f "$log" ] || continue
			printf '\n--- last lines of %s\n' "$(basename "$log")"
			tail -n 40 "$log"
		done
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# wait_for waits up to $1 seconds for the command that follows to succeed, and gives up at once
# if coordinatord or Prometheus has exited.
wait_for() {
	local deadline=$((SECONDS + $1)) pid
	shift
	until "$@" >/dev/null 2>&1; do
		for pid in "$server_pid" "$prom_pid"; do
			if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
				echo "process $pid exited while waiting for: $*" >&2
				return 1
			fi
		done
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "timed out waiting for: $*" >&2
			return 1
		fi
		sleep 0.5
	done
}

# prom_value prints the first sample value of an instant query, or nothing.
prom_value() {
	curl -fsS --get "$prom_url/api/v1/query" --data-urlencode "query=$1" | jq -r '.data.result[0].value[1] // empty'
}

# scraped_at_least succeeds once Prometheus holds at least $1 successful scrapes of coordinatord.
scraped_at_least() {
	local n
	n=$(prom_value 'sum_over_time(up{job="coordinatord"}[10m])')
	[ -n "$n" ] && [ "${n%.*}" -ge "$1" ]
}

step "tools"
ensure_prometheus
for tool in curl jq; do command -v "$tool" >/dev/null || { echo "$tool is required" >&2; exit 1; }; done
bin=${COORDINATORD_BIN:-}
# Every COORDINATORD_* variable is a broker config to the server, which refuses unknown ones.
unset COORDINATORD_BIN
if [ -z "$bin" ]; then
	bin="$work/coordinatord"
	(cd "$root" && run go build -trimpath -o "$bin" ./cmd/coordinatord)
fi
# The load to run; adjust here if the bench subcommand's flags change.
LOAD=("$bin" bench load --target "127.0.0.1:$GRPC_PORT" --duration 20s --concurrency 8)

step "coordinatord"
run "$bin" check-config --config base/coordinatord.properties
serve=("$bin" --config base/coordinatord.properties --data-dir "$work/data"
	--listen "127.0.0.1:$GRPC_PORT" --metrics-listen "127.0.0.1:$METRICS_PORT")
printf '+ %s &\n' "${serve[*]}"
"${serve[@]}" >"$work/coordinatord.log" 2>&1 &
server_pid=$!
wait_for 120 curl -fsS "$metrics_url/readyz"
echo "coordinatord (pid $server_pid) is ready on 127.0.0.1:$GRPC_PORT, metrics on $metrics_url"

step "prometheus"
cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: $SCRAPE_INTERVAL
  evaluation_interval: $SCRAPE_INTERVAL
rule_files:
  - $here/monitoring/alerts.yaml
scrape_configs:
  - job_name: coordinatord
    static_configs:
      - targets: ["127.0.0.1:$METRICS_PORT"]
YAML
run promtool check config "$work/prometheus.yml"
prom=(prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb"
	--web.listen-address="127.0.0.1:$PROM_PORT")
printf '+ %s &\n' "${prom[*]}"
"${prom[@]}" >"$work/prometheus.log" 2>&1 &
prom_pid=$!
wait_for 60 curl -fsS "$prom_url/-/ready"
wait_for 60 scraped_at_least 1
echo "prometheus (pid $prom_pid) scrapes coordinatord"

step "load"
run "${LOAD[@]}" 2>&1 | tee "$work/load.log"
# Let the scrapes after the load land: rate() over the dashboard's 1m window then covers it.
before=$(prom_value 'sum_over_time(up{job="coordinatord"}[10m])')
wait_for 30 scraped_at_least $((${before%.*} + 3))

step "dashboard queries and alert expressions"
run go run ./cmd/promcheck -prometheus "$prom_url" -dashboard monitoring/dashboard.json \
	-rules monitoring/alerts.yaml -rate-interval 1m -rule-health

step "shutdown"
kill -TERM "$server_pid"
set +e
wait "$server_pid"
exit_status=$?
set -e
server_pid=""
echo "coordinatord exited with status $exit_status after SIGTERM"
if [ "$exit_status" -ne 0 ]; then
	echo "a graceful shutdown should exit 0" >&2
	exit 1
fi

step "cluster: three nodes"
# The cluster's queries (the sharecoord_raft_* metrics) must all return data here: a second
# Prometheus scrapes three nodes on 127.0.0.1 under a load that goes through each partition's
# leader.
kill -TERM "$prom_pid"
wait "$prom_pid" 2>/dev/null || true
prom_pid=""
initial="1=127.0.0.1:$((GRPC_PORT + 102)),2=127.0.0.1:$((GRPC_PORT + 112)),3=127.0.0.1:$((GRPC_PORT + 122))"
targets=()
for id in 1 2 3; do
	base=$((GRPC_PORT + 90 + 10 * id))
	node=("$bin" --config base/coordinatord.properties --data-dir "$work/node$id" --node-id "$id"
		--listen "127.0.0.1:$base" --metrics-listen "127.0.0.1:$((base + 1))" --raft-listen "127.0.0.1:$((base + 2))"
		--initial-cluster "$initial")
	printf '+ %s &\n' "${node[*]}"
	"${node[@]}" >"$work/node$id.log" 2>&1 &
	cluster_pids+=("$!")
	targets+=("\"127.0.0.1:$((base + 1))\"")
done
server_pid="${cluster_pids[0]}"
for id in 1 2 3; do
	wait_for 120 curl -fsS "http://127.0.0.1:$((GRPC_PORT + 91 + 10 * id))/readyz"
done
echo "three nodes are ready"
sed -e "s|targets: \[\"127.0.0.1:$METRICS_PORT\"\]|targets: [$(IFS=,; echo "${targets[*]}")]|" \
	"$work/prometheus.yml" >"$work/prometheus-cluster.yml"
run promtool check config "$work/prometheus-cluster.yml"
prom=(prometheus --config.file="$work/prometheus-cluster.yml" --storage.tsdb.path="$work/tsdb-cluster"
	--web.listen-address="127.0.0.1:$PROM_PORT")
printf '+ %s &\n' "${prom[*]}"
"${prom[@]}" >"$work/prometheus-cluster.log" 2>&1 &
prom_pid=$!
wait_for 60 curl -fsS "$prom_url/-/ready"
wait_for 60 scraped_at_least 3
run "$bin" bench load --cluster --target "127.0.0.1:$((GRPC_PORT + 100))" --phases write --duration 15s \
	--concurrency 8 2>&1 | tee "$work/load-cluster.log"
before=$(prom_value 'sum_over_time(up{job="coordinatord"}[10m])')
wait_for 30 scraped_at_least $((${before%.*} + 9))
run go run ./cmd/promcheck -prometheus "$prom_url" -dashboard monitoring/dashboard.json \
	-rules monitoring/alerts.yaml -rate-interval 1m -rule-health -require-data 'sharecoord_raft_.*'
for pid in "${cluster_pids[@]}"; do
	kill -TERM "$pid"
done
for pid in "${cluster_pids[@]}"; do
	wait "$pid" || { echo "a cluster node exited with status $? after SIGTERM" >&2; exit 1; }
done
server_pid=""
echo "the three nodes stopped"

printf '\ndeploy/e2e-prometheus.sh: passed\n'
