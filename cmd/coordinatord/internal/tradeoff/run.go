package tradeoff

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/diskprobe"
	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/workload"
	"github.com/coordinatord/coordinatord/internal/datadir"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

// sampleEvery is the period of the end-offset samples that date the log's offsets.
const sampleEvery = 10 * time.Millisecond

// Row is the outcome of one run: one limit, cold-partition snapshots off or on.
type Row struct {
	Limit int
	Cold  bool

	WarmupWrites int64   // stagger + warm-up writes before the measurement
	Writes       int64   // measured writes
	Seconds      float64 // measured time
	Commits      int64   // group commits (one fdatasync each) during the measurement

	UpdateRecords, SnapshotRecords int64
	UpdateBytes, SnapshotBytes     int64

	RetainedBytes   int64 // log after pruning at the end of the run (after the observation tail)
	RetainedRecords int64
	ReplaySeconds   float64 // reopen → ACTIVE on the retained log
	ReplayedKeys    int64

	Lag LagStats
}

// WritesPerSecond is the measured write rate.
func (r Row) WritesPerSecond() float64 { return div(float64(r.Writes), r.Seconds) }

// AppendedBytes is what the measurement added to the log files: the records, a length prefix
// each, and a frame header per commit (an Append).
func (r Row) AppendedBytes() int64 {
	return r.UpdateBytes + r.SnapshotBytes + statelog.RecordOverheadBytes*(r.UpdateRecords+r.SnapshotRecords) +
		statelog.FrameOverheadBytes*r.Commits
}

// GrowthBytesPerSecond is the log growth: bytes appended to the log files per second of the
// measurement.
func (r Row) GrowthBytesPerSecond() float64 { return div(float64(r.AppendedBytes()), r.Seconds) }

// GrowthBytesPerWrite is the log growth per logical write.
func (r Row) GrowthBytesPerWrite() float64 { return div(float64(r.AppendedBytes()), float64(r.Writes)) }

