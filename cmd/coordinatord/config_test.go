package main

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// wantBadConfig runs the server on dataDir with args, its environment extended by env, and fails
// the test unless it exits by itself with status 2, before serving, and stderr mentions each of
// want.
func wantBadConfig(t *testing.T, dataDir string, env, args []string, want ...string) {
	t.Helper()
	_, stderr, code := runBinary(t, env, serverArgs(dataDir, args...)...)
	if code != exitBadConfig {
		t.Fatalf("exit status %d, want %d\n%s", code, exitBadConfig, stderr)
	}
	msg := fatalMessage(t, stderr)
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the error does not mention %q: %s\nstderr:\n%s", w, msg, stderr)
		}
	}
	if strings.Contains(stderr, `"msg":"serving"`) {
		t.Errorf("the server started serving despite bad configuration")
	}
}

// fatalMessage returns the error that ended the command, from its stderr: the "error" of the JSON
// line that logs it once the server's logger exists, else the plain "coordinatord: " line. It
// fails the test unless there is exactly one of them.
func fatalMessage(t *testing.T, stderr string) string {
	t.Helper()
	var found []string
	for _, line := range strings.Split(stderr, "\n") {
		if rest, ok := strings.CutPrefix(line, "coordinatord: "); ok {
			found = append(found, rest)
			continue
		}
		var entry struct {
			Level, Msg, Error string
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "coordinatord stopped on an error" {
			if entry.Level != "error" || entry.Error == "" {
				t.Errorf("the error is logged as %s", line)
			}
			found = append(found, entry.Error)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want the error that ended the command once, plain or logged; stderr:\n%s", stderr)
	}
	return found[0]
}

// TestBadConfigurationExits2 checks that every kind of bad configuration stops start-up with exit
// status 2 and a line naming what is wrong, before anything listens.
func TestBadConfigurationExits2(t *testing.T) {
	props := filepath.Join(t.TempDir(), "coordinatord.properties")
	if err := os.WriteFile(props, []byte("share.coordinator.snapshot.update.records.per.snapshot=0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"snapshot limit below the floor in the file", nil, []string{"--config", props},
			[]string{"share.coordinator.snapshot.update.records.per.snapshot=0", "[200, 1000]", "remove the setting"}},
		{"override out of range", nil, []string{"--override", "share.coordinator.snapshot.update.records.per.snapshot=1001"},
			[]string{"1001", "[200, 1000]"}},
		{"unknown key", nil, []string{"--override", "share.coordinator.no.such=1"}, []string{"share.coordinator.no.such"}},
		{"wrong type", nil, []string{"--override", "share.coordinator.write.timeout.ms=soon"}, []string{"soon"}},
		{"unknown environment variable", []string{"COORDINATORD_NO_SUCH_KEY=1"}, nil, []string{"COORDINATORD_NO_SUCH_KEY"}},
		{"environment out of range", []string{"COORDINATORD_SHARE_COORDINATOR_SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT=100"}, nil, []string{"100", "[200, 1000]"}},
		{"heartbeat not below session", nil, []string{"--override", "group.share.heartbeat.interval.ms=60000", "--override", "group.share.max.heartbeat.interval.ms=60000", "--override", "group.share.session.timeout.ms=50000"},
			[]string{"group.share.heartbeat.interval.ms"}},
		{"missing properties file", nil, []string{"--config", filepath.Join(t.TempDir(), "absent.properties")}, []string{"absent.properties"}},
		{"unknown flag", nil, []string{"--no-such-flag"}, []string{"--no-such-flag"}},
		{"bad log level", nil, []string{"--log-level", "loud"}, []string{"loud"}},
		{"log level above error", nil, []string{"--log-level", "fatal"}, []string{"fatal", "debug, info, warn, error"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantBadConfig(t, t.TempDir(), tc.env, tc.args, tc.want...)
		})
	}
}

// Once the server's logger exists, the error that stops it is a line of the JSON log, not a
// plain-text line among JSON ones; before, plain text is all there is.
func TestFatalErrorIsLogged(t *testing.T) {
	_, stderr, _ := runBinary(t, nil, serverArgs(t.TempDir(), "--advertised-listen", "myhost:0")...)
	if strings.Contains(stderr, "\ncoordinatord: ") || strings.HasPrefix(stderr, "coordinatord: ") {
		t.Errorf("the error is printed as plain text besides the JSON log:\n%s", stderr)
	}
	if msg := fatalMessage(t, stderr); !strings.Contains(msg, "myhost:0") || !strings.Contains(stderr, `"msg":"coordinatord stopped on an error"`) {
		t.Errorf("the error is not logged as JSON:\n%s", stderr)
	}
	_, stderr, _ = runBinary(t, nil, serverArgs(t.TempDir(), "--log-level", "loud")...)
	if !strings.HasPrefix(stderr, "coordinatord: ") {
		t.Errorf("an error before the logger exists is not plain text:\n%s", stderr)
	}
}

// TestBadAddressesTouchNothing: flags that name unusable addresses stop start-up with exit status 2
// before the data directory is created or locked.
func TestBadAddressesTouchNothing(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--advertised-listen", "myhost"}, "want HOST:PORT"},
		{[]string{"--advertised-listen", "a b:70"}, `host "a b" is neither an IP address nor a host name`},
		{[]string{"--advertised-listen", "myhost:0"}, `port "0" is not a port number`},
		{[]string{"--listen", "127.0.0.1:notaport"}, "--listen 127.0.0.1:notaport"},
		{[]string{"--metrics-listen", "127.0.0.1:notaport"}, "--metrics-listen 127.0.0.1:notaport"},
		{[]string{"--listen", ""}, `--listen "": want HOST:PORT`},
		{[]string{"--metrics-listen", ""}, `--metrics-listen "": want HOST:PORT`},
	} {
		t.Run(strings.Join(tc.args, "="), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			wantBadConfig(t, dir, nil, tc.args, tc.want)
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the data directory was created (%v)", err)
			}
		})
	}
	cwd := t.TempDir()
	cmd := exec.Command(binPath, serverArgs("")...)
	cmd.Dir = cwd
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitBadConfig || !strings.Contains(string(out), "--data-dir: want a directory") {
		t.Errorf("--data-dir \"\": %v\n%s", err, out)
	}
	if entries, _ := os.ReadDir(cwd); len(entries) > 0 {
		t.Errorf("--data-dir \"\" left %d files in the working directory", len(entries))
	}
}

