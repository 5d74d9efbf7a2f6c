package statelog

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"go.uber.org/zap"
)

// RepairReport says what Repair changed. It is the zero value when the log had no corruption and
// no torn tail.
type RepairReport struct {
	// Corruptions lists the damage found, in the order it was repaired.
	Corruptions []*CorruptionError
	// TruncatedSegment is the segment cut at a corruption point ("" if none) and TruncatedAt
	// its size after the cut.
	TruncatedSegment string
	TruncatedAt      int64
	// DeletedSegments are the files removed whole: a segment whose header was damaged and
	// every segment after a corruption point, or a file that could not be placed in the log.
	DeletedSegments []string
	// DroppedBytes counts the bytes removed from segment files, truncation included.
	DroppedBytes int64
	// DroppedFromOffset, when DroppedBytes > 0, is the offset of the first record no longer
	// in the log: the log's end offset after the repair. Every record from there on that the
	// damaged files held is gone.
	DroppedFromOffset int64
	// StartOffsetReset reports that the log-start offset was missing, unreadable or outside
	// the data and was rewritten to NewStartOffset. OldStartOffset is the value it had, or -1
	// if there was none that could be read.
	StartOffsetReset bool
	OldStartOffset   int64
	NewStartOffset   int64
	// TornTail, when not nil, is the damaged last frame of the newest segment that the final
	// open truncated, as Open always does: what an interrupted append leaves, or, if that append
	// had been acknowledged, damage to it that cannot be told apart.
	TornTail *TornTail
	// StartOffset and EndOffset are the log's offsets after the repair (for a dry run, what it
	// would leave): the records from StartOffset up to EndOffset remain. When they are equal the
	// log holds no record at all.
	StartOffset, EndOffset int64
}

// TornTail is a truncated tail of the newest segment.
type TornTail struct {
	Segment string // the segment file
	At      int64  // its size after the cut
	Bytes   int64  // bytes dropped
	Reason  string // what was wrong with the frame at At
}

// Repair opens the log in dir for an operator: if recovery hits a CorruptionError it truncates
// the damaged segment at the corruption point and deletes every later segment, and reports
// exactly what was dropped; a log-start offset that is unreadable or outside the remaining
// data is reset to the nearest valid value (the first segment's base, or the end offset).
// Repair then opens the log normally (which also truncates a torn tail, as Open always does)
// and closes it; a torn tail it truncates is reported too. A log without corruption or torn tail
// is left untouched (zero report). A directory without any file of a log is refused with
// ErrNoLog. Repair holds the directory lock throughout, so it fails on a log that is open
// elsewhere.
func Repair(logger *zap.Logger, dir string, opts Options) (RepairReport, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	var report RepairReport
	opts, err := opts.resolve()
	if err != nil {
		return report, err
	}
	opts.TruncateAfter, opts.SyncGroup = nil, nil
	names, err := opts.FS.ReadDir(dir)
	if err == nil && !holdsLog(names) {
		err = ErrNoLog
	}
	if err != nil {
		return report, fmt.Errorf("statelog: repair %s: %w", dir, err)
	}
	lock, err := LockDir(opts.FS, dir)
	if err != nil {
		return report, err
	}
	rp := &repairer{logger: logger.With(zap.String("dir", dir)), dir: dir, opts: opts, report: &report}
	// Every cut removes a file or bytes, and a start-offset reset happens at most once per
	// cut, so the loop ends; the bound only guards against a filesystem that lies.
	for attempt := 0; ; attempt++ {
		st, err := newInspector(dir, opts).inspect()
		if err == nil {
			if t := st.torn; t != nil {
				report.TornTail = &TornTail{Segment: t.seg.path, At: t.at, Bytes: t.size - t.at, Reason: t.reason}
			}
			break
		}
		var ce *CorruptionError
		if !errors.As(err, &ce) || attempt > 1000 {
			return report, errors.Join(err, lock.Close())
		}
		report.Corruptions = append(report.Corruptions, ce)
		rp.logger.Warn("repairing state log corruption", zap.Error(ce))
		if err := rp.cut(ce); err != nil {
			return report, errors.Join(err, lock.Close())
		}
	}
	l, err := openLocked(logger, dir, opts, lock, nil)
	if err != nil {
		return report, err
	}
	if report.DroppedBytes > 0 {
		report.DroppedFromOffset = l.EndOffset()
	}
	report.StartOffset, report.EndOffset = l.StartOffset(), l.EndOffset()
	if err := l.Close(); err != nil {
		return report, err
	}
	if len(report.Corruptions) > 0 {
		rp.logger.Warn("repaired state log",
			zap.Int("corruptions", len(report.Corruptions)),
			zap.String("truncated_segment", report.TruncatedSegment),
			zap.Int64("truncated_at", report.TruncatedAt),
			zap.Strings("deleted_segments", report.DeletedSegments),
			zap.Int64("dropped_bytes", report.DroppedBytes),
			zap.Int64("dropped_from_offset", report.DroppedFromOffset),
			zap.Bool("start_offset_reset", report.StartOffsetReset))
	}
	return report, nil
}

