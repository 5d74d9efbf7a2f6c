package groupcfg

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/vfs"
)

// TestGroupSnapshotOverride is the snapshot-frequency proposal's group-level test: an override
// ≤ the ceiling is accepted, one above it is refused naming both bounds and where the ceiling
// comes from, and a group without override follows the broker value as it is now.
func TestGroupSnapshotOverride(t *testing.T) {
	f := openFixture(t, t.TempDir(), staticOf(t))
	for _, tc := range []struct {
		value string
		ok    bool
		want  string
	}{
		{"200", true, ""},
		{"350", true, ""},
		{"500", true, ""},
		{"501", false, "share.snapshot.update.records.per.snapshot=501 is out of range [200, 500]: the lower bound 200 is fixed and the upper bound is the broker ceiling share.coordinator.snapshot.update.records.per.snapshot=500 (DEFAULT_CONFIG); set a value in [200, 500], or first raise share.coordinator.snapshot.update.records.per.snapshot on the BROKER resource"},
		{"199", false, "share.snapshot.update.records.per.snapshot=199 is out of range [200, 500]"},
		{"0", false, "share.snapshot.update.records.per.snapshot=0 is out of range [200, 500]"},
	} {
		res := f.alter(groupRes("g", set(keyGroupSnapshotLimit, tc.value)))
		switch {
		case tc.ok && res.ErrorCode != kafkaerr.None:
			t.Errorf("%s refused: %s", tc.value, res.ErrorMessage)
		case tc.ok && f.m.SnapshotUpdateRecordsPerSnapshot("g") != int(mustAtoi(t, tc.value)):
			t.Errorf("%s accepted but the group's limit is %d", tc.value, f.m.SnapshotUpdateRecordsPerSnapshot("g"))
		case !tc.ok && (res.ErrorCode != kafkaerr.InvalidConfig || !strings.HasPrefix(res.ErrorMessage, tc.want)):
			t.Errorf("%s: %s %q, want INVALID_CONFIG %q", tc.value, res.ErrorCode, res.ErrorMessage, tc.want)
		}
	}

	// The ceiling raised at run time: the bound named in the message follows it.
	f.mustAlter(t, brokerRes(set(keySnapshotCeiling, "800")))
	res := f.alter(groupRes("g", set(keyGroupSnapshotLimit, "900")))
	if res.ErrorCode != kafkaerr.InvalidConfig || !strings.Contains(res.ErrorMessage, "[200, 800]") ||
		!strings.Contains(res.ErrorMessage, "share.coordinator.snapshot.update.records.per.snapshot=800 (DYNAMIC_BROKER_CONFIG)") {
		t.Fatalf("900 over a dynamic ceiling of 800: %+v", res)
	}

	// Unset falls back to the broker value as it is now.
	if got := f.m.SnapshotUpdateRecordsPerSnapshot("no-override"); got != 800 {
		t.Fatalf("group without override: %d, want the ceiling 800", got)
	}
	f.mustAlter(t, brokerRes(set(keySnapshotCeiling, "600")))
	if got := f.m.SnapshotUpdateRecordsPerSnapshot("no-override"); got != 600 {
		t.Fatalf("group without override after the ceiling moved: %d, want 600", got)
	}
	f.mustAlter(t, groupRes("g", del(keyGroupSnapshotLimit)))
	if got := f.m.SnapshotUpdateRecordsPerSnapshot("g"); got != 600 {
		t.Fatalf("after DELETE: %d, want the ceiling 600", got)
	}
}