// TestPartitionCountIsRecorded: a data directory remembers its partition count; starting it with
// another one is refused (routing would silently move keys).
func TestPartitionCountIsRecorded(t *testing.T) {
	dir := t.TempDir()
	p := startProc(t, dir, "--override", "share.coordinator.state.topic.num.partitions=5")
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	// A restart with another partition count is refused.
	wantBadConfig(t, dir, nil, []string{"--override", "share.coordinator.state.topic.num.partitions=6"},
		"share.coordinator.state.topic.num.partitions=6", "start with share.coordinator.state.topic.num.partitions=5")

	// With the config store moved aside the state partition directories still tell: the default
	// count is refused before a new store records it, and the right count starts.
	if err := os.Rename(filepath.Join(dir, "config", "store"), filepath.Join(t.TempDir(), "store")); err != nil {
		t.Fatal(err)
	}
	// More partitions than the directories show: created with fewer, or the last ones missing.
	wantBadConfig(t, dir, nil, nil,
		"share.coordinator.state.topic.num.partitions=50, but --data-dir "+dir+" holds state partitions only up to __share_group_state-4",
		"start with share.coordinator.state.topic.num.partitions=5", "__share_group_state-5 to __share_group_state-49 are missing")
	wantBadConfig(t, dir, nil, []string{"--override", "share.coordinator.state.topic.num.partitions=3"},
		"share.coordinator.state.topic.num.partitions=3, but --data-dir "+dir+" holds the state partitions of 5",
		"start with share.coordinator.state.topic.num.partitions=5")
	p = startProc(t, dir, "--override", "share.coordinator.state.topic.num.partitions=5")
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d after the store was recreated", code)
	}

	// With the store in place it decides: the highest partition directory missing does not make
	// the recorded count look wrong (no partition holds records, so the missing directory is not
	// refused either: TestMissingPartitionDirectory).
	if err := os.Rename(filepath.Join(dir, "__share_group_state-4"), filepath.Join(t.TempDir(), "aside")); err != nil {
		t.Fatal(err)
	}
	p = startProc(t, dir, "--override", "share.coordinator.state.topic.num.partitions=5")
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d with the last partition directory moved aside", code)
	}
}

