package restart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/shardconfig"
	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/workload"
	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/shard"
)

// markerFile records, in the data directory, the spec that generated it.
const markerFile = "restart-bench.json"

// Spec describes the data directory to generate.
type Spec struct {
	Partitions int            // state partitions (share.coordinator.state.topic.num.partitions)
	Bytes      int64          // total log bytes to reach
	Limit      int            // snapshot limit (share.snapshot.update.records.per.snapshot)
	Shape      workload.Shape // the written share partitions
}

// Validate reports every invalid field at once.
func (s Spec) Validate() error {
	var errs []error
	if s.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions %d: want at least 1", s.Partitions))
	} else if _, err := brokerDefaults(s.Partitions); err != nil {
		errs = append(errs, fmt.Errorf("partitions %d: not a partition count a server accepts: %w", s.Partitions, err))
	}
	if s.Bytes < 1<<20 {
		errs = append(errs, fmt.Errorf("bytes %d: want at least 1 MiB", s.Bytes))
	}
	if s.Limit < 0 {
		errs = append(errs, fmt.Errorf("limit %d: want 0 or more", s.Limit))
	}
	if err := s.Shape.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// generateWriteTimeoutMs is the write timeout of the benchmark's shards: the generation writes as
// fast as the disk takes it, and a slow disk must slow it down rather than fail it.
const generateWriteTimeoutMs = 60000

// brokerDefaults are the server's broker-level defaults for a given number of partitions, but
// for the write timeout (generateWriteTimeoutMs).
func brokerDefaults(partitions int) (groupcfg.Broker, error) {
	st, err := groupcfg.LoadStatic(groupcfg.Sources{Overrides: []string{
		"share.coordinator.state.topic.num.partitions=" + strconv.Itoa(partitions),
		"share.coordinator.write.timeout.ms=" + strconv.Itoa(generateWriteTimeoutMs),
	}})
	if err != nil {
		return groupcfg.Broker{}, err
	}
	return st.Broker(), nil
}

// openShards opens spec's state partitions in dataDir with the options the server gives them
// for the broker settings b; they load in the background.
func openShards(logger *zap.Logger, dataDir string, spec Spec, b groupcfg.Broker) []*shard.Shard {
	shards := make([]*shard.Shard, spec.Partitions)
	for p := range shards {
		pc := shardconfig.FromBroker(b, dataDir, p)
		shards[p] = shard.Open(logger, workload.FixedLimit(spec.Limit), pc.Shard, pc.LocalLog(logger))
	}
	return shards
}

// Generated tells whether dataDir holds logs generated for spec.
func Generated(dataDir string, spec Spec) bool {
	b, err := os.ReadFile(filepath.Join(dataDir, markerFile))
	if err != nil {
		return false
	}
	var got Spec
	return json.Unmarshal(b, &got) == nil && got == spec
}

// checkOwnDir refuses to let Generate empty dataDir unless it is missing, empty, or holds the
// marker of an earlier generation: a data directory of a server, say, is never deleted.
func checkOwnDir(dataDir string) error {
	entries, err := os.ReadDir(dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dataDir, markerFile)); err == nil {
		return nil
	}
	return fmt.Errorf("%s holds files that bench restart did not generate (%s, ...); it empties the directory it generates in, so give a new or empty one", dataDir, entries[0].Name())
}

// Generate empties dataDir (refusing one that checkOwnDir refuses) and fills it with spec's logs,
// writing with concurrency writes in flight; progress (if not nil) gets a line every few seconds.
// It returns the bytes written.
func Generate(ctx context.Context, logger *zap.Logger, dataDir string, spec Spec, concurrency int, progress io.Writer) (int64, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	if err := spec.Validate(); err != nil {
		return 0, err
	}
	if concurrency < 1 {
		return 0, fmt.Errorf("concurrency %d: want at least 1", concurrency)
	}
	b, err := brokerDefaults(spec.Partitions)
	if err != nil {
		return 0, err
	}
	if err := resetDir(dataDir); err != nil {
		return 0, err
	}
	shards := openShards(logger, dataDir, spec, b)
	defer closeAll(shards)
	for _, s := range shards {
		if err := s.WaitLoaded(ctx); err != nil {
			return 0, err
		}
	}
	w := startWriters(ctx, spec, shards, concurrency)
	awaitSize(ctx, spec.Bytes, shards, w.done, progress)
	w.stop()
	if err := ctx.Err(); err != nil {
		// Interrupted: every writer's call in flight failed with it; one line says it all.
		return 0, fmt.Errorf("interrupted after %d of %d bytes: %w", logSize(shards), spec.Bytes, err)
	}
	if err := errors.Join(w.errs...); err != nil {
		return 0, err
	}
	total := logSize(shards)
	if err := closeAll(shards); err != nil {
		return 0, err
	}
	marker, err := json.Marshal(spec)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(dataDir, markerFile), marker, 0o644); err != nil {
		return 0, err
	}
	return total, nil
}