// TestDynamicCeilingClampsOverrides lowers the ceiling below a stored override: the alter is
// accepted without re-validating the group, the group's effective value is the ceiling, one WARN
// is logged, the gauge counts it, and raising the ceiling again restores the stored value.
func TestDynamicCeilingClampsOverrides(t *testing.T) {
	f := openFixture(t, t.TempDir(), staticOf(t, keySnapshotCeiling+"=1000"))
	f.mustAlter(t, groupRes("g", set(keyGroupSnapshotLimit, "900")))
	f.mustAlter(t, groupRes("h", set(keyGroupSnapshotLimit, "300")))
	if n := f.gauge(t, keyGroupSnapshotLimit); n != 0 {
		t.Fatalf("gauge %v before any clamping", n)
	}

	f.mustAlter(t, brokerRes(set(keySnapshotCeiling, "400")))
	if got := f.m.SnapshotUpdateRecordsPerSnapshot("g"); got != 400 {
		t.Fatalf("g effective %d, want 400 (clamped)", got)
	}
	if got := f.m.SnapshotUpdateRecordsPerSnapshot("h"); got != 300 {
		t.Fatalf("h effective %d, want its own 300", got)
	}
	c := f.describeGroupKey(t, "g", keyGroupSnapshotLimit)
	if c.Value != "900" || c.EffectiveValue != "400" || c.Source != SourceGroupConfig {
		t.Fatalf("describe g: %+v", c)
	}
	if n := f.gauge(t, keyGroupSnapshotLimit); n != 1 {
		t.Fatalf("gauge %v, want 1", n)
	}
	// Lookups do not log; only a change of outcome does.
	for range 100 {
		f.m.SnapshotUpdateRecordsPerSnapshot("g")
	}
	if w := f.warnings(keyGroupSnapshotLimit); len(w) != 1 || w[0].ContextMap()["group"] != "g" || w[0].ContextMap()["effective"] != int64(400) {
		t.Fatalf("WARN logs: %+v", w)
	}
	// Another change of outcome (a different clamped value) logs again; the same outcome does not.
	f.mustAlter(t, brokerRes(set(keySnapshotCeiling, "350")))
	f.mustAlter(t, groupRes("other", set(keyDeliveryCountLimit, "3")))
	if w := f.warnings(keyGroupSnapshotLimit); len(w) != 2 {
		t.Fatalf("WARN logs after the second change: %d, want 2", len(w))
	}
	// Raising the ceiling above the override ends the clamping.
	f.mustAlter(t, brokerRes(set(keySnapshotCeiling, "950")))
	if got := f.m.SnapshotUpdateRecordsPerSnapshot("g"); got != 900 {
		t.Fatalf("g effective %d after raising the ceiling, want its stored 900", got)
	}
	if n := f.gauge(t, keyGroupSnapshotLimit); n != 0 {
		t.Fatalf("gauge %v after raising the ceiling, want 0", n)
	}
	// DELETE on the broker key reverts to the static value (1000).
	f.mustAlter(t, brokerRes(del(keySnapshotCeiling)))
	if got := f.m.Broker().SnapshotUpdateRecordsPerSnapshot(); got != 1000 {
		t.Fatalf("ceiling after DELETE: %d, want the static 1000", got)
	}
	if len(readStore(t, f.dir).Broker) != 0 {
		t.Fatalf("DELETE left a stored dynamic value: %v", readStore(t, f.dir).Broker)
	}
}

// TestKIP1240RestartSequence: set overrides, lower the broker bounds, restart. Start-up succeeds,
// the stored values are unchanged, the effective values are clamped, DescribeConfigs shows both.
func TestKIP1240RestartSequence(t *testing.T) {
	dir := t.TempDir()
	f := openFixture(t, dir, staticOf(t, keySnapshotCeiling+"=1000"))
	f.mustAlter(t, groupRes("g",
		set(keyDeliveryCountLimit, "9"),
		set(keyRecordLocks, "150"),
		set(keyGroupSnapshotLimit, "900"),
		set(keyRecordLockDuration, "20000")))
	if err := f.m.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(storePath(dir))
	if err != nil {
		t.Fatal(err)
	}

	r := openFixture(t, dir, staticOf(t,
		keySnapshotCeiling+"=700",
		keyBrokerMaxDeliveryCount+"=6",
		keyBrokerMinRecordLocks+"=200",
	))
	for _, tc := range []struct {
		key              string
		got              int
		stored, effected string
		clamped          bool
	}{
		{keyDeliveryCountLimit, r.m.groupInt("g", keyDeliveryCountLimit), "9", "6", true},
		{keyRecordLocks, r.m.groupInt("g", keyRecordLocks), "150", "200", true},
		{keyGroupSnapshotLimit, r.m.SnapshotUpdateRecordsPerSnapshot("g"), "900", "700", true},
		{keyRecordLockDuration, r.m.groupInt("g", keyRecordLockDuration), "20000", "20000", false},
	} {
		if tc.got != int(mustAtoi(t, tc.effected)) {
			t.Errorf("%s: effective %d, want %s", tc.key, tc.got, tc.effected)
		}
		c := r.describeGroupKey(t, "g", tc.key)
		if c.Value != tc.stored || c.EffectiveValue != tc.effected || c.Source != SourceGroupConfig {
			t.Errorf("%s: describe %+v, want value %s effective %s", tc.key, c, tc.stored, tc.effected)
		}
		want := 0.0
		if tc.clamped {
			want = 1
		}
		if n := r.gauge(t, tc.key); n != want {
			t.Errorf("%s: gauge %v, want %v", tc.key, n, want)
		}
		if w := r.warnings(tc.key); len(w) != int(want) {
			t.Errorf("%s: %d WARN logs at start-up, want %v", tc.key, len(w), want)
		}
	}
	after, err := os.ReadFile(storePath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("start-up rewrote the store:\n%s\n---\n%s", before, after)
	}
	// The clamped override does not block other changes to the group (it is not re-validated),
	// and a new value is validated against the bounds now in force.
	r.mustAlter(t, groupRes("g", set(keyAutoOffsetReset, "earliest")))
	if res := r.alter(groupRes("g", set(keyDeliveryCountLimit, "9"))); res.ErrorCode != kafkaerr.InvalidConfig ||
		!strings.Contains(res.ErrorMessage, "[2, 6]") || !strings.Contains(res.ErrorMessage, "group.share.max.delivery.count.limit=6 (STATIC_BROKER_CONFIG)") {
		t.Fatalf("setting 9 again under a max of 6: %+v", res)
	}
}