type repairer struct {
	logger *zap.Logger
	dir    string
	opts   Options
	report *RepairReport
}

// cut removes the damage ce describes.
func (rp *repairer) cut(ce *CorruptionError) error {
	switch ce.kind {
	case damageStray:
		if err := rp.delete(ce.Segment); err != nil {
			return err
		}
	case damageStart:
		if err := rp.resetStart(ce); err != nil {
			return err
		}
	case damageSegment:
		if err := rp.cutSegment(ce.Segment, ce.Offset); err != nil {
			return err
		}
	case damageClean:
		// The log is judged as after a crash from here on: a damaged tail is cut as a torn one.
		for _, name := range []string{cleanTmpName, cleanFileName} {
			if err := rp.removeIfExists(filepath.Join(rp.dir, name)); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("statelog: repair: unknown kind of damage %d in %s", ce.kind, ce.Segment)
	}
	return rp.syncDir()
}

// cutSegment drops path from byte off on (the whole file if off is inside its header) and
// every segment after it.
func (rp *repairer) cutSegment(path string, off int64) error {
	names, err := rp.opts.FS.ReadDir(rp.dir)
	if err != nil {
		return fmt.Errorf("statelog: list %s: %w", rp.dir, err)
	}
	var segs []string
	for _, name := range names {
		if _, _, ok := parseSegmentName(name); ok {
			segs = append(segs, filepath.Join(rp.dir, name))
		}
	}
	i := slices.Index(segs, path)
	if i < 0 {
		return fmt.Errorf("statelog: repair: damaged segment %s is not in %s", path, rp.dir)
	}
	for _, later := range slices.Backward(segs[i+1:]) {
		if err := rp.delete(later); err != nil {
			return err
		}
	}
	if off < segmentHeaderSize {
		return rp.delete(path)
	}
	f, err := rp.opts.FS.OpenReadWrite(path)
	if err != nil {
		return fmt.Errorf("statelog: open %s: %w", path, err)
	}
	size, err := f.Size()
	switch {
	case err != nil:
		err = fmt.Errorf("statelog: size of %s: %w", path, err)
	case off < size:
		if err = f.Truncate(off); err != nil {
			err = fmt.Errorf("statelog: truncate %s: %w", path, err)
		} else if err = f.Sync(); err != nil {
			err = fmt.Errorf("statelog: sync %s: %w", path, err)
		} else {
			rp.report.TruncatedSegment, rp.report.TruncatedAt = path, off
			rp.report.DroppedBytes += size - off
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("statelog: close %s: %w", path, cerr)
	}
	return err
}

// delete removes one file and accounts for its bytes.
func (rp *repairer) delete(path string) error {
	size, err := fileSize(rp.opts.FS, path)
	if err != nil {
		return err
	}
	if err := rp.opts.FS.Remove(path); err != nil {
		return fmt.Errorf("statelog: remove %s: %w", path, err)
	}
	rp.report.DeletedSegments = append(rp.report.DeletedSegments, path)
	if strings.HasSuffix(path, segmentSuffix) {
		rp.report.DroppedBytes += size
	}
	return nil
}

// resetStart rewrites the log-start offset to the value the inspection chose (the nearest
// one the remaining data allows), or removes it when no segment remains: the log then starts
// afresh at offset 0. A temporary file left by an interrupted SetStartOffset, which Open
// would remove, is removed first: writing the offset creates that file anew.
func (rp *repairer) resetStart(ce *CorruptionError) error {
	if !rp.report.StartOffsetReset {
		rp.report.StartOffsetReset = true
		rp.report.OldStartOffset = -1
		if old, err := readStartFile(rp.opts.FS, rp.dir); err == nil {
			rp.report.OldStartOffset = old
		}
	}
	if err := rp.removeIfExists(filepath.Join(rp.dir, startTmpName)); err != nil {
		return err
	}
	if ce.fixStart < 0 {
		rp.report.NewStartOffset = 0
		return rp.removeIfExists(filepath.Join(rp.dir, startFileName))
	}
	rp.report.NewStartOffset = ce.fixStart
	return writeStartFile(rp.opts.FS, rp.dir, ce.fixStart)
}

// removeIfExists removes path; a file that is not there is no error.
func (rp *repairer) removeIfExists(path string) error {
	if err := rp.opts.FS.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("statelog: remove %s: %w", path, err)
	}
	return nil
}

func (rp *repairer) syncDir() error {
	if err := rp.opts.FS.SyncDir(rp.dir); err != nil {
		return fmt.Errorf("statelog: sync directory %s: %w", rp.dir, err)
	}
	return nil
}
