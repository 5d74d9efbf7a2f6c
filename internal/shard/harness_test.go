package shard

import (
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/record"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

// limits is a Provider with a default limit and per-group overrides, changeable at run time.
type limits struct {
	mu  sync.Mutex
	def int
	per map[string]int
}

// testOpts is how a test runs a shard on a local log: the shard's options, and the directory and
// options of its log.
type testOpts struct {
	Options
	LogDir string
	Log    statelog.Options
}

// localLog is the opener of o's log; it names the log after the partition, as the server does.
func (o testOpts) localLog(logger *zap.Logger) *LocalLog {
	lo := o.Log
	if lo.Name == "" {
		lo.Name = strconv.Itoa(o.Partition)
	}
	return NewLocalLog(logger, o.LogDir, lo)
}

// openLocal opens a shard on the local log o describes, as the server does.
func openLocal(logger *zap.Logger, provider Provider, o testOpts) *Shard {
	return Open(logger, provider, o.Options, o.localLog(logger))
}

// partitionLogDir is where a test whose partitions share the directory dir keeps partition p's
// log.
func partitionLogDir(dir string, p int) string {
	return filepath.Join(dir, "partition-"+strconv.Itoa(p))
}

func newLimits(def int) *limits { return &limits{def: def, per: map[string]int{}} }

func (l *limits) SnapshotUpdateRecordsPerSnapshot(group string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v, ok := l.per[group]; ok {
		return v
	}
	return l.def
}

func (l *limits) set(group string, v int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.per[group] = v
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// harness drives a machine as the shard goroutine does, keeping every record it produced (the
// "log") so tests can inspect records and replay them into a fresh machine.
type harness struct {
	t      testing.TB
	m      *machine
	limits *limits
	clock  *fakeClock
	p      pending
	log    [][]byte
	fresh  int // records not yet returned by records()
}

func newHarness(t testing.TB, limit int) *harness {
	h := &harness{t: t, limits: newLimits(limit), clock: newFakeClock()}
	h.m = newMachine(zaptest.NewLogger(t), h.limits, h.clock.Now, 10*time.Second, 8<<20)
	return h
}

func (h *harness) begin() { h.p.reset() }

// end "appends" the records of the operation to the harness's log, and tells the machine where.
func (h *harness) end() {
	h.m.placed(&h.p, 0, h.p.len(), int64(len(h.log)))
	for i := 0; i < h.p.len(); i++ {
		h.log = append(h.log, slices.Clone(h.p.record(i)))
	}
}

func (h *harness) initialize(r InitializeRequest) Result {
	h.begin()
	defer h.end()
	return h.m.initialize(&r, &h.p)
}

func (h *harness) write(r WriteRequest) Result {
	h.begin()
	defer h.end()
	return h.m.write(&r, &h.p)
}

func (h *harness) read(k Key, leaderEpoch int32) ReadResult {
	h.begin()
	defer h.end()
	return h.m.read(&ReadRequest{Key: k, LeaderEpoch: leaderEpoch}, &h.p)
}

func (h *harness) delete(k Key) Result {
	h.begin()
	defer h.end()
	return h.m.delete(&DeleteRequest{Key: k}, &h.p)
}

func (h *harness) summary(k Key) SummaryResult { return h.m.summary(&SummaryRequest{Key: k}) }

// cold runs a whole cold-partition snapshot job in one step and returns the records it wrote.
func (h *harness) cold() int {
	h.begin()
	defer h.end()
	j := h.m.startCold()
	if j == nil {
		return 0
	}
	h.m.coldStep(j, &h.p, math.MaxInt, math.MaxInt)
	return j.written
}

// replay appends an externally made record to the log and replays it, as Kafka's tests do.
func (h *harness) replay(r record.Record) {
	h.t.Helper()
	b, err := record.Encode(r)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.m.replayRaw(int64(len(h.log)), b); err != nil {
		h.t.Fatal(err)
	}
	h.log = append(h.log, b)
	h.fresh = len(h.log)
}

// records returns the decoded records produced since the last call.
func (h *harness) records() []record.Record {
	h.t.Helper()
	var out []record.Record
	for _, b := range h.log[h.fresh:] {
		r, err := record.Decode(b)
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, r)
	}
	h.fresh = len(h.log)
	return out
}

// lastRecord returns the single record produced since the last call to records.
func (h *harness) lastRecord() record.Record {
	h.t.Helper()
	rs := h.records()
	if len(rs) != 1 {
		h.t.Fatalf("want exactly one new record, got %d", len(rs))
	}
	return rs[0]
}

func (h *harness) noRecord() {
	h.t.Helper()
	if rs := h.records(); len(rs) != 0 {
		h.t.Fatalf("want no record, got %+v", rs)
	}
}

// view is everything the machine keeps about a key (Kafka's shard state), comparable with
// ==/DeepEqual.
type view struct {
	Offset          record.SnapshotValue // the ShareGroupOffset
	MaxLeaderEpoch  int32
	MaxStateEpoch   *int32
	UpdateCount     *int32
	SnapshotOffset  *int64
	CanonicalMarker bool
}

func (m *machine) view(k Key) *view {
	e := m.lookup(k)
	if e == nil {
		return nil
	}
	v := &view{Offset: e.snapshotOf(), MaxLeaderEpoch: e.maxLeaderEpoch}
	v.Offset.StateBatches = cloneBatches(e.batches)
	if e.flags&flagStateEpoch != 0 {
		x := e.maxStateEpoch
		v.MaxStateEpoch = &x
	}
	if e.flags&flagUpdateCount != 0 {
		x := e.updateCount
		v.UpdateCount = &x
	}
	if e.flags&flagInOffsets != 0 {
		x := e.snapOffset
		v.SnapshotOffset = &x
	}
	return v
}

// dump returns every key's view plus the last redundant offset.
func (m *machine) dump() (map[Key]view, int64, bool) {
	out := make(map[Key]view, len(m.states))
	for mk := range m.states {
		k := Key(record.DecodeKey(mk))
		out[k] = *m.view(k)
	}
	lro, ok := m.offsets.lastRedundant()
	return out, lro, ok
}

// reopened replays the harness log into a fresh machine, as a load does.
func (h *harness) reopened() *machine {
	h.t.Helper()
	m := newMachine(zaptest.NewLogger(h.t), h.limits, h.clock.Now, 10*time.Second, 8<<20)
	for i, b := range h.log {
		if err := m.replayRaw(int64(i), b); err != nil {
			h.t.Fatal(err)
		}
	}
	return m
}

func assertSameMachine(t testing.TB, got, want *machine) {
	t.Helper()
	g, glro, gok := got.dump()
	w, wlro, wok := want.dump()
	if !reflect.DeepEqual(g, w) {
		for k, wv := range w {
			if gv, ok := g[k]; !ok || !reflect.DeepEqual(gv, wv) {
				t.Fatalf("key %v: got %+v, want %+v", k, g[k], wv)
			}
		}
		t.Fatalf("key sets differ: got %d keys, want %d", len(g), len(w))
	}
	if glro != wlro || gok != wok {
		t.Fatalf("last redundant offset: got %d/%v, want %d/%v", glro, gok, wlro, wok)
	}
}
