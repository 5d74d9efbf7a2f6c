package shard

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/statelog/faultfs"
)

// coldAnswer is what a SnapshotColdPartitions call returned.
type coldAnswer struct {
	n   int
	err error
}

// afterAppendLog holds the shard after an Append that succeeded, before it returns: the shard is
// then between two commits, everything it appended durable.
type afterAppendLog struct {
	stateLog
	mu   sync.Mutex
	gate chan struct{} // when set, a successful Append waits for it to be closed
	held chan struct{} // receives as such an Append starts waiting
}

func (l *afterAppendLog) Append(records [][]byte) (int64, error) {
	first, err := l.stateLog.Append(records)
	l.mu.Lock()
	gate, held := l.gate, l.held
	l.mu.Unlock()
	if err == nil && gate != nil {
		held <- struct{}{}
		<-gate
	}
	return first, err
}

// A failed file-system sync of the sync group (another partition's) finds a partition between two
// chunks of a cold-snapshot job: it fails at once, as an idle one does (8daca25), without another
// append or a reload, and the job's call is told that the partition failed.
func TestShardSyncGroupFailsBetweenColdChunks(t *testing.T) {
	dataDir, fsys, g := newOSSyncGroup(t)
	metrics := NewMetrics(prometheus.NewRegistry(), 10)
	clock := newFakeClock()
	opts := func(p int) Options {
		return Options{Partition: p, DataDir: dataDir, Now: clock.Now, MaxBatchRecords: 1, Metrics: metrics,
			RetryBackoff: time.Millisecond, MaxRetryBackoff: time.Millisecond, Log: statelog.Options{FS: fsys, SyncGroup: g}}
	}
	a := openReal(t, zaptest.NewLogger(t), opts(0))
	var bl *afterAppendLog
	bopts := opts(1).withDefaults()
	dir, logOpts := bopts.logLocation()
	b := start(zaptest.NewLogger(t), newLimits(500), bopts, dir, func() (stateLog, error) {
		l, err := statelog.Open(zaptest.NewLogger(t), dir, logOpts)
		if err != nil {
			return nil, err
		}
		bl = &afterAppendLog{stateLog: l}
		return bl, nil
	}, nil)
	t.Cleanup(func() { _ = b.Close() })
	ctx := context.Background()
	for _, s := range []*Shard{a, b} {
		if err := s.WaitLoaded(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mustOK(t, a.Initialize(ctx, InitializeRequest{Key: testKey, StateEpoch: 1}))
	for i := 0; i < 3; i++ {
		mustOK(t, b.Initialize(ctx, InitializeRequest{Key: key(i), StateEpoch: 1}))
	}
	clock.advance(time.Second)
	gate, held := make(chan struct{}), make(chan struct{}, 1)
	bl.mu.Lock()
	bl.gate, bl.held = gate, held
	bl.mu.Unlock()
	cold := make(chan coldAnswer, 1)
	go func() { n, err := b.SnapshotColdPartitions(ctx); cold <- coldAnswer{n, err} }()
	<-held // the job's first chunk is durable; two chunks to go
	fsys.SetInjector(failNth(1, faultfs.OnKinds(faultfs.OpSyncFS), syscall.EIO))
	if r := a.Write(ctx, WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 5}); r.Code != ErrCoordinatorNotAvailable {
		t.Fatalf("write whose sync failed: %+v", r)
	}
	fsys.SetInjector(nil)
	<-g.Failed()
	bl.mu.Lock()
	bl.gate, bl.held = nil, nil
	bl.mu.Unlock()
	close(gate)
	c := <-cold
	if c.err == nil || !strings.Contains(c.err.Error(), "file-system sync") {
		t.Fatalf("cold call: %d, %v; want the sync failure", c.n, c.err)
	}
	waitState(t, b, Failed)
	if err := b.WaitLoaded(ctx); !errors.Is(err, statelog.ErrSyncFailed) {
		t.Fatalf("%v, want ErrSyncFailed", err)
	}
	if n := metricValue(t, b.metrics.reloads); n != 0 {
		t.Fatalf("partition 1 reloaded %v times; it had nothing unsynced to cut", n)
	}
	if st := b.Stats(); st.Commits != 4 {
		t.Fatalf("partition 1 made %d commits, want its 3 initializes and the job's first chunk", st.Commits)
	}
}
