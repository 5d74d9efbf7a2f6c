package journal

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs"
)

// The checkpoint file: where recovery starts and how far each log was durable on its own.
const (
	checkpointName    = "checkpoint"
	checkpointTmp     = "checkpoint.tmp"
	checkpointVersion = 1
)

type checkpointState struct {
	Version int `json:"version"`
	// Segment is the first segment recovery reads: the older ones are all below Ends.
	Segment uint64 `json:"segment"`
	// Ends are the logs' end offsets, by log id, up to which each was durable on its own.
	Ends map[int]int64 `json:"ends"`
	// Held are the logs that recovery could not open (damaged), by log id, with the first
	// segment that holds frames of theirs: the journal keeps those segments, so that the frames
	// are appended once the log opens again.
	Held map[int]uint64 `json:"held,omitempty"`
	// Clean: the journal's Close wrote it, after every log it journaled was closed (and so
	// synced): a log the journal holds nothing more of needs no recovery.
	Clean bool `json:"clean,omitempty"`
}

// first returns the first segment the journal must keep: Segment, or an older one a held log
// needs.
func (cp checkpointState) first() uint64 {
	first := cp.Segment
	for _, s := range cp.Held {
		first = min(first, s)
	}
	return first
}

// from returns the first segment whose frames of log id recovery appends.
func (cp checkpointState) from(id int) uint64 {
	if s, ok := cp.Held[id]; ok {
		return s
	}
	return cp.Segment
}

func readCheckpoint(fsys vfs.FS, dir string) (checkpointState, bool, error) {
	path := filepath.Join(dir, checkpointName)
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return checkpointState{}, false, nil
	}
	if err != nil {
		return checkpointState{}, false, fmt.Errorf("journal: read %s: %w", path, err)
	}
	var cp checkpointState
	if err := json.Unmarshal(b, &cp); err != nil {
		return checkpointState{}, false, fmt.Errorf("journal: %s is damaged: %w", path, err)
	}
	if cp.Version != checkpointVersion {
		return checkpointState{}, false, fmt.Errorf("journal: %s has format version %d, this release reads %d", path, cp.Version, checkpointVersion)
	}
	if cp.Ends == nil {
		cp.Ends = map[int]int64{}
	}
	if cp.Held == nil {
		cp.Held = map[int]uint64{}
	}
	return cp, true, nil
}

func writeCheckpoint(fsys vfs.FS, dir string, cp checkpointState) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	if err := vfs.ReplaceFile(fsys, dir, checkpointTmp, checkpointName, b); err != nil {
		return fmt.Errorf("journal: write the checkpoint: %w", err)
	}
	return nil
}

// frame is a journaled append of one log.
type frame struct {
	segment uint64
	base    int64
	bytes   []byte
}

// Recover makes every state log hold what the journal in dir made durable, then empties the
// journal: it cuts each log (logs: log id → its directory, opened with opts) back to the end
// its last checkpoint recorded, appends again, in order, the frames the journal holds past it,
// syncs the log, and records a checkpoint from which Open starts a new segment. A log the
// checkpoint does not know (the journal's first start, after a single node ran with per-log
// syncs) is opened as it is: it was durable at every append. A torn record ends the journal (a
// round cut short by a crash, never acknowledged). Without a journal directory Recover creates
// it, with its first checkpoint.
//
// A log that cannot be cut back to its recorded end (damaged below it, or cut shorter by
// repair-log) is opened as it is, and gets the frames that continue it; frames past a gap are
// lost with the damage, and logged. A log that does not open at all, or whose frames do not fit
// it, is left as it is and held: the journal keeps its frames (the checkpoint names them) until a
// later start recovers it; its partition fails to load meanwhile, as a damaged log does, and the
// others serve.
//
// It returns the ids of the held logs.
func Recover(logger *zap.Logger, dir string, logs map[int]string, opts statelog.Options, fsys vfs.FS) ([]int, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	if fsys == nil {
		fsys = vfs.OS()
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("journal: create %s: %w", dir, err)
	}
	cp, _, err := readCheckpoint(fsys, dir)
	if err != nil {
		return nil, err
	}
	frames, found, err := readFrames(logger, fsys, dir, cp.first(), opts.MaxRecordBytes)
	if err != nil {
		return nil, err
	}
	next := checkpointState{Version: checkpointVersion, Segment: max(found.last+1, cp.Segment, 1), Ends: map[int]int64{}, Held: map[int]uint64{}}
	replayed := 0
	for _, id := range slices.Sorted(maps.Keys(logs)) {
		var own []frame
		for _, f := range frames[id] {
			if f.segment >= cp.from(id) {
				own = append(own, f)
			}
		}
		delete(frames, id)
		if e, ok := cp.Ends[id]; ok && cp.Clean && len(own) == 0 {
			next.Ends[id] = e // closed cleanly at that end
			continue
		}
		end, n, err := recoverLog(logger, logs[id], opts, cp.Ends, id, own)
		if err != nil {
			logger.Error("the state log could not be recovered: the journal keeps its records until it is", zap.Int("state_partition", id),
				zap.Int("journaled_batches", len(own)), zap.Error(err))
			if e, ok := cp.Ends[id]; ok {
				next.Ends[id] = e
			}
			next.Held[id] = cp.from(id)
			continue
		}
		next.Ends[id] = end
		replayed += n
	}
	for id := range frames {
		return nil, fmt.Errorf("journal: the journal holds appends of state log %d, which is not among the node's %d", id, len(logs))
	}
	if len(next.Held) > 0 {
		// The segments stay, behind the one Open starts: the last must end at its records.
		if err := cutLast(fsys, dir, found); err != nil {
			return nil, err
		}
	}
	if err := writeCheckpoint(fsys, dir, next); err != nil {
		return nil, err
	}
	if err := removeSegmentsBelow(fsys, dir, next.first()); err != nil {
		return nil, err
	}
	if replayed > 0 {
		logger.Info("appended again to the state logs what only the journal held", zap.Int("batches", replayed))
	}
	return slices.Sorted(maps.Keys(next.Held)), nil
}

