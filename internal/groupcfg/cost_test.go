package groupcfg

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/coordinatord/coordinatord/internal/vfs"
)

// allocatedBy returns the bytes fn allocates (on any goroutine: the tests of the package run
// one at a time).
func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// countingFS counts the bytes written through it.
type countingFS struct {
	vfs.FS
	written atomic.Int64
}

type countingFile struct {
	vfs.File
	fs *countingFS
}

func (c *countingFS) Create(name string) (vfs.File, error) { return c.wrap(c.FS.Create(name)) }

func (c *countingFS) OpenReadWrite(name string) (vfs.File, error) {
	return c.wrap(c.FS.OpenReadWrite(name))
}

func (c *countingFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return countingFile{File: f, fs: c}, nil
}

func (f countingFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.written.Add(int64(len(p)))
	return f.File.WriteAt(p, off)
}

// TestAlterCostIsLinearInTheRequest: a request costs (here: allocates) in proportion to its
// resources; a request 16 times larger costs no more than 16 times as much, give or take.
func TestAlterCostIsLinearInTheRequest(t *testing.T) {
	perResource := func(n int) float64 {
		f := openFixture(t, t.TempDir(), staticOf(t))
		request := make([]AlterResource, n)
		for i := range request {
			request[i] = groupRes(fmt.Sprintf("group-%d", i), set(keyDeliveryCountLimit, "7"))
		}
		return float64(allocatedBy(func() { mustAlterAll(t, f.m, request) })) / float64(n)
	}
	small, large := perResource(500), perResource(8000)
	if large > 2*small {
		t.Fatalf("a request of 8000 resources allocates %.0f bytes per resource, one of 500 %.0f: "+
			"its cost grows faster than its size", large, small)
	}
	t.Logf("bytes allocated per resource: %.0f (500 resources), %.0f (8000)", small, large)
}

// TestOneGroupChangeCostsTheSame: a change of one group writes and allocates about as much with
// 20 000 other groups stored as with none.
func TestOneGroupChangeCostsTheSame(t *testing.T) {
	measure := func(stored int) (allocated uint64, written int64) {
		dir := t.TempDir()
		_ = storeGroups(t, dir, stored).m.Close()
		fsys := &countingFS{FS: vfs.OS()}
		f, err := tryOpen(t, dir, staticOf(t), fsys)
		if err != nil {
			t.Fatal(err)
		}
		f.mustAlter(t, groupRes("hot", set(keyDeliveryCountLimit, "3")))
		fsys.written.Store(0)
		allocated = allocatedBy(func() { f.mustAlter(t, groupRes("hot", set(keyDeliveryCountLimit, "4"))) })
		return allocated, fsys.written.Load()
	}
	a0, w0 := measure(0)
	a1, w1 := measure(20000)
	t.Logf("one-group change: %d bytes allocated and %d written with no other group stored, %d and %d with 20000", a0, w0, a1, w1)
	if w1 > 1024 || w1 > 2*w0 {
		t.Errorf("a one-group change writes %d bytes to the store with 20000 groups stored (%d with none)", w1, w0)
	}
	if a1 > 2*a0+16<<10 {
		t.Errorf("a one-group change allocates %d bytes with 20000 groups stored, %d with none", a1, a0)
	}
}

// TestLogLinesStayShort: the log lines of a large request, with long names and values, stay
// within a few KiB, on a single node and in a cluster: they count the changes and name the first
// few.
func TestLogLinesStayShort(t *testing.T) {
	request := []AlterResource{groupRes(strings.Repeat("g", maxGroupIDBytes), set(keyDeadLetterTopicName, strings.Repeat("t", 249)))}
	for i := range 5000 {
		request = append(request, groupRes(fmt.Sprintf("group-%d", i), set(keyDeliveryCountLimit, "7"), set(keyDeadLetterTopicName, "dlq")))
	}
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{MessageKey: "msg", LevelKey: "level", TimeKey: "ts",
		EncodeLevel: zapcore.LowercaseLevelEncoder, EncodeTime: zapcore.ISO8601TimeEncoder})
	check := func(logs *observer.ObservedLogs, message, count string, want int64) {
		t.Helper()
		found := false
		for _, e := range logs.All() {
			buf, err := enc.EncodeEntry(e.Entry, e.Context)
			if err != nil {
				t.Fatal(err)
			}
			if buf.Len() > 4096 {
				t.Errorf("a log line of %d bytes: %.300s...", buf.Len(), buf.String())
			}
			buf.Free()
			if e.Message == message {
				found = true
				if n := e.ContextMap()[count]; n != want {
					t.Errorf("%q counts %v %s, want %d", message, n, count, want)
				}
			}
		}
		if !found {
			t.Errorf("no %q log", message)
		}
	}

	f := openFixture(t, t.TempDir(), staticOf(t))
	mustAlterAll(t, f.m, request)
	check(f.logs, "config store updated", "resources", 5001)

	core, logs := observer.New(zapcore.InfoLevel)
	var m *Manager
	m, err := OpenReplicated(zap.New(core), staticOf(t), nil, Options{NodeID: 1}, func(_ context.Context, change []byte) error {
		m.ApplyConfig(change)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mustAlterAll(t, m, request)
	check(logs, "config change committed", "resources", 5001)
	check(logs, "configuration change applied", "groups", 5001)
}
