# shellcheck shell=bash
# Shell functions shared by check.sh and e2e-prometheus.sh (sourced, not run).

# step prints a section heading.
step() { printf '\n== %s\n' "$*"; }

# run prints a command, then runs it.
run() {
	printf '+ %s\n' "$*"
	"$@"
}

# ensure_prometheus makes sure promtool and prometheus are on PATH, installing Debian's
# prometheus package when they are missing and apt-get is usable (as root).
ensure_prometheus() {
	if command -v promtool >/dev/null && command -v prometheus >/dev/null; then
		return 0
	fi
	if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
		echo "promtool/prometheus missing: install Debian's prometheus package (apt-get install prometheus)" >&2
		return 1
	fi
	run apt-get update -qq
	run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus
}
