package groupcfg

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/coordinatord/coordinatord/internal/principal"
)

func writeProps(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "coordinatord.properties")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestStaticDefaults(t *testing.T) {
	st := staticOf(t)
	b := st.Broker()
	for _, tc := range []struct {
		name      string
		got, want int64
	}{
		{"NumPartitions", int64(b.NumPartitions()), 50},
		{"SegmentBytes", int64(b.SegmentBytes()), 104857600},
		{"SnapshotUpdateRecordsPerSnapshot", int64(b.SnapshotUpdateRecordsPerSnapshot()), 500},
		{"AppendLingerMs", int64(b.AppendLingerMs()), -1},
		{"WriteTimeoutMs", int64(b.WriteTimeoutMs()), 5000},
		{"LoadBufferSize", int64(b.LoadBufferSize()), 5242880},
		{"PruneIntervalMs", int64(b.PruneIntervalMs()), 300000},
		{"ColdPartitionSnapshotIntervalMs", int64(b.ColdPartitionSnapshotIntervalMs()), 300000},
		{"MetricsGroupLabelMax", int64(b.MetricsGroupLabelMax()), 100},
		{"MaxPartitionsPerRequest", int64(b.MaxPartitionsPerRequest()), 5000},
		{"GRPCMaxRecvMessageBytes", int64(b.GRPCMaxRecvMessageBytes()), 16777216},
		{"GRPCMaxConcurrentStreams", int64(b.GRPCMaxConcurrentStreams()), 1024},
		{"GRPCKeepaliveMinTimeMs", b.GRPCKeepaliveMinTimeMs(), 10000},
		{"GRPCKeepaliveTimeMs", b.GRPCKeepaliveTimeMs(), 60000},
		{"GRPCKeepaliveTimeoutMs", b.GRPCKeepaliveTimeoutMs(), 20000},
		{"ShutdownDrainTimeoutMs", b.ShutdownDrainTimeoutMs(), 20000},
		{keyBrokerSessionTimeout, int64(b.intOf(keyBrokerSessionTimeout)), 45000},
		{keyBrokerHeartbeatInterval, int64(b.intOf(keyBrokerHeartbeatInterval)), 5000},
		{keyBrokerRecordLockDuration, int64(b.intOf(keyBrokerRecordLockDuration)), 30000},
		{keyBrokerDeliveryCountLimit, int64(b.intOf(keyBrokerDeliveryCountLimit)), 5},
		{keyBrokerRecordLocks, int64(b.intOf(keyBrokerRecordLocks)), 2000},
		{keyBrokerAssignmentInterval, int64(b.intOf(keyBrokerAssignmentInterval)), 1000},
		{"zero Broker", int64(Broker{}.NumPartitions()), 50},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	for _, e := range st.state.entries() {
		if e.Source != SourceDefaultConfig || e.Origin != "" {
			t.Errorf("%s: source %s origin %q with no inputs", e.Name, e.Source, e.Origin)
		}
	}
	if v, ok := b.Int(keyWriteTimeoutMs); !ok || v != 5000 {
		t.Errorf("Int(%s) = %d, %v", keyWriteTimeoutMs, v, ok)
	}
	if v, ok := b.Bool(keyBrokerAssignorOffload); !ok || !v {
		t.Errorf("Bool(%s) = %v, %v", keyBrokerAssignorOffload, v, ok)
	}
	if _, ok := b.Int(keyBrokerAssignorOffload); ok {
		t.Errorf("Int of a BOOLEAN key succeeded")
	}
	if _, ok := b.Text(keyDeliveryCountLimit); ok {
		t.Errorf("Text of a group key succeeded on Broker")
	}
	if _, ok := b.List(keyWriteTimeoutMs); ok {
		t.Errorf("List of an INT key succeeded")
	}
}

func TestStaticPrecedence(t *testing.T) {
	file := writeProps(t, strings.Join([]string{
		"share.coordinator.write.timeout.ms=1001",
		"share.coordinator.load.buffer.size=1002",
		"share.coordinator.append.linger.ms=1003",
	}, "\n"))
	st, err := LoadStatic(Sources{
		File: file,
		Env: []string{
			"PATH=/bin",
			"COORDINATORD_SHARE_COORDINATOR_LOAD_BUFFER_SIZE=2002",
			"COORDINATORD_SHARE_COORDINATOR_APPEND_LINGER_MS=2003",
		},
		Overrides: []string{"share.coordinator.append.linger.ms=3003"},
	})
	if err != nil {
		t.Fatal(err)
	}
	b := st.Broker()
	if b.WriteTimeoutMs() != 1001 || b.LoadBufferSize() != 2002 || b.AppendLingerMs() != 3003 || b.PruneIntervalMs() != 300000 {
		t.Fatalf("values: write timeout %d (file), load buffer %d (env), linger %d (override), prune %d (default)",
			b.WriteTimeoutMs(), b.LoadBufferSize(), b.AppendLingerMs(), b.PruneIntervalMs())
	}
	want := map[string]struct {
		src    ConfigSource
		origin string
	}{
		keyWriteTimeoutMs:  {SourceStaticBrokerConfig, "file " + file},
		keyLoadBufferSize:  {SourceStaticBrokerConfig, "environment COORDINATORD_SHARE_COORDINATOR_LOAD_BUFFER_SIZE"},
		keyAppendLingerMs:  {SourceStaticBrokerConfig, "--override"},
		keyPruneIntervalMs: {SourceDefaultConfig, ""},
	}
	for _, e := range st.state.entries() {
		if w, ok := want[e.Name]; ok && (e.Source != w.src || e.Origin != w.origin) {
			t.Errorf("%s: source %s origin %q, want %s %q", e.Name, e.Source, e.Origin, w.src, w.origin)
		}
	}
}

// TestPropertiesFileSyntax checks Java properties semantics: separators, comments, continuation
// lines, escapes, whitespace, no ${} expansion. (A key set twice is refused: see
// TestRepeatedKeysInFile.)
func TestPropertiesFileSyntax(t *testing.T) {
	file := writeProps(t, strings.Join([]string{
		"# a comment",
		"! another comment",
		"share.coordinator.write.timeout.ms : 1234",
		"share.coordinator.load.buffer.size 4321",
		"share.coordinator.state.topic.prune.interval.ms = 1\\",
		"    000",
		"  share.coordinator.append.linger.ms=\\u0035",
		"metrics.group.label.max=8",
	}, "\n"))
	st, err := LoadStatic(Sources{File: file})
	if err != nil {
		t.Fatal(err)
	}
	b := st.Broker()
	if b.WriteTimeoutMs() != 1234 || b.LoadBufferSize() != 4321 || b.PruneIntervalMs() != 1000 ||
		b.AppendLingerMs() != 5 || b.MetricsGroupLabelMax() != 8 {
		t.Fatalf("parsed: %+v", st.state.entries())
	}
	// ${...} is text, not an expansion (Java does not expand), so this is a bad INT.
	problems := staticProblems(Sources{File: writeProps(t, "share.coordinator.write.timeout.ms=${x}\n")})
	if len(problems) != 1 || !strings.Contains(problems[0].Message, "${x} is not a valid INT") {
		t.Fatalf("problems: %v", problems)
	}
}

func TestStaticInputProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  Sources
		want []string // one substring per expected problem, in order
	}{
		{"missing file", Sources{File: "/no/such/file.properties"}, []string{"cannot read config file /no/such/file.properties"}},
		{"binary file", Sources{File: "WRITE:a=1\n\x7fELF\x00\x01"}, []string{"it is not a text file (a NUL byte at byte 8)"}},
		{"file too large", Sources{File: "WRITE:" + strings.Repeat("#\n", 1<<19+1)},
			[]string{"it is larger than 1048576 bytes, too large for a properties file of broker configs"}},
		{"Latin-1 comment", Sources{File: "WRITE:# caf\xe9\nshare.coordinator.write.timeout.ms=7000"}, nil},
		{"parse error quotes no raw bytes", Sources{File: "WRITE:a=\\u12\xff\x01"}, []string{"cannot read config file"}},
		{"unknown key in file", Sources{File: "WRITE:share.coordinator.nope=1"}, []string{"unknown config share.coordinator.nope"}},
		{"group key in file", Sources{File: "WRITE:share.delivery.count.limit=4"},
			[]string{"share.delivery.count.limit is a group config, set per group with IncrementalAlterConfigs on a GROUP resource; to change the default of every group, set group.share.delivery.count.limit instead"}},
		{"unknown env", Sources{Env: []string{"COORDINATORD_SHARE_COORDINATOR_WRITE_TIMEOUT=1"}},
			[]string{"unknown environment variable COORDINATORD_SHARE_COORDINATOR_WRITE_TIMEOUT"}},
		{"group key in env", Sources{Env: []string{"COORDINATORD_SHARE_RENEW_ACKNOWLEDGE_ENABLE=false"}},
			[]string{"names the group config share.renew.acknowledge.enable"}},
		{"other env ignored", Sources{Env: []string{"HOME=/root", "COORDINATOR_X=1"}}, nil},
		{"kubernetes service links ignored", Sources{Env: []string{
			"COORDINATORD_SERVICE_HOST=10.0.0.7", "COORDINATORD_SERVICE_PORT=7070", "COORDINATORD_SERVICE_PORT_GRPC=7070",
			"COORDINATORD_PORT=tcp://10.0.0.7:7070", "COORDINATORD_PORT_7070_TCP=tcp://10.0.0.7:7070",
			"COORDINATORD_PORT_7070_TCP_PROTO=tcp", "COORDINATORD_PORT_7070_TCP_PORT=7070", "COORDINATORD_PORT_7070_TCP_ADDR=10.0.0.7",
		}}, nil},
		{"near a service link is still unknown", Sources{Env: []string{"COORDINATORD_SERVICES=1"}},
			[]string{"unknown environment variable COORDINATORD_SERVICES"}},
		{"override without =", Sources{Overrides: []string{"share.coordinator.write.timeout.ms"}}, []string{"is not KEY=VALUE"}},
		{"override empty key", Sources{Overrides: []string{"=5"}}, []string{"is not KEY=VALUE"}},
		{"unknown override", Sources{Overrides: []string{"listen=1"}}, []string{"unknown config listen"}},
		// Millisecond LONG keys stop where gRPC and the kernel would overflow them.
		{"drain timeout beyond 2^31-1 ms", Sources{Overrides: []string{"shutdown.drain.timeout.ms=9223372036854775807"}},
			[]string{"shutdown.drain.timeout.ms=9223372036854775807 is out of range [0, 2147483647]"}},
		{"keepalive time beyond 2^31-1 ms", Sources{Overrides: []string{"grpc.keepalive.time.ms=9223372036855"}},
			[]string{"grpc.keepalive.time.ms=9223372036855 is out of range [1000, 2147483647]"}},
		{"keepalive timeout beyond 2^31-1 ms", Sources{Overrides: []string{"grpc.keepalive.timeout.ms=2147483648"}},
			[]string{"grpc.keepalive.timeout.ms=2147483648 is out of range [1, 2147483647]"}},
		{"longest durations", Sources{Overrides: []string{"shutdown.drain.timeout.ms=2147483647", "grpc.keepalive.time.ms=2147483647",
			"grpc.keepalive.timeout.ms=2147483647", "grpc.keepalive.min.time.ms=2147483647"}}, nil},
		{"all at once", Sources{
			Env:       []string{"COORDINATORD_TYPO=1"},
			Overrides: []string{"typo.key=1", "share.coordinator.write.timeout.ms=0", "metrics.group.label.max=x"},
		}, []string{"COORDINATORD_TYPO", "typo.key", "share.coordinator.write.timeout.ms=0 is out of range [1, 2147483647]", "metrics.group.label.max=x is not a valid INT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if path, ok := strings.CutPrefix(tc.src.File, "WRITE:"); ok {
				tc.src.File = writeProps(t, path)
			}
			problems := staticProblems(tc.src)
			_, err := LoadStatic(tc.src)
			if len(problems) != len(tc.want) {
				t.Fatalf("problems %v, want %d", problems, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(problems[i].String(), w) {
					t.Errorf("problem %d %q lacks %q", i, problems[i], w)
				}
			}
			var se *StaticError
			switch {
			case len(tc.want) == 0 && err != nil:
				t.Fatalf("LoadStatic: %v", err)
			case len(tc.want) > 0 && (!errors.As(err, &se) || len(se.Problems) != len(tc.want)):
				t.Fatalf("LoadStatic error %v, want a *StaticError with the same problems", err)
			case len(tc.want) > 0 && strings.Count(err.Error(), "\n") != len(tc.want)-1:
				t.Fatalf("LoadStatic error is not one line per problem: %q", err)
			}
		})
	}
}