// resetDir empties dataDir, or creates it, for a new generation. The marker goes in first, so
// that a generation cut short leaves a directory the next one may empty; it records the spec
// only once the logs are complete.
func resetDir(dataDir string) error {
	if err := checkOwnDir(dataDir); err != nil {
		return err
	}
	if err := os.RemoveAll(dataDir); err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dataDir, markerFile), []byte("{}\n"), 0o644)
}

// logSize is the bytes the shards' logs hold: the generation's measure of progress.
func logSize(shards []*shard.Shard) int64 {
	var n int64
	for _, s := range shards {
		n += s.Stats().LogSize
	}
	return n
}

// writers are the goroutines that write spec's share partitions until stopped. Each owns every
// n-th share partition, so that each partition's writes stay in order while n are in flight.
type writers struct {
	full atomic.Bool   // set to stop writing
	errs []error       // by writer: why it stopped early, nil if it did not
	done chan struct{} // closed when every writer has returned
}

// startWriters initializes every share partition of spec and then writes to them in rounds,
// with min(concurrency, share partitions) writers.
func startWriters(ctx context.Context, spec Spec, shards []*shard.Shard, concurrency int) *writers {
	parts := make([]*workload.Partition, spec.Shape.SharePartitions)
	route := make([]*shard.Shard, len(parts))
	for i := range parts {
		parts[i] = spec.Shape.NewPartition(i)
		route[i] = shards[parts[i].Key().PartitionOf(spec.Partitions)]
	}
	n := min(concurrency, len(parts))
	w := &writers{errs: make([]error, n), done: make(chan struct{})}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Go(func() { w.errs[i] = w.write(ctx, parts, route, i, n) })
	}
	go func() { wg.Wait(); close(w.done) }()
	return w
}

// write is one writer's loop over the share partitions it owns (first, first+step, ...): it
// initializes them, then writes to each in turn until the writers are stopped or ctx ends. It
// returns the error of the first call that fails, which ends the writer.
func (w *writers) write(ctx context.Context, parts []*workload.Partition, route []*shard.Shard, first, step int) error {
	for i := first; i < len(parts); i += step {
		if r := route[i].Initialize(ctx, parts[i].Initialize()); r.Code != kafkaerr.None {
			return fmt.Errorf("initialize %v: %s: %s", parts[i].Key(), r.Code, r.Message)
		}
	}
	var buf []shard.StateBatch
	for !w.full.Load() && ctx.Err() == nil {
		for i := first; i < len(parts); i += step {
			req := parts[i].Next(buf)
			buf = req.StateBatches
			if r := route[i].Write(ctx, req); r.Code != kafkaerr.None {
				return fmt.Errorf("write %v: %s: %s", parts[i].Key(), r.Code, r.Message)
			}
		}
	}
	return nil
}

// stop tells the writers to stop and waits until they have.
func (w *writers) stop() {
	w.full.Store(true)
	<-w.done
}

// awaitSize returns once the shards' logs hold target bytes, ctx ends or the writers are done
// (which they are early only on an error); progress (if not nil) gets a line every few seconds.
func awaitSize(ctx context.Context, target int64, shards []*shard.Shard, done <-chan struct{}, progress io.Writer) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	began, last := time.Now(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-tick.C:
			n := logSize(shards)
			if n >= target {
				return
			}
			if progress != nil && time.Since(last) >= 5*time.Second {
				last = time.Now()
				fmt.Fprintf(progress, "generated %d of %d bytes (%.0fs)\n", n, target, time.Since(began).Seconds())
			}
		}
	}
}

func closeAll(shards []*shard.Shard) error {
	var errs []error
	for _, s := range shards {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