// recoverLog cuts log id (in dir) back to its checkpointed end, if known, appends its frames past
// that end, syncs and closes it, and returns its end and the frames appended.
func recoverLog(logger *zap.Logger, dir string, opts statelog.Options, ends map[int]int64, id int, frames []frame) (int64, int, error) {
	logger = logger.With(zap.Int("state_partition", id))
	opts.Journal, opts.SyncGroup, opts.DeferSync, opts.TruncateAfter = nil, nil, true, nil
	end, known := ends[id]
	if known {
		opts.TruncateAfter = &end
	}
	l, err := statelog.Open(logger, dir, opts)
	lenient := false
	if err != nil && known {
		logger.Warn("the state log cannot be cut back to its last checkpoint; opening it as it is",
			zap.Int64("checkpoint_end", end), zap.Error(err))
		opts.TruncateAfter, lenient = nil, true
		l, err = statelog.Open(logger, dir, opts)
	}
	if err != nil {
		return 0, 0, err
	}
	n := 0
	for i, f := range frames {
		base, records, err := statelog.DecodeFrame(f.bytes, opts.MaxRecordBytes)
		if err != nil {
			_ = l.Close()
			return 0, 0, err
		}
		end := l.EndOffset()
		switch {
		case base+int64(len(records)) <= end:
			continue // the log held it at the checkpoint
		case base != end && lenient:
			logger.Error("records the journal held are lost: the state log ends before them (it was damaged, or repaired)",
				zap.Int64("log_end", end), zap.Int64("journal_from", base), zap.Int("batches", len(frames)-i))
			return closeRecovered(l, n)
		case base != end:
			_ = l.Close()
			return 0, 0, fmt.Errorf("the journal holds records from offset %d, but the log ends at %d", base, end)
		}
		if _, err := l.Append(records); err != nil {
			_ = l.Close()
			return 0, 0, err
		}
		n++
	}
	return closeRecovered(l, n)
}

// closeRecovered syncs and closes a recovered log and returns its end and n.
func closeRecovered(l *statelog.Log, n int) (int64, int, error) {
	end := l.EndOffset()
	if err := l.Close(); err != nil { // syncs
		return 0, 0, err
	}
	return end, n, nil
}

// segments is what readFrames found of the journal's files.
type segments struct {
	last uint64 // the id of the last segment; 0 when there is none
	// tornAt is where the last segment's records end when more follows them (a torn record, or
	// what a reused or zero-filled file held before); -1 when they fill it.
	tornAt int64
}

