package tradeoff

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/workload"
	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/shard"
)

// driver writes a workload to one shard with a fixed number of goroutines. In the set-up phases
// (initialize, stagger, rounds) each goroutine owns a disjoint set of share partitions
// (i ≡ worker mod workers) and writes each a fixed number of times. The measurement hands out its
// writes round-robin instead: the n-th write goes to hot share partition n mod N, whichever
// goroutine makes it, so that every share partition is written as often as the others whatever
// the number of goroutines; a share partition's lock keeps two of its writes from running at once.
type driver struct {
	s        *shard.Shard
	parts    []*workload.Partition // hot share partitions
	idle     []*workload.Partition // share partitions written once
	workers  int
	perWrite int          // state batches per write
	locks    []sync.Mutex // one per hot share partition, held while it is written
}

func newDriver(s *shard.Shard, cfg Config) *driver {
	d := &driver{s: s, workers: min(cfg.Concurrency, cfg.Shape.SharePartitions), perWrite: cfg.Shape.BatchesPerWrite}
	for i := 0; i < cfg.Shape.SharePartitions; i++ {
		d.parts = append(d.parts, cfg.Shape.NewPartition(i))
	}
	d.locks = make([]sync.Mutex, len(d.parts))
	for i := 0; i < cfg.IdleSharePartitions; i++ {
		d.idle = append(d.idle, cfg.Shape.NewPartition(cfg.Shape.SharePartitions+i))
	}
	return d
}

// writes returns the writes made so far to the hot and idle share partitions (not the records
// the shard wrote by itself, such as cold-partition snapshots).
func (d *driver) writes() int64 {
	var batches int64
	for _, ps := range [][]*workload.Partition{d.parts, d.idle} {
		for _, p := range ps {
			batches += p.Batches()
		}
	}
	return batches / int64(d.perWrite)
}

// parallel runs fn(w) for every worker and returns the first error.
func (d *driver) parallel(fn func(w int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, d.workers)
	for w := 0; w < d.workers; w++ {
		wg.Go(func() { errs[w] = fn(w) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// initialize creates every share partition's state and writes each idle one once.
func (d *driver) initialize(ctx context.Context) error {
	all := append(append([]*workload.Partition(nil), d.parts...), d.idle...)
	return d.parallel(func(w int) error {
		var buf []shard.StateBatch
		for i := w; i < len(all); i += d.workers {
			p := all[i]
			if r := d.s.Initialize(ctx, p.Initialize()); r.Code != kafkaerr.None {
				return fmt.Errorf("initialize %v: %s: %s", p.Key(), r.Code, r.Message)
			}
			if i >= len(d.parts) {
				if err := d.write(ctx, p, &buf); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func (d *driver) write(ctx context.Context, p *workload.Partition, buf *[]shard.StateBatch) error {
	req := p.Next(*buf)
	*buf = req.StateBatches
	if r := d.s.Write(ctx, req); r.Code != kafkaerr.None {
		return fmt.Errorf("write %v: %s: %s", p.Key(), r.Code, r.Message)
	}
	return nil
}

// stagger writes ⌊i·limit/N⌋ times to hot share partition i.
func (d *driver) stagger(ctx context.Context, limit int) error {
	n := len(d.parts)
	return d.parallel(func(w int) error {
		var buf []shard.StateBatch
		for i := w; i < n; i += d.workers {
			for j := 0; j < i*limit/n; j++ {
				if err := d.write(ctx, d.parts[i], &buf); err != nil {
					return err
				}
			}
		}
		return ctx.Err()
	})
}

// rounds writes every hot share partition n times, round-robin.
func (d *driver) rounds(ctx context.Context, n int) error {
	return d.parallel(func(w int) error {
		var buf []shard.StateBatch
		for r := 0; r < n; r++ {
			for i := w; i < len(d.parts); i += d.workers {
				if err := d.write(ctx, d.parts[i], &buf); err != nil {
					return err
				}
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return nil
	})
}

// measure writes the hot share partitions round-robin until writes have been made (writes > 0)
// or until the deadline, paced at rate writes per second when rate > 0. It returns the writes
// made.
func (d *driver) measure(ctx context.Context, writes int64, deadline time.Time, rate float64) (int64, error) {
	var issued, done atomic.Int64
	start := time.Now()
	err := d.parallel(func(int) error {
		var buf []shard.StateBatch
		for {
			n := issued.Add(1)
			if writes > 0 && n > writes {
				return nil
			}
			if rate > 0 {
				due := start.Add(time.Duration(float64(n-1) / rate * float64(time.Second)))
				if wait := time.Until(due); wait > 0 {
					select {
					case <-time.After(wait):
					case <-ctx.Done():
						return ctx.Err()
					}
				}
			}
			if writes == 0 && !time.Now().Before(deadline) {
				return nil
			}
			i := int((n - 1) % int64(len(d.parts)))
			d.locks[i].Lock()
			err := d.write(ctx, d.parts[i], &buf)
			d.locks[i].Unlock()
			if err != nil {
				return err
			}
			done.Add(1)
		}
	})
	return done.Load(), err
}
