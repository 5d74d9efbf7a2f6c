package service

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordinatord/coordinatord/internal/record"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// faultServer is a gRPC server over real shards on disk, each partition's log behind its own
// fault-injecting filesystem.
type faultServer struct {
	t      *testing.T
	fs     []*faultfs.FS
	shards []*shard.Shard
	reg    *prometheus.Registry
	srv    *Server
	conn   *grpc.ClientConn
	state  pb.ShareCoordinatorServiceClient
	done   chan error
}

func startFaultServer(t *testing.T, dir string, partitions int) *faultServer {
	t.Helper()
	logger := zaptest.NewLogger(t)
	fx := &faultServer{t: t, reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	logMetrics := statelog.NewMetrics(fx.reg)
	metrics := shard.NewMetrics(fx.reg, 10)
	parts := make([]Partition, partitions)
	for p := range partitions {
		fsys := faultfs.Wrap(vfs.OS(), nil)
		s := shard.Open(logger, fixedLimit(200), shard.Options{
			Partition: p, Metrics: metrics, AppendLingerMs: -1,
			RetryBackoff: 5 * time.Millisecond, MaxRetryBackoff: 50 * time.Millisecond,
		}, shard.NewLocalLog(logger, filepath.Join(dir, strconv.Itoa(p)), statelog.Options{FS: fsys, Metrics: logMetrics, Name: strconv.Itoa(p)}))
		if err := s.WaitLoaded(context.Background()); err != nil {
			t.Fatalf("load partition %d: %v", p, err)
		}
		fx.fs, fx.shards, parts[p] = append(fx.fs, fsys), append(fx.shards, s), s
	}
	fx.srv = NewServer(logger, NewStateServer(parts, StateOptions{}), NewConfigServer(stubConfigs{}, ConfigOptions{}), ServerOptions{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { fx.done <- fx.srv.GRPC.Serve(lis) }()
	if fx.conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
	fx.state = pb.NewShareCoordinatorServiceClient(fx.conn)
	t.Cleanup(fx.stop)
	return fx
}

func (fx *faultServer) stop() {
	if fx.conn == nil {
		return
	}
	_ = fx.conn.Close()
	fx.conn = nil
	fx.srv.GRPC.Stop()
	<-fx.done
	for _, s := range fx.shards {
		_ = s.Close()
	}
}

// keysPerPartition returns n group ids per state partition whose key (topicA, partition 0) routes
// there.
func keysPerPartition(partitions, n int) [][]string {
	id, _ := record.ParseTopicID(topicA)
	out := make([][]string, partitions)
	for i, filled := 0, 0; filled < partitions*n; i++ {
		g := "fault-" + strconv.Itoa(i)
		p := shard.PartitionFor(shard.Key{GroupID: g, TopicID: id}.CoordinatorKey(), partitions)
		if len(out[p]) < n {
			out[p] = append(out[p], g)
			filled++
		}
	}
	return out
}

// writer writes offsets 0, 1, 2, ... of one key as acknowledged, recording what was acknowledged
// and every error code it met.
type writer struct {
	group     string
	partition int
	acked     atomic.Int64 // number of acknowledged writes; offsets [0, acked) are acknowledged
	retriable atomic.Int64 // answers COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS
	causes    sync.Map     // messages of retriable answers
	bad       atomic.Value // first unexpected answer (string)
}

func (w *writer) run(ctx context.Context, client pb.ShareCoordinatorServiceClient, progress chan<- struct{}) {
	for ctx.Err() == nil {
		off := w.acked.Load()
		resp, err := client.WriteShareGroupState(ctx, writeReq(w.group, topicA, 0, 1, 1, -1, batch(off, off, 2, 1)))
		if err != nil {
			if ctx.Err() == nil {
				w.bad.CompareAndSwap(nil, "gRPC error: "+err.Error())
			}
			return
		}
		r := resp.GetResults()[0].GetPartitions()[0]
		switch r.GetErrorCode() {
		case pb.ErrorCode_ERROR_CODE_NONE:
			w.acked.Add(1)
		case pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, pb.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS:
			w.retriable.Add(1)
			w.causes.Store(r.GetErrorMessage(), struct{}{})
		default:
			w.bad.CompareAndSwap(nil, fmt.Sprintf("%v %s", r.GetErrorCode(), r.GetErrorMessage()))
			return
		}
		select {
		case progress <- struct{}{}:
		default:
		}
	}
}

// counting counts the operations an injector failed.
type counting struct {
	inner faultfs.Injector
	fired *atomic.Int64
}

func (c counting) MaybeError(op faultfs.Op) error {
	err := c.inner.MaybeError(op)
	if err != nil {
		c.fired.Add(1)
	}
	return err
}

// faultFigures accumulate over the fault tests, for the log.
type faultFigures struct {
	injected, retriable, acknowledged, verified atomic.Int64
}

// TestDiskFaultsUnderLoad fails the writes or fsyncs of one state partition's log with ENOSPC or
// EIO while clients write to every partition: the affected calls get a retriable error and the
// shard reloads, the other partitions keep acknowledging writes, the partition serves again once
// the fault clears, and after a restart every acknowledged write is on disk.
func TestDiskFaultsUnderLoad(t *testing.T) {
	const partitions = 4
	var figures faultFigures
	for _, fault := range []struct {
		name string
		kind faultfs.OpKind
		err  error
		text string
	}{
		{"ENOSPC on write", faultfs.OpWrite, syscall.ENOSPC, "no space left on device"},
		{"EIO on write", faultfs.OpWrite, syscall.EIO, "input/output error"},
		{"ENOSPC on fsync", faultfs.OpSync, syscall.ENOSPC, "no space left on device"},
		{"EIO on fsync", faultfs.OpSync, syscall.EIO, "input/output error"},
	} {
		t.Run(fault.name, func(t *testing.T) {
			dir := t.TempDir()
			fx := startFaultServer(t, dir, partitions)
			groups := keysPerPartition(partitions, 2)
			ctx, cancel := context.WithCancel(ctxT(t))
			var writers []*writer
			for p, gs := range groups {
				for _, g := range gs {
					resp, err := fx.state.InitializeShareGroupState(ctx, initReq(g, topicA, 0, 1, 0))
					if err != nil || resp.GetResults()[0].GetPartitions()[0].GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
						t.Fatalf("initialize %s: %v %v", g, resp, err)
					}
					writers = append(writers, &writer{group: g, partition: p})
				}
			}
			progress := make(chan struct{}, 1)
			var wg sync.WaitGroup
			for _, w := range writers {
				wg.Go(func() { w.run(ctx, fx.state, progress) })
			}
			stopWriters := func() {
				cancel()
				wg.Wait()
				for _, w := range writers {
					if bad := w.bad.Load(); bad != nil {
						t.Fatalf("%s (partition %d): unexpected answer %v", w.group, w.partition, bad)
					}
				}
			}
			defer stopWriters()
			// waitFor blocks until cond holds, re-checking after every answer a writer gets.
			waitFor := func(what string, cond func() bool) {
				t.Helper()
				deadline := time.After(30 * time.Second)
				for !cond() {
					select {
					case <-progress:
					case <-deadline:
						t.Fatalf("timed out waiting for %s", what)
					}
				}
			}
			sum := func(victim bool, f func(*writer) int64) int64 {
				var n int64
				for _, w := range writers {
					if (w.partition == 1) == victim {
						n += f(w)
					}
				}
				return n
			}
			acked := func(w *writer) int64 { return w.acked.Load() }
			retriable := func(w *writer) int64 { return w.retriable.Load() }

			waitFor("writes on every partition", func() bool {
				for _, w := range writers {
					if w.acked.Load() < 5 {
						return false
					}
				}
				return true
			})

			// The fault: partition 1's log fails every operation of the kind.
			const victim = 1
			var fired atomic.Int64
			fx.fs[victim].SetInjector(counting{faultfs.Match(faultfs.OnKinds(fault.kind), fault.err), &fired})
			waitFor("retriable errors on the faulty partition", func() bool { return sum(true, retriable) >= 10 })
			victimAcked, othersAcked := sum(true, acked), sum(false, acked)
			waitFor("more retriable errors on the faulty partition, and writes on the others",
				func() bool { return sum(true, retriable) >= 40 && sum(false, acked) >= othersAcked+40 })
			if got := sum(true, acked); got != victimAcked {
				t.Fatalf("the faulty partition acknowledged %d writes while its log failed every %s", got-victimAcked, fault.kind)
			}
			if n := gathered(t, fx.reg, "sharecoord_shard_reloads_total", "partition", "1"); n < 1 {
				t.Fatalf("partition %d did not reload (reloads %v)", victim, n)
			}
			named := false
			for _, w := range writers {
				w.causes.Range(func(k, _ any) bool {
					named = named || strings.Contains(k.(string), fault.text)
					return true
				})
			}
			if !named {
				t.Fatalf("no retriable answer named the cause %q", fault.text)
			}
			// Answers given while the partition reloads after the failed append name it too.
			loading := 0
			for _, w := range writers {
				w.causes.Range(func(k, _ any) bool {
					if msg := k.(string); strings.HasPrefix(msg, "The coordinator is loading") {
						loading++
						if !strings.Contains(msg, fault.text) {
							t.Errorf("a LOAD_IN_PROGRESS answer during the fault does not name it: %q", msg)
						}
					}
					return true
				})
			}
			t.Logf("%d distinct LOAD_IN_PROGRESS messages during the fault", loading)

			// The fault clears: the partition serves again.
			fx.fs[victim].SetInjector(nil)
			waitFor("writes on the recovered partition", func() bool { return sum(true, acked) >= victimAcked+20 })
			stopWriters()
			fx.stop()

			// Nothing acknowledged is lost: a fresh server on the same directory has every write.
			after := startFaultServer(t, dir, partitions)
			for _, w := range writers {
				rr, err := after.state.ReadShareGroupState(ctxT(t), readReq(w.group, topicA, 0, 1))
				if err != nil {
					t.Fatal(err)
				}
				got := rr.GetResults()[0].GetPartitions()[0]
				n := w.acked.Load()
				if !covers(got.GetStateBatches(), 0, n-1, 2) {
					t.Fatalf("%s (partition %d): acknowledged offsets [0, %d] not all acknowledged after restart: %v",
						w.group, w.partition, n-1, got.GetStateBatches())
				}
				figures.acknowledged.Add(n)
				figures.verified.Add(n)
				figures.retriable.Add(w.retriable.Load())
			}
			figures.injected.Add(fired.Load())
		})
	}
	t.Logf("disk faults: %d faults injected, %d calls answered retriable, %d writes acknowledged, %d verified after restart, 0 lost",
		figures.injected.Load(), figures.retriable.Load(), figures.acknowledged.Load(), figures.verified.Load())
}

// covers reports whether batches give every offset of [first, last] the delivery state.
func covers(batches []*pb.StateBatch, first, last int64, state int32) bool {
	next := first
	for _, b := range batches {
		if b.GetFirstOffset() > next {
			break
		}
		if b.GetLastOffset() >= next {
			if b.GetDeliveryState() != state {
				return false
			}
			next = b.GetLastOffset() + 1
		}
	}
	return next > last
}

// gathered returns the value of the series name{label=value} in reg (0 when absent).
func gathered(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}