func TestNumPartitionsRecorded(t *testing.T) {
	dir := t.TempDir()
	f := openFixture(t, dir, staticOf(t, keyNumPartitions+"=8"))
	_ = f.m.Close()
	if got := readStore(t, dir).NumPartitions; got != 8 {
		t.Fatalf("recorded %d, want 8", got)
	}
	_, err := tryOpen(t, dir, staticOf(t), vfs.OS())
	var se *StaticError
	if !errors.As(err, &se) || len(se.Problems) != 1 || se.Problems[0].Key != keyNumPartitions || !strings.Contains(err.Error(), "share.coordinator.state.topic.num.partitions=50 differs from 8") ||
		!strings.Contains(err.Error(), "start with share.coordinator.state.topic.num.partitions=8") {
		t.Fatalf("reopen with another partition count: %v", err)
	}
	openFixture(t, dir, staticOf(t, keyNumPartitions+"=8"))
}

// TestResourceAtomicity: a resource with one bad change applies none of its changes; the other
// resources of the request still apply.
func TestResourceAtomicity(t *testing.T) {
	f := openFixture(t, t.TempDir(), staticOf(t))
	results := f.m.IncrementalAlterConfigs(context.Background(), []AlterResource{
		groupRes("a", set(keyDeliveryCountLimit, "7"), set(keyRecordLocks, "99999")),
		groupRes("b", set(keyDeliveryCountLimit, "8")),
		groupRes("c", set(keyDeliveryCountLimit, "4"), set("share.no.such.config", "1")),
	}, false)
	if results[0].ErrorCode != kafkaerr.InvalidConfig || results[1].ErrorCode != kafkaerr.None || results[2].ErrorCode != kafkaerr.InvalidConfig {
		t.Fatalf("results: %+v", results)
	}
	if got := f.m.groupInt("a", keyDeliveryCountLimit); got != 5 {
		t.Fatalf("group a took part of a refused resource: %d", got)
	}
	if got := f.m.groupInt("c", keyDeliveryCountLimit); got != 5 {
		t.Fatalf("group c took part of a refused resource: %d", got)
	}
	if got := f.m.groupInt("b", keyDeliveryCountLimit); got != 8 {
		t.Fatalf("group b: %d, want 8", got)
	}
	st := readStore(t, f.dir)
	if len(st.Groups) != 1 || st.Groups["b"][keyDeliveryCountLimit] != "8" || st.Generation != 2 {
		t.Fatalf("store: %+v", st)
	}
}

func TestValidateOnly(t *testing.T) {
	f := openFixture(t, t.TempDir(), staticOf(t))
	f.mustAlter(t, groupRes("g", set(keyDeliveryCountLimit, "7")))
	before, _ := os.ReadFile(storePath(f.dir))
	request := []AlterResource{
		groupRes("g", set(keyDeliveryCountLimit, "8"), del(keyRecordLocks)),
		groupRes("h", set(keyDeliveryCountLimit, "11")),
		brokerRes(set(keySnapshotCeiling, "700")),
	}
	dry := f.m.IncrementalAlterConfigs(context.Background(), request, true)
	after, _ := os.ReadFile(storePath(f.dir))
	if !bytes.Equal(before, after) {
		t.Fatal("validate_only changed the store")
	}
	if f.m.groupInt("g", keyDeliveryCountLimit) != 7 || f.m.Broker().SnapshotUpdateRecordsPerSnapshot() != 500 {
		t.Fatal("validate_only changed the values in force")
	}
	real := f.m.IncrementalAlterConfigs(context.Background(), request, false)
	for i := range dry {
		if dry[i] != real[i] {
			t.Errorf("resource %d: validate_only said %+v, the real request %+v", i, dry[i], real[i])
		}
	}
	if f.m.groupInt("g", keyDeliveryCountLimit) != 8 || f.m.Broker().SnapshotUpdateRecordsPerSnapshot() != 700 {
		t.Fatal("the real request did not apply")
	}
}