// readFrames reads the records of the segments from id from on, in order, by log id. Only the last
// segment may end in a torn record: rounds are written in order, and a segment that is left is
// cut to its records before the next one starts.
func readFrames(logger *zap.Logger, fsys vfs.FS, dir string, from uint64, maxRecordBytes int) (map[int][]frame, segments, error) {
	found := segments{tornAt: -1}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, found, fmt.Errorf("journal: list %s: %w", dir, err)
	}
	var ids []uint64
	for _, name := range names {
		if id, ok := segmentID(name); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	frames := map[int][]frame{}
	for i, id := range ids {
		if id < from {
			continue
		}
		name := segmentName(id)
		data, err := vfs.ReadFile(fsys, filepath.Join(dir, name))
		if err != nil {
			return nil, found, fmt.Errorf("journal: read %s: %w", name, err)
		}
		end, torn, err := parseSegment(name, id, data, maxRecordBytes, frames)
		if err != nil {
			return nil, found, err
		}
		if torn != "" && i < len(ids)-1 {
			return nil, found, fmt.Errorf("journal: %s is damaged (%s), and later segments follow it", name, torn)
		}
		if torn != "" {
			found.tornAt = end
			if end > segmentHeaderSize {
				logger.Info("the journal ends before the end of its last file: at a round a crash cut short (acknowledged to no one), "+
					"or at what a reused file held before", zap.String("segment", name), zap.String("reason", torn))
			}
		}
	}
	if len(ids) > 0 {
		found.last = ids[len(ids)-1]
	}
	return frames, found, nil
}

// cutLast cuts the last segment back to where its records end (found.tornAt), or removes it when
// it holds none, so that it can stay behind later segments (for a held log).
func cutLast(fsys vfs.FS, dir string, found segments) error {
	if found.tornAt < 0 {
		return nil
	}
	path := filepath.Join(dir, segmentName(found.last))
	if found.tornAt <= segmentHeaderSize {
		if err := fsys.Remove(path); err != nil {
			return fmt.Errorf("journal: remove %s, which holds no records: %w", path, err)
		}
		return fsys.SyncDir(dir)
	}
	f, err := fsys.OpenReadWrite(path)
	if err != nil {
		return fmt.Errorf("journal: cut %s to its records: %w", path, err)
	}
	err = f.Truncate(found.tornAt)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("journal: cut %s to its records: %w", path, err)
	}
	return nil
}

// parseSegment adds the frames of segment id (read as data) to frames, and returns where its
// records end and why they end early if they do ("" when they fill it). A segment without a valid
// header holds no records: a crash came before its header was durable (a new file, or the
// prepared one renamed), which recovery accepts of the last segment only.
func parseSegment(name string, id uint64, data []byte, maxRecordBytes int, frames map[int][]frame) (int64, string, error) {
	if len(data) < segmentHeaderSize || string(data[:len(segmentMagic)]) != segmentMagic ||
		binary.LittleEndian.Uint16(data[6:]) != segmentVersion || binary.LittleEndian.Uint64(data[8:]) != id {
		return 0, "no valid header", nil
	}
	rest := data[segmentHeaderSize:]
	at := int64(segmentHeaderSize)
	for len(rest) > 0 {
		if len(rest) < recordHeaderSize {
			return at, fmt.Sprintf("a partial record header at byte %d", at), nil
		}
		n := binary.LittleEndian.Uint32(rest[0:])
		log := int(binary.LittleEndian.Uint32(rest[4:]))
		if uint64(n) > uint64(len(rest)-recordHeaderSize) {
			return at, fmt.Sprintf("a record past the end of the segment at byte %d", at), nil
		}
		body := rest[recordHeaderSize : recordHeaderSize+n]
		if recordCRC(id, rest[4:8], body) != binary.LittleEndian.Uint32(rest[8:]) {
			return at, fmt.Sprintf("a record whose checksum does not match at byte %d", at), nil
		}
		base, _, err := statelog.DecodeFrame(body, maxRecordBytes)
		if err != nil {
			return 0, "", fmt.Errorf("journal: %s at byte %d: %w", name, at, err)
		}
		frames[log] = append(frames[log], frame{segment: id, base: base, bytes: body})
		rest = rest[recordHeaderSize+n:]
		at += int64(recordHeaderSize) + int64(n)
	}
	return at, "", nil
}

// Pending returns how many batches the journal in dir holds past its checkpoint: appends that the
// state logs may not hold durably, which the server's next start appends to them (Recover). A
// directory without a journal holds none.
func Pending(fsys vfs.FS, dir string) (int, error) {
	if fsys == nil {
		fsys = vfs.OS()
	}
	cp, ok, err := readCheckpoint(fsys, dir)
	if err != nil || !ok {
		return 0, err
	}
	frames, _, err := readFrames(zap.NewNop(), fsys, dir, cp.first(), statelog.MaxBatchBytes-4)
	if err != nil {
		return 0, err
	}
	n := 0
	for id, fs := range frames {
		for _, f := range fs {
			if end, ok := statelog.FrameEnd(f.bytes); ok && f.segment >= cp.from(id) && end > cp.Ends[id] {
				n++
			}
		}
	}
	return n, nil
}
