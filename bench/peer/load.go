package main

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/coordinatord/coordinatord/client"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// The written share partitions: partitions 0 to keys-1 of one topic of one group.
const (
	benchGroup = "bench-peer"
	benchTopic = "P6hfZFcXRWKz_CyWP2avpg"
	// offsetsPerBatch and batchesPerWrite are the default shape of `coordinatord bench load`.
	offsetsPerBatch = 10
	batchesPerWrite = 2
)

// workload hands out the writes of a run: share partitions in turn (round-robin over all
// callers), each write moving its partition's start offset forward past the offsets of the last
// one, as a share-partition leader does while its consumers make progress.
type workload struct {
	turn atomic.Uint64
	next []atomic.Int64
}

func newWorkload(keys int) *workload { return &workload{next: make([]atomic.Int64, keys)} }

// key is share partition k's coordinator key, which is also its etcd key.
func key(k int) string { return client.Key(benchGroup, benchTopic, int32(k)) }

// write returns the next write: its share partition and the request.
func (w *workload) write() (int, *pb.WriteShareGroupStateRequest) {
	k := int((w.turn.Add(1) - 1) % uint64(len(w.next)))
	return k, w.writeOf(k)
}

// writeOf returns the next write of share partition k.
func (w *workload) writeOf(k int) *pb.WriteShareGroupStateRequest {
	span := int64(batchesPerWrite * offsetsPerBatch)
	base := w.next[k].Add(span) - span
	dcc := int32(span / 2)
	batches := make([]*pb.StateBatch, batchesPerWrite)
	for i := range batches {
		first := base + int64(i*offsetsPerBatch)
		// acknowledged, archived, ...: neighbours never merge
		batches[i] = &pb.StateBatch{FirstOffset: first, LastOffset: first + offsetsPerBatch - 1, DeliveryState: 2 + 2*int32(i%2), DeliveryCount: 1}
	}
	return &pb.WriteShareGroupStateRequest{
		GroupId: benchGroup,
		Topics: []*pb.WriteStateTopic{{TopicId: benchTopic, Partitions: []*pb.WriteStatePartition{{
			Partition: int32(k), StateEpoch: 1, LeaderEpoch: 1, StartOffset: base, DeliveryCompleteCount: &dcc, StateBatches: batches,
		}}}},
	}
}

// writer makes one durable write of share partition k and returns "" once it is acknowledged, or
// the cause of its failure.
type writer func(ctx context.Context, k int, req *pb.WriteShareGroupStateRequest) string

// target is a running system the loop drives, through conns clients of its own.
type target interface {
	// prepare makes every share partition writable (coordinatord initializes them).
	prepare(ctx context.Context, keys int) error
	// writer returns a writer sending with client c (0 ≤ c < conns).
	writer(c int) writer
	close()
}

// openClients opens n clients with open; when one fails, it closes those it opened.
func openClients[C io.Closer](n int, open func() (C, error)) ([]C, error) {
	var out []C
	for range n {
		c, err := open()
		if err != nil {
			closeAll(out)
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func closeAll[C io.Closer](cs []C) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// callTimeout bounds one write, so that a stuck server cannot hang a run.
const callTimeout = 10 * time.Second

// phase is what one measurement recorded: the calls that started after the warm-up and
// finished before the end of the window.
type phase struct {
	calls, errors int64
	causes        map[string]int64
	window        time.Duration
	hist          *hdrhistogram.Histogram // µs, successful calls
}

func newHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(1, 60_000_000, 3) }

// add counts one call of the window: its latency when it succeeded, its cause when not.
func (p *phase) add(took time.Duration, cause string) {
	p.calls++
	if cause != "" {
		p.errors++
		p.causes[cause]++
		return
	}
	_ = p.hist.RecordValue(max(took.Microseconds(), 1))
}

// rate is acknowledged writes per second.
func (p phase) rate() float64 { return float64(p.calls-p.errors) / p.window.Seconds() }

// quantile is the q-th percentile of the successful calls' latency.
func (p phase) quantile(q float64) time.Duration {
	return time.Duration(p.hist.ValueAtQuantile(q)) * time.Microsecond
}

// runPhase keeps inflight writes in flight, spread over conns clients, for warmup (not recorded)
// and then window.
func runPhase(ctx context.Context, t target, w *workload, inflight, conns int, warmup, window time.Duration) phase {
	from := time.Now().Add(warmup)
	end := from.Add(window)
	var mu sync.Mutex
	res := phase{causes: map[string]int64{}, window: window, hist: newHistogram()}
	var wg sync.WaitGroup
	for i := range inflight {
		write := t.writer(i % conns)
		wg.Go(func() {
			local := phase{causes: map[string]int64{}, hist: newHistogram()}
			for ctx.Err() == nil {
				start := time.Now()
				if !start.Before(end) {
					break
				}
				k, req := w.write()
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				cause := write(cctx, k, req)
				cancel()
				finish := time.Now()
				if !start.Before(from) && !finish.After(end) && ctx.Err() == nil {
					local.add(finish.Sub(start), cause)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.calls += local.calls
			res.errors += local.errors
			for c, n := range local.causes {
				res.causes[c] += n
			}
			res.hist.Merge(local.hist)
		})
	}
	wg.Wait()
	return res
}