func TestAlterRequestErrors(t *testing.T) {
	f := openFixture(t, t.TempDir(), staticOf(t))
	for _, tc := range []struct {
		name string
		res  AlterResource
		code kafkaerr.Code
		want string
	}{
		{"topic", AlterResource{Type: ResourceTopic, Name: "orders"}, kafkaerr.InvalidRequest, "TOPIC resources are not supported by coordinatord"},
		{"unspecified type", AlterResource{Type: 0, Name: "x"}, kafkaerr.InvalidRequest, "resource type 0 is not supported"},
		{"empty group", groupRes("", set(keyDeliveryCountLimit, "4")), kafkaerr.InvalidRequest, "needs a group id"},
		{"other broker", AlterResource{Type: ResourceBroker, Name: "2", Configs: []AlterConfig{set(keySnapshotCeiling, "600")}}, kafkaerr.InvalidRequest, "BROKER resource 2 is not this node"},
		{"broker name not a number", AlterResource{Type: ResourceBroker, Name: "one"}, kafkaerr.InvalidRequest, "is not this node"},
		{"unspecified op", groupRes("g", AlterConfig{Name: keyDeliveryCountLimit, Value: ptr("4")}), kafkaerr.InvalidConfig, "config operation 0"},
		{"set without value", groupRes("g", AlterConfig{Name: keyDeliveryCountLimit, Op: OpSet}), kafkaerr.InvalidRequest, "SET of share.delivery.count.limit needs a value"},
		{"group id not UTF-8", groupRes("g\xff", set(keyDeliveryCountLimit, "4")), kafkaerr.InvalidRequest, "not valid UTF-8"},
		{"value not UTF-8", groupRes("g", set(keyDeadLetterTopicName, "dlq\xfe")), kafkaerr.InvalidRequest, "must be valid UTF-8"},
		{"duplicate config", groupRes("g", set(keyDeliveryCountLimit, "4"), set(keyDeliveryCountLimit, "5")), kafkaerr.InvalidRequest, "appears more than once"},
		{"unknown group config", groupRes("g", set("share.foo", "1")), kafkaerr.InvalidConfig, "unknown group config share.foo"},
		{"broker key on group", groupRes("g", set(keyBrokerDeliveryCountLimit, "4")), kafkaerr.InvalidConfig, "group.share.delivery.count.limit is a broker config, not a group config; set it in the properties file"},
		{"append on int group key", groupRes("g", AlterConfig{Name: keyDeliveryCountLimit, Op: OpAppend, Value: ptr("4")}), kafkaerr.InvalidConfig, "APPEND applies to LIST configs only and share.delivery.count.limit has type INT; use SET"},
		{"subtract on bool group key", groupRes("g", AlterConfig{Name: keyRenewAcknowledge, Op: OpSubtract, Value: ptr("true")}), kafkaerr.InvalidConfig, "SUBTRACT applies to LIST configs only"},
		{"append on broker key", brokerRes(AlterConfig{Name: keySnapshotCeiling, Op: OpAppend, Value: ptr("4")}), kafkaerr.InvalidConfig, "APPEND applies to LIST configs only"},
		{"static broker key", brokerRes(set(keyWriteTimeoutMs, "100")), kafkaerr.InvalidConfig, "share.coordinator.write.timeout.ms cannot be updated dynamically; set it in the properties file, environment or --override and restart"},
		{"group key on broker", brokerRes(set(keyGroupSnapshotLimit, "300")), kafkaerr.InvalidConfig, "is a group config, not a broker config; alter it on a GROUP resource"},
		{"unknown broker key", brokerRes(set("share.coordinator.nope", "1")), kafkaerr.InvalidConfig, "unknown broker config share.coordinator.nope"},
		{"ceiling below floor", brokerRes(set(keySnapshotCeiling, "0")), kafkaerr.InvalidConfig, "share.coordinator.snapshot.update.records.per.snapshot=0 is out of range [200, 1000]: values below 200 are no longer supported; set a value in [200, 1000]"},
		{"ceiling above max", brokerRes(set(keySnapshotCeiling, "1001")), kafkaerr.InvalidConfig, "=1001 is out of range [200, 1000]"},
		{"ceiling not a number", brokerRes(set(keySnapshotCeiling, "lots")), kafkaerr.InvalidConfig, "=lots is not a valid INT: set a whole number in [200, 1000]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := f.alter(tc.res)
			if res.ErrorCode != tc.code || !strings.Contains(res.ErrorMessage, tc.want) {
				t.Fatalf("%s %q, want %s containing %q", res.ErrorCode, res.ErrorMessage, tc.code, tc.want)
			}
			if res.Type != tc.res.Type || res.Name != tc.res.Name {
				t.Fatalf("result names %s %q, want %s %q", res.Type, res.Name, tc.res.Type, tc.res.Name)
			}
		})
	}
	if gen := readStore(t, f.dir).Generation; gen != 1 {
		t.Fatalf("refused changes wrote the store (generation %d)", gen)
	}
	// The node's own id addresses the same BROKER resource as "".
	f.mustAlter(t, AlterResource{Type: ResourceBroker, Name: "1", Configs: []AlterConfig{set(keySnapshotCeiling, "600")}})
	// Both names in one request are the same resource twice.
	results := f.m.IncrementalAlterConfigs(context.Background(), []AlterResource{
		{Type: ResourceBroker, Name: "1", Configs: []AlterConfig{set(keySnapshotCeiling, "700")}},
		brokerRes(set(keySnapshotCeiling, "800")),
	}, false)
	for _, r := range results {
		if r.ErrorCode != kafkaerr.InvalidRequest || !strings.Contains(r.ErrorMessage, `BROKER resources "" and "1" both name this node`) {
			t.Fatalf("duplicate resource: %+v", results)
		}
	}
	// The same name twice is a plain duplicate, whichever node it names.
	for _, name := range []string{"", "7"} {
		results = f.m.IncrementalAlterConfigs(context.Background(), []AlterResource{{Type: ResourceBroker, Name: name}, {Type: ResourceBroker, Name: name}}, true)
		for _, r := range results {
			if r.ErrorCode != kafkaerr.InvalidRequest || !strings.Contains(r.ErrorMessage, "appears more than once") || strings.Contains(r.ErrorMessage, "both name") {
				t.Fatalf("BROKER %q twice: %+v", name, results)
			}
		}
	}
}

