package statelog

import (
	"encoding/binary"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// maxRetainedBuf bounds the frame buffer kept between appends; larger batches use a buffer
// of their own.
const maxRetainedBuf = 1 << 20

// Append writes records as one atomic batch and returns after it is durable (written and
// fdatasync'ed, made durable by a file-system sync of the log's SyncGroup that started after
// the write, or written to the log's Journal, which synced it). first is the offset of
// records[0]; offsets are dense. A record larger than MaxRecordBytes → ErrRecordTooLarge, a
// batch whose payload exceeds MaxBatchBytes → ErrBatchTooLarge, both before any I/O (not
// sticky). Any write/sync/roll error is returned
// wrapped in ErrFailed and is sticky: every later Append returns an error wrapping ErrFailed
// until the log is closed and reopened. An empty batch is a no-op returning (EndOffset(), nil).
//
// The batch is one checksummed frame, written with one write call (a journaled log's frames go
// to the segment together later, 64 KiB at a time, and to the journal at once): after a crash,
// recovery finds all of it or none of it.
func (l *Log) Append(records [][]byte) (first int64, err error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	first = l.end.Load()
	if len(records) == 0 {
		return first, nil
	}
	payload := 0
	for i, r := range records {
		if len(r) > l.opts.MaxRecordBytes {
			return 0, fmt.Errorf("%w: record %d has %d bytes, MaxRecordBytes is %d", ErrRecordTooLarge, i, len(r), l.opts.MaxRecordBytes)
		}
		payload += recordPrefixSize + len(r)
		if payload > MaxBatchBytes {
			return 0, fmt.Errorf("%w: %d records exceed %d bytes", ErrBatchTooLarge, len(records), MaxBatchBytes)
		}
	}
	if first > maxOffset-int64(len(records)) {
		return 0, fmt.Errorf("%w: offsets past %d", ErrOutOfRange, int64(maxOffset))
	}
	frameSize := frameHeaderSize + payload

	active := &l.segments[len(l.segments)-1]
	if active.size > segmentHeaderSize && active.size+int64(frameSize) > l.opts.SegmentBytes {
		if err := l.roll(); err != nil {
			return 0, l.fail(err)
		}
		active = &l.segments[len(l.segments)-1]
	}

	took := -1.0 // a sync group or journal records its own syncs
	if l.opts.Journal != nil {
		if err := l.journal(records, frameSize, first, active); err != nil {
			return 0, err
		}
	} else if err := l.write(records, frameSize, first, active); err != nil {
		return 0, err
	}
	switch g := l.opts.SyncGroup; {
	case l.opts.DeferSync, l.opts.Journal != nil:
		// A roll syncs the segment it seals; Sync, Close and Checkpoint sync the active one.
		l.dirty = true
	case g != nil:
		if err := g.Sync(); err != nil {
			return 0, l.failAppend(fmt.Errorf("statelog: sync the file system of %s: %w", active.path, err), active)
		}
	default:
		began := time.Now()
		if err := l.active.Sync(); err != nil {
			return 0, l.failAppend(fmt.Errorf("statelog: sync %s: %w", active.path, err), active)
		}
		took = time.Since(began).Seconds()
	}

	active.size += int64(frameSize)
	l.size.Add(int64(frameSize))
	l.end.Store(first + int64(len(records)))
	l.m.appended(len(records), frameSize, took)
	l.publish()
	return first, nil
}

// failAppend fails the log with err, the failure of an append whose frame went (in part, perhaps)
// past active's durable size, and cuts that frame off at once with the segment's own handle: a
// truncation and an fdatasync of it, not a retry of the failed sync. The kernel may have dropped
// the frame's pages, or keep them in the page cache where a later Open, of this process or the
// next, would find them intact and build on them. If the cut fails too, the frame stays until a
// reopen with Options.TruncateAfter removes it.
func (l *Log) failAppend(err error, active *segment) error {
	return l.failAppendAt(err, active.path, active.size)
}

// failAppendAt is failAppend, cutting the active segment, at path, to size.
func (l *Log) failAppendAt(err error, path string, size int64) error {
	err = l.fail(err)
	cut := l.active.Truncate(size)
	if cut == nil {
		cut = l.active.Sync()
	}
	if cut != nil {
		l.logger.Error("could not cut a failed append off the log; it goes when the log is reopened at its durable end",
			zap.String("segment", path), zap.Int64("durable_size", size), zap.Error(cut))
	}
	return err
}

// write writes the frame of records, starting at offset first, at the end of active.
func (l *Log) write(records [][]byte, frameSize int, first int64, active *segment) error {
	var buf []byte
	if frameSize <= cap(l.buf) {
		buf = l.buf[:frameSize]
	} else {
		buf = make([]byte, frameSize)
		if frameSize <= maxRetainedBuf {
			l.buf = buf
		}
	}
	encodeFrame(buf, records, first)
	if _, err := l.active.WriteAt(buf, active.size); err != nil {
		return l.failAppend(fmt.Errorf("statelog: append to %s: %w", active.path, err), active)
	}
	return nil
}

// encodeFrame encodes records as one frame starting at offset base into buf, which has the
// frame's size.
func encodeFrame(buf []byte, records [][]byte, base int64) {
	p := frameHeaderSize
	for _, r := range records {
		binary.LittleEndian.PutUint32(buf[p:], uint32(len(r)))
		p += recordPrefixSize
		p += copy(buf[p:], r)
	}
	payload := buf[frameHeaderSize:]
	frameHeader{
		count:      uint32(len(records)),
		length:     uint32(len(payload)),
		base:       base,
		payloadCRC: crc(payload),
	}.encode(buf)
}

// roll seals the active segment (already synced by the append that filled it, or written out
// and synced here for a log that defers its syncs or is journaled) and starts a new one at the
// end offset.
func (l *Log) roll() error {
	if err := l.syncActive(); err != nil {
		return err
	}
	seg, f, err := l.createSegment(l.end.Load())
	if err != nil {
		return err
	}
	old, oldPath := l.active, l.segments[len(l.segments)-1].path
	l.segments = append(l.segments, seg)
	l.activeMu.Lock()
	l.active = f
	l.activeMu.Unlock()
	l.size.Add(seg.size)
	l.logger.Debug("rolled state log segment", zap.String("segment", seg.path), zap.Int64("base_offset", seg.base))
	if err := old.Close(); err != nil {
		return fmt.Errorf("statelog: close sealed segment %s: %w", oldPath, err)
	}
	return nil
}
