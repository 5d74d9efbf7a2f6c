package groupcfg

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/vfs"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		os.Exit(runCrashChild(dir))
	}
	goleak.VerifyTestMain(m)
}

func ptr(s string) *string { return &s }

func set(name, value string) AlterConfig {
	return AlterConfig{Name: name, Op: OpSet, Value: ptr(value)}
}

func del(name string) AlterConfig { return AlterConfig{Name: name, Op: OpDelete} }

func groupRes(group string, configs ...AlterConfig) AlterResource {
	return AlterResource{Type: ResourceGroup, Name: group, Configs: configs}
}

func brokerRes(configs ...AlterConfig) AlterResource {
	return AlterResource{Type: ResourceBroker, Name: "", Configs: configs}
}

// staticProblems returns what LoadStatic rejects in src, all of it (nil when it is good).
func staticProblems(src Sources) []Problem {
	sch, err := builtinSchema()
	if err != nil {
		return []Problem{{Message: err.Error()}}
	}
	_, problems := loadStatic(sch, src)
	return problems
}

// groupValue returns the effective value of the group key for groupID, read as the Provider
// method reads the snapshot limit.
func (m *Manager) groupValue(groupID, key string) value {
	p, ok := m.sch.groupPos[key]
	if !ok {
		panic(key + " is not a group key")
	}
	return m.value(groupID, p)
}

func (m *Manager) groupInt(groupID, key string) int     { return int(m.groupValue(groupID, key).num) }
func (m *Manager) groupFlag(groupID, key string) bool   { return m.groupValue(groupID, key).flag }
func (m *Manager) groupText(groupID, key string) string { return m.groupValue(groupID, key).text }

// staticOf loads a static configuration from overrides, failing the test on any problem.
func staticOf(t testing.TB, overrides ...string) *Static {
	t.Helper()
	st, err := LoadStatic(Sources{Overrides: overrides})
	if err != nil {
		t.Fatalf("LoadStatic(%q): %v", overrides, err)
	}
	return st
}

// fixture is a Manager under test with its logs and metrics.
type fixture struct {
	m    *Manager
	dir  string
	logs *observer.ObservedLogs
	reg  *prometheus.Registry
}

// openFixture opens a Manager on dir (the OS filesystem) whose WARN+ logs are observed and also
// written to the test log.
func openFixture(t testing.TB, dir string, st *Static) *fixture {
	t.Helper()
	f, err := tryOpen(t, dir, st, vfs.OS())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return f
}

// storePath is where the tests keep the config store of the directory dir: in config/store, as
// the server does in its data directory.
func storePath(dir string) string { return filepath.Join(dir, "config", "store") }

// tryOpen opens a Manager on the store of dir in fsys.
func tryOpen(t testing.TB, dir string, st *Static, fsys vfs.FS) (*fixture, error) {
	t.Helper()
	return tryOpenWith(t, dir, st, fsys, Options{NodeID: 1})
}

// rewriting are the options of a Manager whose store rewrites its file at every change instead
// of appending a change record, so that every change goes through the rewrite and the file
// holds one snapshot.
var rewriting = Options{NodeID: 1, compactBytes: -1}

// tryOpenWith opens a Manager with opts on the store of dir in fsys.
func tryOpenWith(t testing.TB, dir string, st *Static, fsys vfs.FS, opts Options) (*fixture, error) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	logger := zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core))
	if _, bench := t.(*testing.B); bench {
		logger = zap.New(core) // keep benchmark output to the figures
	}
	reg := prometheus.NewRegistry()
	m, err := open(logger, storePath(dir), st, reg, opts, fsys)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = m.Close() })
	return &fixture{m: m, dir: dir, logs: logs, reg: reg}, nil
}

// alter applies one resource and returns its result.
func (f *fixture) alter(r AlterResource) AlterResult {
	return f.m.IncrementalAlterConfigs(context.Background(), []AlterResource{r}, false)[0]
}

// mustAlter applies one resource and fails the test unless it succeeds.
func (f *fixture) mustAlter(t testing.TB, r AlterResource) {
	t.Helper()
	if res := f.alter(r); res.ErrorCode != kafkaerr.None {
		t.Fatalf("alter %s %q: %s %s", r.Type, r.Name, res.ErrorCode, res.ErrorMessage)
	}
}

// describeGroupKey describes one key of a group, with synonyms.
func (f *fixture) describeGroupKey(t testing.TB, group, key string) DescribedConfig {
	t.Helper()
	res := f.m.DescribeConfigs([]DescribeResource{{Type: ResourceGroup, Name: group, Keys: []string{key}}}, true, true)
	if res[0].ErrorCode != kafkaerr.None || len(res[0].Configs) != 1 {
		t.Fatalf("describe %s %s: %+v", group, key, res[0])
	}
	return res[0].Configs[0]
}

// warnings returns the messages of the WARN logs observed so far that carry field config=key.
func (f *fixture) warnings(key string) []observer.LoggedEntry {
	return f.logs.FilterLevelExact(zapcore.WarnLevel).FilterField(zap.String("config", key)).All()
}

// gauge returns sharecoord_group_config_clamped{config=key}.
func (f *fixture) gauge(t testing.TB, key string) float64 {
	t.Helper()
	families, err := f.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, fam := range families {
		if fam.GetName() != "sharecoord_group_config_clamped" {
			continue
		}
		for _, m := range fam.GetMetric() {
			if labelValue(m, "config") == key {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no sharecoord_group_config_clamped{config=%q} series", key)
	return 0
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// readStore reads and decodes the store file under dir.
func readStore(t testing.TB, dir string) *storeState {
	t.Helper()
	path := storePath(dir)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read store: %v", err)
	}
	st, err := decodeStore(path, data)
	if err != nil {
		t.Fatalf("decode store: %v", err)
	}
	return st
}

// rewriteStore changes the store file under dir with edit, as a store written by another
// version of the server would hold it.
func rewriteStore(t testing.TB, dir string, edit func(*storeState)) {
	t.Helper()
	st := readStore(t, dir)
	edit(st)
	data, err := encodeStore(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(storePath(dir), data, 0o644); err != nil {
		t.Fatal(err)
	}
}