// TestSessionHeartbeatRelation checks the group rule session > heartbeat on the values the group
// would run with, when bounds allow them to cross.
func TestSessionHeartbeatRelation(t *testing.T) {
	f := openFixture(t, t.TempDir(), staticOf(t, keyBrokerMaxHeartbeatInterval+"=50000", keyBrokerMinSessionTimeout+"=10000"))
	res := f.alter(groupRes("g", set(keyHeartbeatInterval, "46000")))
	if res.ErrorCode != kafkaerr.InvalidConfig || res.ErrorMessage != "share.session.timeout.ms=45000 (inherited) must be greater than share.heartbeat.interval.ms=46000; raise share.session.timeout.ms or lower share.heartbeat.interval.ms" {
		t.Fatalf("heartbeat above the inherited session: %+v", res)
	}
	f.mustAlter(t, groupRes("g", set(keyHeartbeatInterval, "46000"), set(keySessionTimeout, "50000")))
	res = f.alter(groupRes("g", set(keySessionTimeout, "46000")))
	if res.ErrorCode != kafkaerr.InvalidConfig || !strings.Contains(res.ErrorMessage, "share.session.timeout.ms=46000 must be greater than share.heartbeat.interval.ms=46000;") {
		t.Fatalf("session equal to the stored heartbeat: %+v", res)
	}
	// Unrelated keys are not blocked by the relation.
	f.mustAlter(t, groupRes("g", set(keyDeliveryCountLimit, "4")))
}

// TestListOperations exercises APPEND and SUBTRACT on a LIST group key (the built-in table has
// none yet, so the test adds one).
func TestListOperations(t *testing.T) {
	defs := append(Definitions(), Definition{
		Name: "share.test.tags", Type: TypeList, Default: "a,b", Importance: ImportanceLow,
		Doc: "Test list.", Scope: ScopeGroup, Dynamic: true,
	})
	sch, err := newSchema(defs)
	if err != nil {
		t.Fatal(err)
	}
	st, problems := loadStatic(sch, Sources{})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	f := openFixture(t, t.TempDir(), st)
	for _, step := range []struct {
		op   Operation
		arg  string
		want string
	}{
		{OpAppend, "c, a", "a,b,c"},
		{OpSubtract, "a", "b,c"},
		{OpSet, " x , y ", "x,y"},
		{OpSubtract, "nope", "x,y"},
		{OpDelete, "", "a,b"},
	} {
		f.mustAlter(t, groupRes("g", AlterConfig{Name: "share.test.tags", Op: step.op, Value: ptr(step.arg)}))
		if got := f.m.groupText("g", "share.test.tags"); got != step.want {
			t.Fatalf("after %s %q: %q, want %q", step.op, step.arg, got, step.want)
		}
	}
}