// WriteAmplification is snapshot bytes ÷ update bytes: +Inf when only snapshots were written
// (limit 0), 0 when nothing was.
func (r Row) WriteAmplification() float64 {
	if r.UpdateBytes == 0 && r.SnapshotBytes > 0 {
		return math.Inf(1)
	}
	return div(float64(r.SnapshotBytes), float64(r.UpdateBytes))
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Mode names a cold-partition snapshot mode as the reports print it.
func Mode(cold bool) string {
	if cold {
		return "on"
	}
	return "off"
}

// Run runs the study: every limit of cfg in increasing order, each in every cold mode. It
// returns the rows completed so far with the error that stopped it.
func Run(ctx context.Context, logger *zap.Logger, cfg Config) ([]Row, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	var rows []Row
	for _, limit := range slices.Sorted(slices.Values(cfg.Limits)) {
		for _, cold := range cfg.Cold {
			row, err := runOne(ctx, logger, cfg, limit, cold)
			if err != nil {
				return rows, fmt.Errorf("limit %d, cold snapshots %s: %w", limit, Mode(cold), err)
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func (cfg Config) progress(limit int, cold bool, format string, a ...any) {
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "limit=%-6d cold=%-3s %s\n", limit, Mode(cold), fmt.Sprintf(format, a...))
	}
}

func runOne(ctx context.Context, logger *zap.Logger, cfg Config, limit int, cold bool) (row Row, err error) {
	row = Row{Limit: limit, Cold: cold}
	dir := filepath.Join(cfg.DataDir, "limit-"+strconv.Itoa(limit)+"-cold-"+Mode(cold))
	if err := os.RemoveAll(dir); err != nil {
		return row, err
	}
	if !cfg.Keep {
		defer func() {
			if rerr := os.RemoveAll(dir); err == nil && rerr != nil {
				err = rerr
			}
		}()
	}
	logDir := datadir.PartitionDir(dir, 0)
	logOpts := statelog.Options{SegmentBytes: cfg.SegmentBytes}
	opts := shard.Options{
		AppendLingerMs: -1,
		WriteTimeout:   time.Minute,
	}
	if cold {
		opts.ColdSnapshotInterval = cfg.ColdInterval
	}
	s := shard.Open(logger, workload.FixedLimit(limit), opts, shard.NewLocalLog(logger, logDir, logOpts))
	closed := false
	defer func() {
		if !closed {
			_ = s.Close()
		}
	}()
	if err := s.WaitLoaded(ctx); err != nil {
		return row, err
	}

	d := newDriver(s, cfg)
	began := time.Now()
	if err := d.initialize(ctx); err != nil {
		return row, err
	}
	if err := d.stagger(ctx, limit); err != nil {
		return row, err
	}
	if err := d.rounds(ctx, limit+1); err != nil {
		return row, err
	}
	before := s.Stats()
	row.WarmupWrites = d.writes() // not the cold-partition snapshots taken meanwhile
	cfg.progress(limit, cold, "warm-up: %d writes in %.1fs", row.WarmupWrites, time.Since(began).Seconds())

	endOffset := func() int64 { return s.Stats().LogEndOffset }
	smp := startSampler(endOffset, sampleEvery)
	began = time.Now()
	writes, err := d.measure(ctx, cfg.measuredWrites(limit), began.Add(cfg.Duration), cfg.Rate)
	row.Seconds = time.Since(began).Seconds()
	after := s.Stats()
	if err != nil {
		smp.stop(endOffset)
		return row, err
	}
	row.Writes = writes
	row.Commits = after.Commits - before.Commits
	row.UpdateRecords = after.Records.Updates - before.Records.Updates
	row.SnapshotRecords = after.Records.Snapshots - before.Records.Snapshots
	row.UpdateBytes = after.Bytes.Updates - before.Bytes.Updates
	row.SnapshotBytes = after.Bytes.Snapshots - before.Bytes.Snapshots
	cfg.progress(limit, cold, "measured: %d writes in %.1fs (%.0f writes/s)", row.Writes, row.Seconds, row.WritesPerSecond())

	// Keep writing as long again, plus one segment's worth, so that the records superseded during
	// the measurement have the time to see their segment become deletable.
	tail := row.Writes + int64(div(float64(cfg.SegmentBytes), row.GrowthBytesPerWrite())) + 1
	if _, err := d.measure(ctx, tail, time.Time{}, cfg.Rate); err != nil {
		smp.stop(endOffset)
		return row, err
	}
	tl := smp.stop(endOffset)
	observed := s.Stats().LogEndOffset

	if err := s.Close(); err != nil {
		return row, fmt.Errorf("close shard: %w", err)
	}
	closed = true
	lro, hasLRO := s.LastRedundantOffset()
	lag, analyzed, err := analyzeLog(logger, logDir, before.LogEndOffset, after.LogEndOffset, observed, tl)
	if err != nil {
		return row, err
	}
	row.Lag = lag
	if hasLRO && analyzed != lro {
		return row, fmt.Errorf("the log analysis finds last redundant offset %d, the shard %d", analyzed, lro)
	}
	cfg.progress(limit, cold, "pruning lag: %d superseded records, p50 %.0f offsets / %.3fs, %d pinned",
		lag.Superseded, lag.OffsetsP50, lag.SecondsP50, lag.Pinned)

	if row.RetainedBytes, row.RetainedRecords, err = prune(logger, logDir, cfg, lro, hasLRO); err != nil {
		return row, err
	}
	if cfg.DropCaches {
		if err := diskprobe.DropCaches(); err != nil {
			return row, err
		}
	}
	if row.ReplaySeconds, row.ReplayedKeys, err = replay(ctx, logger, opts, shard.NewLocalLog(logger, logDir, logOpts), limit); err != nil {
		return row, err
	}
	cfg.progress(limit, cold, "retained %d bytes, %d records; replay %.3fs", row.RetainedBytes, row.RetainedRecords, row.ReplaySeconds)
	return row, nil
}

// prune moves the log-start offset to the last redundant offset, as the prune job does, and
// returns the retained bytes and records.
func prune(logger *zap.Logger, dir string, cfg Config, lro int64, ok bool) (int64, int64, error) {
	l, err := statelog.Open(logger, dir, statelog.Options{SegmentBytes: cfg.SegmentBytes})
	if err != nil {
		return 0, 0, fmt.Errorf("open log to prune: %w", err)
	}
	if ok {
		err = l.SetStartOffset(lro)
	}
	size, records := l.Size(), l.EndOffset()-l.StartOffset()
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, 0, fmt.Errorf("prune log to offset %d: %w", lro, err)
	}
	return size, records, nil
}

// replay opens a shard on the run's directory and times it until ACTIVE.
func replay(ctx context.Context, logger *zap.Logger, opts shard.Options, log shard.LogOpener, limit int) (float64, int64, error) {
	opts.ColdSnapshotInterval = 0
	began := time.Now()
	s := shard.Open(logger, workload.FixedLimit(limit), opts, log)
	err := s.WaitLoaded(ctx)
	took := time.Since(began).Seconds()
	keys := s.Stats().Keys
	if cerr := s.Close(); err == nil && cerr != nil && !errors.Is(cerr, shard.ErrClosed) {
		err = cerr
	}
	if err != nil {
		return 0, 0, fmt.Errorf("replay: %w", err)
	}
	return took, keys, nil
}
