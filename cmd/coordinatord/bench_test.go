package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/loadgen"
	"github.com/coordinatord/coordinatord/internal/testcert"
)

// runBench runs the command line in this process and returns stdout, stderr and the exit status.
func runBench(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := run(ctx, args, env{stdout: &stdout, stderr: &stderr})
	return stdout.String(), stderr.String(), code
}

// TestBenchFlagValidation checks that every invalid benchmark invocation stops before doing
// anything, with exit status 2 and a message naming the flag.
func TestBenchFlagValidation(t *testing.T) {
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"limit past the validator", []string{"bench", "snapshot-tradeoff", "--out", out, "--limits", "500,2000"},
			[]string{"limit 2000", "[200, 1000]", "--allow-out-of-range-limits"}},
		{"limit below the validator", []string{"bench", "snapshot-tradeoff", "--out", out, "--limits", "100"}, []string{"limit 100"}},
		{"unknown cold mode", []string{"bench", "snapshot-tradeoff", "--out", out, "--cold-snapshots", "maybe"}, []string{"--cold-snapshots \"maybe\""}},
		{"writes and duration", []string{"bench", "snapshot-tradeoff", "--out", out, "--writes", "10", "--duration", "1s"}, []string{"not both"}},
		{"bad growth SLO", []string{"bench", "snapshot-tradeoff", "--out", out, "--max-log-growth", "lots"}, []string{"--max-log-growth"}},
		{"growth SLO not a number", []string{"bench", "snapshot-tradeoff", "--out", out, "--max-log-growth", "NaN"}, []string{"--max-log-growth", "not a byte count"}},
		{"infinite growth SLO", []string{"bench", "snapshot-tradeoff", "--out", out, "--max-log-growth", "Inf"}, []string{"--max-log-growth", "not a byte count"}},
		{"growth SLO on an unpaced study", []string{"bench", "snapshot-tradeoff", "--out", out, "--max-log-growth", "4MiB"}, []string{"--max-log-growth needs --slo-write-rate"}},
		{"SLO write rate not a number", []string{"bench", "snapshot-tradeoff", "--out", out, "--slo-write-rate", "NaN"}, []string{"--slo-write-rate NaN"}},
		{"rate not a number", []string{"bench", "snapshot-tradeoff", "--out", out, "--rate", "NaN"}, []string{"rate NaN"}},
		{"infinite rate", []string{"bench", "snapshot-tradeoff", "--out", out, "--rate", "+Inf"}, []string{"rate +Inf"}},
		{"segment size past int64", []string{"bench", "snapshot-tradeoff", "--out", out, "--segment-bytes", "1e30"}, []string{"--segment-bytes 1e30: want at most"}},
		{"no share partitions", []string{"bench", "snapshot-tradeoff", "--out", out, "--share-partitions", "0"}, []string{"share partitions 0"}},
		{"negative share partitions", []string{"bench", "snapshot-tradeoff", "--out", out, "--share-partitions", "-3"}, []string{"share partitions -3"}},
		{"negative max replay", []string{"bench", "snapshot-tradeoff", "--out", out, "--max-replay", "-1s"}, []string{"--max-replay -1s"}},
		{"negative SLO write rate", []string{"bench", "snapshot-tradeoff", "--out", out, "--slo-write-rate", "-1"}, []string{"--slo-write-rate -1"}},
		{"bad segment size", []string{"bench", "snapshot-tradeoff", "--out", out, "--segment-bytes", "12"}, []string{"segment bytes 12"}},
		{"batches per write past the window", []string{"bench", "snapshot-tradeoff", "--out", out, "--state-batches", "2", "--batches-per-write", "3"}, []string{"batches per write 3"}},
		{"load without concurrency", []string{"bench", "load", "--concurrency", "0"}, []string{"concurrency 0"}},
		{"load unknown phase", []string{"bench", "load", "--phases", "health,read"}, []string{"unknown phase \"read\""}},
		{"load bad output", []string{"bench", "load", "--output", "xml"}, []string{"--output \"xml\""}},
		{"load with no phase", []string{"bench", "load", "--phases", ""}, []string{"--phases: want at least one"}},
		{"load probe dir under a missing parent", []string{"bench", "load", "--fsync-dir", filepath.Join(out, "not", "there")},
			[]string{"--fsync-dir", "no such file or directory"}},
		{"load probe dir a file", []string{"bench", "load", "--fsync-dir", filepath.Join(out, "file")}, []string{"--fsync-dir", "is not a directory"}},
		{"fsync without dir", []string{"bench", "fsync"}, []string{"--dir"}},
		{"fsync no samples", []string{"bench", "fsync", "--dir", out, "--samples", "0"}, []string{"--samples 0"}},
		{"fsync idle too long", []string{"bench", "fsync", "--dir", out, "--idle", "2s"}, []string{"--idle 2s"}},
		{"fsync no files", []string{"bench", "fsync", "--dir", out, "--files", "0"}, []string{"--files 0"}},
		{"fsync preallocation too large", []string{"bench", "fsync", "--dir", out, "--bytes", "67108864", "--samples", "100", "--preallocate"},
			[]string{"--preallocate", "1 GiB"}},
		{"restart without data dir", []string{"bench", "restart"}, []string{"--data-dir"}},
		{"restart bad bytes", []string{"bench", "restart", "--data-dir", out, "--bytes", "-3"}, []string{"--bytes"}},
		{"restart bytes past int64", []string{"bench", "restart", "--data-dir", out, "--bytes", "1e30"}, []string{"--bytes 1e30: want at most"}},
		{"restart more partitions than a server takes", []string{"bench", "restart", "--data-dir", out, "--partitions", "100000"},
			[]string{"num.partitions=100000 is out of range"}},
		{"unknown bench", []string{"bench", "nope"}, []string{"nope"}},
		{"bench without a subcommand", []string{"bench"}, []string{"bench needs a subcommand"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runBench(t, tc.args...)
			if code != exitBadConfig {
				t.Fatalf("exit status %d, want %d; stderr:\n%s", code, exitBadConfig, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"512", 512, true}, {"8MiB", 8 << 20, true}, {"1.5 GiB", 1.5 * (1 << 30), true}, {"4KB", 4000, true},
		{"2 MB", 2e6, true}, {"10B", 10, true}, {"NaN", 0, false}, {"Inf MiB", 0, false}, {"", 0, false}, {"-1", 0, false}, {"MiB", 0, false}, {"3 parsecs", 0, false},
	}
	for _, tc := range tests {
		got, err := parseBytes(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseBytes(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestBenchSnapshotTradeoffSmoke runs a tiny study end to end and checks every output.
func TestBenchSnapshotTradeoffSmoke(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	stdout, stderr, code := runBench(t, "bench", "snapshot-tradeoff", "--out", out, "--data-dir", t.TempDir(),
		"--share-partitions", "4", "--state-batches", "6", "--limits", "200,1000", "--cold-snapshots", "off",
		"--segment-bytes", "16KiB", "--writes", "300", "--max-replay", "1m", "--max-log-growth", "1GiB", "--slo-write-rate", "1000", "--quiet")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"| 200 | off |", "| 1000 | off |", "largest limit meeting both (cold snapshots off): 1000"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	for _, name := range []string{tradeoffCSV, tradeoffMarkdown, "snapshot-tradeoff-replay.png", "snapshot-tradeoff-growth.png", "snapshot-tradeoff-lag.png"} {
		if st, err := os.Stat(filepath.Join(out, name)); err != nil || st.Size() == 0 {
			t.Errorf("output %s missing or empty: %v", name, err)
		}
	}

	// The same study reported again from its CSV with a tighter replay objective.
	again := filepath.Join(t.TempDir(), "again")
	stdout2, stderr, code := runBench(t, "bench", "snapshot-tradeoff", "--out", again, "--from-csv", filepath.Join(out, tradeoffCSV),
		"--max-replay", "1ns")
	if code != exitOK {
		t.Fatalf("--from-csv: exit status %d; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout2, "no measured limit meets both (cold snapshots off)") || !strings.Contains(stdout2, "| 1000 | off |") {
		t.Fatalf("--from-csv stdout:\n%s", stdout2)
	}
	if _, stderr, code := runBench(t, "bench", "snapshot-tradeoff", "--out", again, "--from-csv", filepath.Join(out, tradeoffMarkdown)); code != exitBadConfig {
		t.Fatalf("--from-csv of a non-CSV file: exit status %d, want %d; stderr:\n%s", code, exitBadConfig, stderr)
	}
	csvData, err := os.ReadFile(filepath.Join(out, tradeoffCSV))
	if err != nil {
		t.Fatal(err)
	}
	headerOnly := filepath.Join(t.TempDir(), "header.csv")
	if err := os.WriteFile(headerOnly, csvData[:strings.IndexByte(string(csvData), '\n')+1], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runBench(t, "bench", "snapshot-tradeoff", "--out", again, "--from-csv", headerOnly); code != exitBadConfig || !strings.Contains(stderr, "no run") {
		t.Fatalf("--from-csv of a CSV without runs: exit status %d, want %d; stderr:\n%s", code, exitBadConfig, stderr)
	}
}

// TestBenchFsyncSmoke measures a few syncs in a temporary directory, back to back and idling.
func TestBenchFsyncSmoke(t *testing.T) {
	stdout, stderr, code := runBench(t, "bench", "fsync", "--dir", t.TempDir(), "--samples", "10")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "| fdatasync |") || !strings.Contains(stdout, "10 samples") || strings.Contains(stdout, "idle") {
		t.Fatalf("stdout:\n%s", stdout)
	}
	began := time.Now()
	stdout, stderr, code = runBench(t, "bench", "fsync", "--dir", t.TempDir(), "--samples", "5", "--idle", "20ms")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "5 samples of a 256-byte append, each after 20ms idle") {
		t.Fatalf("stdout:\n%s", stdout)
	}
	if took := time.Since(began); took < 100*time.Millisecond {
		t.Fatalf("5 samples after 20ms idle each took %v", took)
	}
	if runtime.GOOS != "linux" {
		return // --preallocate needs fallocate(2)
	}
	stdout, stderr, code = runBench(t, "bench", "fsync", "--dir", t.TempDir(), "--samples", "6", "--files", "3", "--preallocate")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "6 samples of a 256-byte write into allocated space, to 3 files in turn") {
		t.Fatalf("stdout:\n%s", stdout)
	}
}

// TestBenchCPUProfileOfAFailedRun: --cpuprofile writes the profile even when the benchmark fails.
func TestBenchCPUProfileOfAFailedRun(t *testing.T) {
	profile := filepath.Join(t.TempDir(), "cpu.pprof")
	notADir := filepath.Join(t.TempDir(), "file") // the probe cannot create its directory there
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runBench(t, "bench", "fsync", "--cpuprofile", profile, "--dir", notADir, "--samples", "1")
	if code != exitFailure {
		t.Fatalf("exit status %d, want %d; stderr:\n%s", code, exitFailure, stderr)
	}
	if st, err := os.Stat(profile); err != nil || st.Size() == 0 {
		t.Fatalf("profile of the failed run missing or empty: %v", err)
	}
}

// TestBenchLoadAgainstServer runs `bench load` against the real server binary.
func TestBenchLoadAgainstServer(t *testing.T) {
	p := startProc(t, t.TempDir())
	stdout, stderr, code := runBench(t, "bench", "load", "--target", p.grpcAddr, "--concurrency", "4", "--connections", "2",
		"--keys", "10", "--duration", "300ms", "--warmup", "250ms", "--progress-every", "100ms", "--fsync-dir", p.dataDir, "--fsync-samples", "10")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"| health |", "| write |", "| write ÷ health |", "throughput write ÷ health", "fdatasync p50 on"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "warm-up") {
		t.Errorf("no progress lines on stderr:\n%s", stderr)
	}
	verdicts := regexp.MustCompile(`(?m)^throughput write ÷ health = [0-9.]+ at 4 in flight, target >= 0\.85: (met|missed) |^write p50 .* at 4 in flight: (met|missed) `)
	if got := verdicts.FindAllString(stdout, -1); len(got) != 2 {
		t.Errorf("want a verdict on both targets, found %q in:\n%s", got, stdout)
	}
	// Against etcd's figures: a peer that writes nothing is beaten, one at 1e9 writes/s and 1 ns is not.
	for _, tc := range []struct{ rate, p50, want string }{{"0.001", "1h", "met"}, {"1e9", "1ns", "missed"}} {
		stdout, stderr, code = runBench(t, "bench", "load", "--target", p.grpcAddr, "--phases", "write", "--concurrency", "4",
			"--duration", "200ms", "--warmup", "0s", "--quiet", "--peer-writes-per-sec", tc.rate, "--peer-p50", tc.p50)
		peer := regexp.MustCompile(`(?m)^durable writes [0-9]+/s vs etcd [0-9]+/s = [0-9.]+ x at 4 in flight, target >= 2\.0 x: ` + tc.want +
			` |^write p50 .* vs etcd p50 .* at 4 in flight, target <= 1 x: ` + tc.want + ` `)
		if got := peer.FindAllString(stdout, -1); code != exitOK || len(got) != 2 || strings.Contains(stdout, "write ÷ health =") {
			t.Errorf("peer %s writes/s, p50 %s: exit %d, want both etcd targets %s and no health ratio verdict, found %q in:\n%s%s",
				tc.rate, tc.p50, code, tc.want, got, stdout, stderr)
		}
	}
	stdout, stderr, code = runBench(t, "bench", "load", "--target", p.grpcAddr, "--phases", "write", "--duration", "200ms",
		"--warmup", "0s", "--output", "json", "--quiet")
	if code != exitOK || !strings.Contains(stdout, "\"kind\": \"write\"") || stderr != "" {
		t.Fatalf("json run: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// bench load reaches a server that requires client certificates with the --tls-* flags, says
// what is missing when they are left out, and refuses half a key pair.
func TestBenchLoadOverMutualTLS(t *testing.T) {
	fx := newSecurityFixture(t)
	p := startSecureProc(t, t.TempDir(), fx.clientTLS(t, brokerSubject()), fx.args("required", authzArgs()...)...)
	dir := t.TempDir()
	ca := testcert.WriteCAFile(t, fx.ca, dir, "server-ca.pem")
	cert, key := filepath.Join(dir, "broker.pem"), filepath.Join(dir, "broker-key.pem")
	testcert.WriteKeyPair(t, fx.ca.Issue(t, *brokerSubject(), false), cert, key)
	run := []string{"bench", "load", "--target", p.grpcAddr, "--concurrency", "2", "--connections", "1", "--keys", "4",
		"--duration", "200ms", "--warmup", "0s", "--quiet"}

	stdout, stderr, code := runBench(t, append(run, "--tls-ca-file", ca, "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-server-name", "localhost")...)
	if code != exitOK || !strings.Contains(stdout, "| write |") {
		t.Fatalf("with client certificate: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if _, stderr, code = runBench(t, run...); code != exitFailure || !strings.Contains(stderr, "needs --tls") {
		t.Fatalf("plaintext against TLS: exit %d, stderr:\n%s", code, stderr)
	}
	if _, stderr, code = runBench(t, append(run, "--tls-cert-file", cert)...); code != exitBadConfig || !strings.Contains(stderr, "give both or neither") {
		t.Fatalf("certificate without key: exit %d, stderr:\n%s", code, stderr)
	}
	if _, stderr, code = runBench(t, append(run, "--tls-ca-file", key)...); code != exitBadConfig || !strings.Contains(stderr, "no PEM certificate") {
		t.Fatalf("CA file without a certificate: exit %d, stderr:\n%s", code, stderr)
	}
}

// A run whose recorded calls failed exits 1, after the report.
func TestFailedCallsFailTheRun(t *testing.T) {
	rep := &loadgen.Report{Phases: []loadgen.PhaseResult{{Kind: loadgen.KindHealth, Calls: 10}, {Kind: loadgen.KindWrite, Calls: 7}}}
	if err := failedCalls(rep); err != nil {
		t.Fatalf("no failed call: %v", err)
	}
	rep.Phases[1].Errors = 3
	if err := failedCalls(rep); err == nil || !strings.Contains(err.Error(), "3 of 17 recorded calls failed") {
		t.Fatalf("3 failed calls: %v", err)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{[]float64{1.4}, 1.4}, {[]float64{1.2, 1.6}, 1.4}, {[]float64{1, 2, 9}, 2}, {[]float64{1, 2, 3, 9}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
