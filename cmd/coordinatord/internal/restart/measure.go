package restart

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/diskprobe"
	"github.com/coordinatord/coordinatord/internal/datadir"
)

// readBufferBytes is the buffer of the sequential-read floor.
const readBufferBytes = 1 << 20

// Result is one measurement.
type Result struct {
	Partitions int
	Files      int   // segment files
	Bytes      int64 // bytes of all segment files
	Procs      int   // GOMAXPROCS during the restart
	ColdCache  bool  // the page cache was dropped before the read and before the restart

	Read    time.Duration // reading every file sequentially (the floor)
	Restart time.Duration // opening every partition until all are ACTIVE
	Keys    int64         // share partitions loaded
}

// ReadBandwidth is the floor's bytes per second.
func (r Result) ReadBandwidth() float64 { return float64(r.Bytes) / r.Read.Seconds() }

// Ratio is the restart time ÷ (bytes ÷ sequential read bandwidth), i.e. ÷ the read time.
func (r Result) Ratio() float64 { return r.Restart.Seconds() / r.Read.Seconds() }

// segmentFiles lists the segment files of every partition of dataDir.
func segmentFiles(dataDir string, partitions int) ([]string, error) {
	var paths []string
	for p := 0; p < partitions; p++ {
		segs, err := datadir.SegmentFiles(datadir.PartitionDir(dataDir, p))
		if err != nil {
			return nil, err
		}
		paths = append(paths, segs...)
	}
	return paths, nil
}

// Measure reads every segment file of dataDir (generated for spec) sequentially (the floor), then restarts its
// partitions as the server does (all opened at once, loading concurrently) and waits until every
// one is ACTIVE. With dropCaches the page cache is dropped before each of the two, so both read
// the disk.
func Measure(ctx context.Context, logger *zap.Logger, dataDir string, spec Spec, dropCaches bool) (Result, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	partitions := spec.Partitions
	res := Result{Partitions: partitions, Procs: runtime.GOMAXPROCS(0), ColdCache: dropCaches}
	b, err := brokerDefaults(partitions)
	if err != nil {
		return res, err
	}
	paths, err := segmentFiles(dataDir, partitions)
	if err != nil {
		return res, fmt.Errorf("list segments: %w", err)
	}
	res.Files = len(paths)
	if dropCaches {
		if err := diskprobe.DropCaches(); err != nil {
			return res, err
		}
	}
	read, err := diskprobe.ReadBandwidth(paths, readBufferBytes)
	if err != nil {
		return res, err
	}
	res.Bytes, res.Read = read.Bytes, read.Took
	if dropCaches {
		if err := diskprobe.DropCaches(); err != nil {
			return res, err
		}
	}

	began := time.Now()
	shards := openShards(logger, dataDir, spec, b)
	errs := make([]error, partitions)
	var wg sync.WaitGroup
	for p, s := range shards {
		wg.Go(func() { errs[p] = s.WaitLoaded(ctx) })
	}
	wg.Wait()
	res.Restart = time.Since(began)
	for _, s := range shards {
		res.Keys += s.Stats().Keys
	}
	if err := errors.Join(append(errs, closeAll(shards))...); err != nil {
		return res, fmt.Errorf("restart: %w", err)
	}
	return res, nil
}