// TestBrokerSnapshotLimitBounds is the snapshot-frequency proposal's broker-level test: the
// range [200, 1000], and a value below 200 (including the formerly documented 0) stops start-up
// with the migration step.
func TestBrokerSnapshotLimitBounds(t *testing.T) {
	for _, tc := range []struct {
		value string
		ok    bool
		want  string
	}{
		{"200", true, ""},
		{"500", true, ""},
		{"1000", true, ""},
		{"199", false, "share.coordinator.snapshot.update.records.per.snapshot=199 is out of range [200, 1000]: values below 200 are no longer supported; remove the setting (default 500) or set a value in [200, 1000] before upgrading"},
		{"0", false, "share.coordinator.snapshot.update.records.per.snapshot=0 is out of range [200, 1000]: values below 200 are no longer supported; remove the setting (default 500) or set a value in [200, 1000] before upgrading"},
		{"-1", false, "share.coordinator.snapshot.update.records.per.snapshot=-1 is out of range [200, 1000]: values below 200 are no longer supported; remove the setting (default 500) or set a value in [200, 1000] before upgrading"},
		{"1001", false, "share.coordinator.snapshot.update.records.per.snapshot=1001 is out of range [200, 1000]: remove the setting (default 500) or set a value in [200, 1000]"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			st, err := LoadStatic(Sources{Env: []string{"COORDINATORD_SHARE_COORDINATOR_SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT=" + tc.value}})
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if got := st.Broker().SnapshotUpdateRecordsPerSnapshot(); got != int(mustAtoi(t, tc.value)) {
					t.Fatalf("value %d", got)
				}
				return
			}
			want := tc.want + " (from environment COORDINATORD_SHARE_COORDINATOR_SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT)"
			if err == nil || err.Error() != want {
				t.Fatalf("error:\n%v\nwant:\n%s", err, want)
			}
		})
	}
}