func TestCloseStopsChanges(t *testing.T) {
	f := openFixture(t, t.TempDir(), staticOf(t))
	f.mustAlter(t, groupRes("g", set(keyDeliveryCountLimit, "7")))
	if err := f.m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	res := f.alter(groupRes("g", set(keyDeliveryCountLimit, "8")))
	if res.ErrorCode != kafkaerr.UnknownServerError || !strings.Contains(res.ErrorMessage, "closed") {
		t.Fatalf("alter after Close: %+v", res)
	}
	if f.m.groupInt("g", keyDeliveryCountLimit) != 7 {
		t.Fatal("lookups after Close do not answer from the last state")
	}
	families, _ := f.reg.Gather()
	for _, fam := range families {
		if fam.GetName() == "sharecoord_group_config_clamped" {
			t.Fatal("the gauge is still registered after Close")
		}
	}
	// The same registry takes a reopened Manager.
	m, err := Open(nil, storePath(f.dir), staticOf(t), f.reg, Options{NodeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	_ = m.Close()
}

func TestMetricsShareRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := Open(nil, storePath(t.TempDir()), staticOf(t), reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(nil, storePath(t.TempDir()), staticOf(t), reg, Options{})
	if err != nil {
		t.Fatalf("second Manager on one registry: %v", err)
	}
	defer b.Close()
	if err := reg.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "other_metric"})); err != nil {
		t.Fatal(err)
	}
	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "sharecoord_group_config_clamped"}))
	if _, err := Open(nil, storePath(t.TempDir()), staticOf(t), clash, Options{}); err == nil {
		t.Fatal("Open succeeded on a registry with a different collector of the same name")
	}
}