// TestMissingPartitionDirectory: a state partition directory missing while another partition's
// log holds records (a partial restore, a directory moved aside) stops start-up before anything
// is created in its place; an empty directory created on purpose starts that partition empty.
func TestMissingPartitionDirectory(t *testing.T) {
	dir := t.TempDir()
	p := startProc(t, dir, "--override", "share.coordinator.state.topic.num.partitions=3")
	mustInitialize(ctxT(t), t, p, "g1", "P6hfZFcXRWKz_CyWP2avpg", 0, 1)
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	holder, victim := "", ""
	for i := range 3 {
		name := "__share_group_state-" + strconv.Itoa(i)
		segs, err := filepath.Glob(filepath.Join(dir, name, "*.seg"))
		if err != nil || len(segs) != 1 {
			t.Fatalf("%s holds segments %v (%v), want one", name, segs, err)
		}
		if st, err := os.Stat(segs[0]); err != nil {
			t.Fatal(err)
		} else if st.Size() > 32 && holder == "" {
			holder = name
		} else if victim == "" {
			victim = name
		}
	}
	if holder == "" || victim == "" {
		t.Fatalf("no partition holds the record (%q) or none is empty (%q)", holder, victim)
	}
	if err := os.Rename(filepath.Join(dir, victim), filepath.Join(t.TempDir(), "aside")); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runBinary(t, nil, serverArgs(dir, "--override", "share.coordinator.state.topic.num.partitions=3")...)
	if msg := fatalMessage(t, stderr); code != exitFailure || !strings.Contains(msg, "missing ("+victim+") while "+holder+" holds records") {
		t.Fatalf("start with %s missing: exit status %d, %s\n%s", victim, code, msg, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, victim)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused start created %s: %v", victim, err)
	}
	// Without the config store (moved aside) the same holds, and no new store is written.
	store := filepath.Join(dir, "config", "store")
	if err := os.Rename(store, filepath.Join(t.TempDir(), "store")); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runBinary(t, nil, serverArgs(dir, "--override", "share.coordinator.state.topic.num.partitions=3")...)
	if msg := fatalMessage(t, stderr); code != exitFailure || !strings.Contains(msg, "missing ("+victim+") while "+holder+" holds records") {
		t.Fatalf("start with %s and the store missing: exit status %d, %s\n%s", victim, code, msg, stderr)
	}
	if _, err := os.Stat(store); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused start wrote a new config store: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, victim), 0o755); err != nil {
		t.Fatal(err)
	}
	p = startProc(t, dir, "--override", "share.coordinator.state.topic.num.partitions=3")
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d with %s created empty", code, victim)
	}
}

// TestDataDirChecks: a data directory that is a file is refused; a missing one is created, with
// a warning, since a typo or an unmounted volume would otherwise serve as an empty coordinator.
func TestDataDirChecks(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wantBadConfig(t, file, nil, nil, "--data-dir "+file+" is not a directory")

	// A symbolic link to a directory that does not exist (a volume not mounted) is not followed
	// into a new directory on the wrong disk, and the refusal says what is missing.
	link, target := filepath.Join(t.TempDir(), "data"), filepath.Join(t.TempDir(), "unmounted", "data")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	wantBadConfig(t, link, nil, nil, "--data-dir "+link+" is a symbolic link to "+target+", which does not exist")

	missing := filepath.Join(t.TempDir(), "not", "yet", "there")
	p := startProc(t, missing)
	waitForLog(t, p, regexp.MustCompile(`the data directory does not exist: creating it`))
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}