func TestStaticCrossChecks(t *testing.T) {
	for _, tc := range []struct {
		name      string
		overrides []string
		want      []string
	}{
		{"defaults", nil, nil},
		{"default below min", []string{"group.share.min.delivery.count.limit=5", "group.share.delivery.count.limit=3"},
			[]string{"group.share.delivery.count.limit=3 is below group.share.min.delivery.count.limit=5: the default of share.delivery.count.limit must lie within its bounds [5, 10]; raise group.share.delivery.count.limit or lower group.share.min.delivery.count.limit"}},
		{"default above max", []string{"group.share.max.record.lock.duration.ms=40000", "group.share.record.lock.duration.ms=50000"},
			[]string{"group.share.record.lock.duration.ms=50000 is above group.share.max.record.lock.duration.ms=40000"}},
		{"min above default", []string{"group.share.min.assignment.interval.ms=5000"},
			[]string{"group.share.assignment.interval.ms=1000 is below group.share.min.assignment.interval.ms=5000"}},
		{"min above max", []string{"group.share.min.session.timeout.ms=70000"},
			[]string{"group.share.min.session.timeout.ms=70000 is above group.share.max.session.timeout.ms=60000: no value of share.session.timeout.ms could lie within these bounds; lower group.share.min.session.timeout.ms or raise group.share.max.session.timeout.ms"}},
		{"heartbeat not below session", []string{"group.share.heartbeat.interval.ms=45000", "group.share.max.heartbeat.interval.ms=50000", "group.share.min.session.timeout.ms=1000"},
			[]string{"group.share.heartbeat.interval.ms=45000 is not less than group.share.session.timeout.ms=45000"}},
		{"several", []string{"group.share.partition.max.record.locks=5000", "group.share.min.session.timeout.ms=50000"},
			[]string{"group.share.session.timeout.ms=45000 is below group.share.min.session.timeout.ms=50000",
				"group.share.partition.max.record.locks=5000 is above group.share.max.partition.max.record.locks=4000"}},
		{"invalid values are not cross-checked", []string{"group.share.delivery.count.limit=99"},
			[]string{"group.share.delivery.count.limit=99 is out of range [2, 10]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems := staticProblems(Sources{Overrides: tc.overrides})
			if len(problems) != len(tc.want) {
				t.Fatalf("problems %v, want %q", problems, tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(problems[i].Message, w) {
					t.Errorf("problem %q lacks %q", problems[i].Message, w)
				}
			}
		})
	}
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	v, ok := parseValue(TypeLong, s)
	if !ok {
		t.Fatalf("not a number: %q", s)
	}
	return v.num
}

// A properties file takes one backslash as an escape, as Java's does: an RFC 2253 escape in a
// principal is written with two there, and arrives as one; --override takes it as it is.
func TestPrincipalEscapesInPropertiesFile(t *testing.T) {
	want := []string{`User:CN=a\;b,O=Acme`, `User:CN=c\,d`}
	for name, src := range map[string]Sources{
		"file":     {File: writeProps(t, `authorizer.cluster.action.principals=User:CN=a\\;b,O=Acme;User:CN=c\\,d`)},
		"override": {Overrides: []string{`authorizer.cluster.action.principals=User:CN=a\;b,O=Acme;User:CN=c\,d`}},
	} {
		s, err := LoadStatic(src)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := s.Broker().Text(KeyAuthorizerClusterAction)
		got, err := principal.ParseList(text)
		if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
}

// A --config file that is not valid UTF-8 is read as ISO-8859-1, as Java reads properties files:
// a Latin-1 principal keeps its accented letter instead of turning into U+FFFD.
func TestPropertiesFileLatin1(t *testing.T) {
	s, err := LoadStatic(Sources{File: writeProps(t, "# Kafka's file\nauthorizer.cluster.action.principals=User:CN=caf\xe9,O=Acme")})
	if err != nil {
		t.Fatal(err)
	}
	if text, _ := s.Broker().Text(KeyAuthorizerClusterAction); text != "User:CN=café,O=Acme" {
		t.Fatalf("principal list %q, want User:CN=café,O=Acme", text)
	}
	s, err = LoadStatic(Sources{File: writeProps(t, "authorizer.cluster.action.principals=User:CN=café,O=Acme")})
	if err != nil {
		t.Fatal(err)
	}
	if text, _ := s.Broker().Text(KeyAuthorizerClusterAction); text != "User:CN=café,O=Acme" {
		t.Fatalf("UTF-8 principal list %q, want User:CN=café,O=Acme", text)
	}
}

// A parse error of a --config file names the line but shows no raw control or non-UTF-8 byte.
func TestPropertiesParseErrorIsPrintable(t *testing.T) {
	problems := staticProblems(Sources{File: writeProps(t, "a=\\u12\xff\x01\x1b[31m")})
	if len(problems) != 1 {
		t.Fatalf("problems %v, want one", problems)
	}
	msg := problems[0].String()
	if !strings.Contains(msg, "cannot read config file") || strings.ContainsAny(msg, "\x01\x1b") || !utf8.ValidString(msg) {
		t.Fatalf("problem %q: want the file named and no raw bytes", msg)
	}
}