// TestIgnoredStoredEntries opens a store with entries this release cannot apply: start-up
// succeeds, they are logged and ignored, and kept.
func TestIgnoredStoredEntries(t *testing.T) {
	dir := t.TempDir()
	state := &storeState{
		NumPartitions: 50, Generation: 3,
		Broker: map[string]string{keySnapshotCeiling: "100", keyWriteTimeoutMs: "10", "share.coordinator.gone": "1"},
		Groups: map[string]map[string]string{"g": {
			"share.gone": "1", keyIsolationLevel: "READ_ALL", keyDeliveryCountLimit: "x", keyRecordLocks: "300",
		}},
	}
	data, err := encodeStore(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(storePath(dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(storePath(dir), data, 0o644); err != nil {
		t.Fatal(err)
	}
	f := openFixture(t, dir, staticOf(t))
	b := f.m.Broker()
	if b.SnapshotUpdateRecordsPerSnapshot() != 500 || b.WriteTimeoutMs() != 5000 {
		t.Fatalf("ignored dynamic values applied: ceiling %d, write timeout %d", b.SnapshotUpdateRecordsPerSnapshot(), b.WriteTimeoutMs())
	}
	if f.m.groupText("g", keyIsolationLevel) != "read_uncommitted" || f.m.groupInt("g", keyDeliveryCountLimit) != 5 || f.m.groupInt("g", keyRecordLocks) != 300 {
		t.Fatalf("group g: isolation %q, delivery %d, locks %d", f.m.groupText("g", keyIsolationLevel), f.m.groupInt("g", keyDeliveryCountLimit), f.m.groupInt("g", keyRecordLocks))
	}
	for _, key := range []string{keySnapshotCeiling, keyWriteTimeoutMs, "share.coordinator.gone", "share.gone", keyIsolationLevel, keyDeliveryCountLimit} {
		if len(f.warnings(key)) != 1 {
			t.Errorf("%s: %d WARN logs, want 1", key, len(f.warnings(key)))
		}
	}
	// A later change keeps the entries it does not touch.
	f.mustAlter(t, groupRes("h", set(keyDeliveryCountLimit, "3")))
	if st := readStore(t, dir); st.Groups["g"]["share.gone"] != "1" || st.Broker["share.coordinator.gone"] != "1" {
		t.Fatalf("entries dropped: %+v", st)
	}
}

func TestEffectiveEntries(t *testing.T) {
	f := openFixture(t, t.TempDir(), staticOf(t, keyWriteTimeoutMs+"=7000"))
	f.mustAlter(t, brokerRes(set(keySnapshotCeiling, "900")))
	got := map[string]Entry{}
	for _, e := range f.m.Effective() {
		got[e.Name] = e
	}
	if len(got) != len(f.m.sch.broker) {
		t.Fatalf("%d entries, want one per broker key (%d)", len(got), len(f.m.sch.broker))
	}
	for _, tc := range []Entry{
		{Name: keySnapshotCeiling, Value: "900", Source: SourceDynamicBrokerConfig, Origin: "dynamic"},
		{Name: keyWriteTimeoutMs, Value: "7000", Source: SourceStaticBrokerConfig, Origin: "--override"},
		{Name: keyLoadBufferSize, Value: "5242880", Source: SourceDefaultConfig},
	} {
		if got[tc.Name] != tc {
			t.Errorf("%s: %+v, want %+v", tc.Name, got[tc.Name], tc)
		}
	}
}

// TestSecretsMasked uses a table with a sensitive broker key: Effective, DescribeConfigs and
// problems never show its value.
func TestSecretsMasked(t *testing.T) {
	defs := append(Definitions(), Definition{
		Name: "tls.key.password", Type: TypePassword, Default: "", Importance: ImportanceHigh,
		Doc: "Test secret.", Scope: ScopeBroker, Sensitive: true,
	})
	sch, err := newSchema(defs)
	if err != nil {
		t.Fatal(err)
	}
	st, problems := loadStatic(sch, Sources{Overrides: []string{"tls.key.password=hunter2"}})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	f := openFixture(t, t.TempDir(), st)
	for _, e := range f.m.Effective() {
		if e.Name == "tls.key.password" && e.Value != "[hidden]" {
			t.Fatalf("Effective shows the secret: %+v", e)
		}
	}
	res := f.m.DescribeConfigs([]DescribeResource{{Type: ResourceBroker, Keys: []string{"tls.key.password"}}}, true, false)
	c := res[0].Configs[0]
	if c.Value != "" || !c.Sensitive || c.Synonyms[0].Value != "" {
		t.Fatalf("describe shows the secret: %+v", c)
	}
	if v, _ := f.m.Broker().Text("tls.key.password"); v != "hunter2" {
		t.Fatalf("the process itself cannot read the secret: %q", v)
	}
	if strings.Contains(markdownTable(), "hunter2") {
		t.Fatal("secret in the table")
	}
}

// TestClampingBreaksSessionHeartbeatRule: when clamping leaves a group's session timeout at or
// below its heartbeat interval, that is logged (as in Kafka, not refused: the values are stored).
func TestClampingBreaksSessionHeartbeatRule(t *testing.T) {
	dir := t.TempDir()
	f := openFixture(t, dir, staticOf(t, keyBrokerMaxHeartbeatInterval+"=50000"))
	f.mustAlter(t, groupRes("g", set(keyHeartbeatInterval, "50000"), set(keySessionTimeout, "55000")))
	if err := f.m.Close(); err != nil {
		t.Fatal(err)
	}
	r := openFixture(t, dir, staticOf(t, keyBrokerMaxHeartbeatInterval+"=60000", keyBrokerMaxSessionTimeout+"=48000"))
	w := r.logs.FilterMessageSnippet("session timeout is not above its heartbeat interval").All()
	if len(w) != 1 || w[0].ContextMap()["group"] != "g" || w[0].ContextMap()[keySessionTimeout] != int64(48000) ||
		w[0].ContextMap()[keyHeartbeatInterval] != int64(50000) {
		t.Fatalf("warnings %+v, want one for group g with 48000 and 50000", w)
	}
}

// TestStoredAutoOffsetResetKeywordCase: a share.auto.offset.reset override stored with an
// upper-case keyword (accepted before keywords had to be lower case) still applies, lower-cased,
// instead of being ignored in favour of the inherited value.
func TestStoredAutoOffsetResetKeywordCase(t *testing.T) {
	dir := t.TempDir()
	f := openFixture(t, dir, staticOf(t))
	f.mustAlter(t, groupRes("g", set(keyAutoOffsetReset, "earliest")))
	f.mustAlter(t, groupRes("h", set(keyAutoOffsetReset, "by_duration:PT1H")))
	if err := f.m.Close(); err != nil {
		t.Fatal(err)
	}
	rewriteStore(t, dir, func(st *storeState) {
		st.Groups["g"][keyAutoOffsetReset] = "EARLIEST"
		st.Groups["h"][keyAutoOffsetReset] = "BY_DURATION:PT1H"
	})
	r := openFixture(t, dir, staticOf(t))
	if got := r.m.groupText("g", keyAutoOffsetReset); got != "earliest" {
		t.Errorf("g: %q, want earliest", got)
	}
	if got := r.m.groupText("h", keyAutoOffsetReset); got != "by_duration:PT1H" {
		t.Errorf("h: %q, want by_duration:PT1H", got)
	}
	if w := r.logs.FilterMessageSnippet("ignoring a stored group override").Len(); w != 0 {
		t.Errorf("%d warnings about ignored overrides, want none", w)
	}
}

// TestOverlongGroupName: a GROUP name longer than any group id is refused, but overrides stored
// for one before that was checked can still be described and deleted.
func TestOverlongGroupName(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("g", maxGroupIDBytes+1)
	f := openFixture(t, dir, staticOf(t))
	if res := f.alter(groupRes(long, set(keyDeliveryCountLimit, "4"))); res.ErrorCode != kafkaerr.InvalidRequest ||
		!strings.Contains(res.ErrorMessage, "a group id has at most 32767 bytes") {
		t.Fatalf("alter of an overlong group: %s %q", res.ErrorCode, res.ErrorMessage)
	}
	f.mustAlter(t, groupRes(strings.Repeat("g", maxGroupIDBytes), set(keyDeliveryCountLimit, "4")))
	if err := f.m.Close(); err != nil {
		t.Fatal(err)
	}
	rewriteStore(t, dir, func(st *storeState) { st.Groups[long] = map[string]string{keyDeliveryCountLimit: "6"} })
	r := openFixture(t, dir, staticOf(t))
	d := r.m.DescribeConfigs([]DescribeResource{{Type: ResourceGroup, Name: long, Keys: []string{keyDeliveryCountLimit}}}, false, false)
	if d[0].ErrorCode != kafkaerr.None || len(d[0].Configs) != 1 || d[0].Configs[0].Value != "6" {
		t.Fatalf("describe of a stored overlong group: %+v", d[0])
	}
	if res := r.alter(groupRes(long, set(keyDeliveryCountLimit, "7"))); res.ErrorCode != kafkaerr.InvalidRequest ||
		!strings.Contains(res.ErrorMessage, "can only be deleted") {
		t.Fatalf("SET on a stored overlong group: %s %q", res.ErrorCode, res.ErrorMessage)
	}
	r.mustAlter(t, groupRes(long, AlterConfig{Name: keyDeliveryCountLimit, Op: OpDelete}))
	if _, ok := readStore(t, dir).Groups[long]; ok {
		t.Fatal("the stored overlong group is still in the store after its override was deleted")
	}
}

// TestDeleteNamesThisReleaseCannotAlter: as in Kafka (ConfigurationControlManager
// .incrementalAlterConfigResource), DELETE removes whatever is stored under a name and is a no-op
// for a name that is not stored, whether or not this release knows it. Overrides stored by
// another release (an unknown key, a broker key no longer dynamic) can so be dropped, as the WARN
// logged on open tells the operator to do.
func TestDeleteNamesThisReleaseCannotAlter(t *testing.T) {
	dir := t.TempDir()
	f := openFixture(t, dir, staticOf(t))
	f.mustAlter(t, groupRes("g", set(keyDeliveryCountLimit, "6")))
	if err := f.m.Close(); err != nil {
		t.Fatal(err)
	}
	const future = "share.future.config"
	rewriteStore(t, dir, func(st *storeState) {
		st.Groups["g"][future] = "x"
		st.Groups["h"] = map[string]string{future: "y"}
		st.Broker["share.coordinator.future.config"] = "1"
		st.Broker[keyWriteTimeoutMs] = "100"
	})
	r := openFixture(t, dir, staticOf(t))
	if w := r.logs.FilterMessageSnippet("ignoring a stored").Len(); w != 4 {
		t.Fatalf("%d warnings about ignored stored values, want 4", w)
	}
	for _, res := range []AlterResource{
		groupRes("g", del(future)),
		groupRes("h", del(future)),
		brokerRes(del("share.coordinator.future.config"), del(keyWriteTimeoutMs)),
		groupRes("g", del("share.never.set")),
		groupRes("g", del(keyBrokerDeliveryCountLimit)),
	} {
		r.mustAlter(t, res)
	}
	st := readStore(t, dir)
	if len(st.Broker) != 0 || len(st.Groups) != 1 || len(st.Groups["g"]) != 1 || st.Groups["g"][keyDeliveryCountLimit] != "6" {
		t.Fatalf("store after the deletes: broker %v, groups %v; want no broker values and only g's %s=6",
			st.Broker, st.Groups, keyDeliveryCountLimit)
	}
	if got := r.m.groupInt("g", keyDeliveryCountLimit); got != 6 {
		t.Fatalf("g's delivery count limit = %d, want 6", got)
	}
}

// TestIgnoredBrokerValueWarnedOnce: a stored dynamic broker value this release ignores is logged
// when the store is opened, not again at every later change of the broker values.
func TestIgnoredBrokerValueWarnedOnce(t *testing.T) {
	dir := t.TempDir()
	_ = openFixture(t, dir, staticOf(t)).m.Close()
	rewriteStore(t, dir, func(st *storeState) { st.Broker = map[string]string{"share.coordinator.gone": "1"} })
	f := openFixture(t, dir, staticOf(t))
	f.mustAlter(t, brokerRes(set(keySnapshotCeiling, "700")))
	f.mustAlter(t, brokerRes(set(keySnapshotCeiling, "800")))
	if n := f.logs.FilterMessageSnippet("ignoring a stored dynamic broker config").Len(); n != 1 {
		t.Fatalf("%d warnings about the ignored value, want the one at open", n)
	}
}