func TestCheckConfig(t *testing.T) {
	good := filepath.Join(t.TempDir(), "good.properties")
	if err := os.WriteFile(good, []byte("share.coordinator.snapshot.update.records.per.snapshot=800\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runTool(t, "check-config", "--config", good)
	if code != 0 || !strings.Contains(out, "configuration OK") {
		t.Fatalf("check-config on a good file: exit %d\n%s%s", code, out, stderr)
	}
	// Every problem is reported, not only the first.
	out, _, code = runTool(t, "check-config", "--config", good,
		"--override", "share.coordinator.snapshot.update.records.per.snapshot=0",
		"--override", "share.coordinator.append.linger.ms=-2")
	if code != exitBadConfig {
		t.Fatalf("check-config with two problems: exit %d\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(out, "records.per.snapshot=0") || !strings.Contains(out, "append.linger.ms=-2") {
		t.Fatalf("check-config output, want one line per problem:\n%s", out)
	}
}

// TestCheckConfigKafkaServerProperties: check-config on a Kafka broker's server.properties prints
// one line for the broker keys that do not apply here, naming the flags that replace node.id and
// listeners; a key set twice in a file is reported with its lines, by check-config and by a
// start, both with exit status 2.
func TestCheckConfigKafkaServerProperties(t *testing.T) {
	dir := t.TempDir()
	kafka := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(kafka, []byte(strings.Join([]string{
		"process.roles=broker,controller", "node.id=1", "controller.quorum.bootstrap.servers=localhost:9093",
		"listeners=PLAINTEXT://:9092,CONTROLLER://:9093", "advertised.listeners=PLAINTEXT://localhost:9092",
		"num.network.threads=3", "log.dirs=/tmp/kraft-combined-logs", "num.partitions=1",
		"offsets.topic.replication.factor=1", "share.coordinator.state.topic.replication.factor=1",
		"share.coordinator.state.topic.min.isr=1", "log.retention.hours=168", "group.initial.rebalance.delay.ms=0",
	}, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code := runTool(t, "check-config", "--config", kafka)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitBadConfig || len(lines) != 1 {
		t.Fatalf("check-config on server.properties: exit %d, want %d and one line:\n%s", code, exitBadConfig, out)
	}
	for _, want := range []string{"12 Kafka broker configs do not apply", "node.id: use --node-id", "listeners: use --listen",
		"advertised.listeners: use --advertised-listen", "log.dirs: use --data-dir"} {
		if !strings.Contains(out, want) {
			t.Errorf("check-config output lacks %q:\n%s", want, out)
		}
	}

	twice := filepath.Join(dir, "twice.properties")
	if err := os.WriteFile(twice, []byte("share.coordinator.write.timeout.ms=5000\n# later\nshare.coordinator.write.timeout.ms=9000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const want = "share.coordinator.write.timeout.ms is set 2 times, on lines 1 and 3 (values 5000 and 9000)"
	if out, _, code := runTool(t, "check-config", "--config", twice); code != exitBadConfig || !strings.Contains(out, want) {
		t.Fatalf("check-config on a file setting a key twice: exit %d\n%s", code, out)
	}
	wantBadConfig(t, t.TempDir(), nil, []string{"--config", twice}, want)
}

// TestCheckConfigSecurity: check-config reports what the server's security set-up would refuse,
// not only the values of single keys.
func TestCheckConfigSecurity(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.pem")
	for _, tc := range []struct {
		name      string
		overrides []string
		want      string
	}{
		{"authorizer without client certificates", []string{"authorizer.enabled=true"}, "authorizer.enabled=true needs client certificates"},
		{"TLS without a certificate", []string{"tls.enabled=true"}, "tls.enabled=true needs tls.cert.file and tls.key.file"},
		{"certificate file that does not load", []string{"tls.enabled=true", "tls.cert.file=" + missing, "tls.key.file=" + missing}, "absent.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"check-config"}
			for _, o := range tc.overrides {
				args = append(args, "--override", o)
			}
			out, _, code := runTool(t, args...)
			if code != exitBadConfig || !strings.Contains(out, tc.want) {
				t.Fatalf("check-config %v: exit %d, want %d and a line containing %q:\n%s", tc.overrides, code, exitBadConfig, tc.want, out)
			}
		})
	}
}

// advertisedAddr gives clients the listen address when --advertised-listen is not set, or the host
// name when that address means nothing to other hosts (all interfaces, a zoned IPv6 address), and
// refuses an advertised address they could not use.
func TestAdvertisedAddr(t *testing.T) {
	zoned := &net.TCPAddr{IP: net.ParseIP("fe80::1"), Zone: "eth0", Port: 7070}
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flag   string
		listen net.Addr
		host   string
		port   int32
		bad    bool
	}{
		{"", zoned, hostname, 7070, false},
		{"", &net.TCPAddr{IP: net.ParseIP("10.0.0.7"), Port: 7070}, "10.0.0.7", 7070, false},
		{"", &net.TCPAddr{IP: net.IPv6unspecified, Port: 7070}, hostname, 7070, false},
		{"[fe80::1%eth0]:7071", zoned, "", 0, true},
		{"[::%eth0]:7071", zoned, "", 0, true},
		{"[fe80::1%\xff]:7071", zoned, "", 0, true},
		{"h\xffst:7071", zoned, "", 0, true},
		{"[2001:db8::1]:7071", zoned, "2001:db8::1", 7071, false},
		{"0.0.0.0:7071", zoned, hostname, 7071, false},
		{"broker-1.coordinatord.svc:7070", zoned, "broker-1.coordinatord.svc", 7070, false},
		{"a b:70", zoned, "", 0, true},
		{"host:0", zoned, "", 0, true},
		{"host", zoned, "", 0, true},
	} {
		host, port, err := advertisedAddr(tc.flag, tc.listen)
		if (err != nil) != tc.bad || host != tc.host || port != tc.port {
			t.Errorf("advertisedAddr(%q, %v) = %q, %d, %v; want %q, %d, error %v", tc.flag, tc.listen, host, port, err, tc.host, tc.port, tc.bad)
		}
	}
}
