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

// Append writes records as one atomic batch and returns after it is durable: it is Write
// followed by Sync, from the owner goroutine. An acknowledged batch survives any crash.
func (l *Log) Append(records [][]byte) (first int64, err error) {
	if first, err = l.Write(records); err != nil {
		return 0, err
	}
	if err := l.Sync(); err != nil {
		return 0, err
	}
	return first, nil
}

// Write writes records as one atomic batch after the records written before, without waiting
// for it to be durable: it is durable once DurableOffset passes it, after a Sync that began
// after Write returned. first is the offset of records[0]; offsets are dense. A record larger
// than MaxRecordBytes → ErrRecordTooLarge, a batch whose payload exceeds MaxBatchBytes →
// ErrBatchTooLarge, both before any I/O (not sticky). Any write or roll error is returned
// wrapped in ErrFailed and is sticky: every later Write, Append and Sync returns an error
// wrapping ErrFailed until the log is closed and reopened (with Options.TruncateAfter set to
// DurableOffset, so that what was written and not synced is dropped). An empty batch is a no-op
// returning (EndOffset(), nil).
//
// The batch is one frame written with one write call: after a crash, recovery finds all of
// it or none of it.
func (l *Log) Write(records [][]byte) (first int64, err error) {
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

	buf := l.frame(records, frameSize, first)
	if _, err := l.active.WriteAt(buf, active.size); err != nil {
		return 0, l.fail(fmt.Errorf("statelog: append to %s: %w", active.path, err))
	}
	if g := l.opts.SyncGroup; g != nil {
		l.round.Store(g.nextRound()) // before end: a Sync that sees the new end sees this round
	}
	active.size += int64(frameSize)
	l.size.Add(int64(frameSize))
	l.end.Store(first + int64(len(records)))
	l.m.appended(len(records), frameSize)
	l.publish()
	return first, nil
}

// Sync makes every record written before the call durable, with an fdatasync of the active
// segment or, for a log in a SyncGroup, a file-system sync of the group that starts after the
// call; it returns at once when there is nothing to sync. A failed sync is sticky, as for
// Write. It may run on another goroutine than the owner's, one call at a time, concurrently
// with Write; after Close it returns ErrClosed.
func (l *Log) Sync() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if err := l.failure(); err != nil {
		return err
	}
	target := l.end.Load() // written, and so covered by a sync that starts now
	if target <= l.durable.Load() {
		return nil
	}
	if g := l.opts.SyncGroup; g != nil {
		// A round that started after the last write covers it, even one already running.
		if err := g.syncThrough(l.round.Load()); err != nil {
			return l.fail(fmt.Errorf("statelog: sync the file system of %s: %w", l.dir, err))
		}
	} else if err := l.syncActive(); err != nil {
		return l.fail(err)
	}
	l.durable.Store(target)
	return nil
}

// syncActive fdatasyncs the active segment and records how long it took; syncMu is held.
func (l *Log) syncActive() error {
	began := time.Now()
	if err := l.active.Sync(); err != nil {
		return fmt.Errorf("statelog: sync %s: %w", l.activeAt, err)
	}
	l.m.synced(time.Since(began).Seconds())
	return nil
}

// frame encodes records as one frame starting at offset base.
func (l *Log) frame(records [][]byte, frameSize int, base int64) []byte {
	var buf []byte
	if frameSize <= cap(l.buf) {
		buf = l.buf[:frameSize]
	} else {
		buf = make([]byte, frameSize)
		if frameSize <= maxRetainedBuf {
			l.buf = buf
		}
	}
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
	return buf
}

// roll seals the active segment and starts a new one at the end offset. What the sealed
// segment holds is made durable first, so that Sync only ever needs the active segment.
func (l *Log) roll() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if end := l.end.Load(); l.durable.Load() < end {
		if err := l.syncActive(); err != nil {
			return err
		}
		l.durable.Store(end)
	}
	seg, f, err := l.createSegment(l.end.Load())
	if err != nil {
		return err
	}
	old, oldPath := l.active, l.segments[len(l.segments)-1].path
	l.segments = append(l.segments, seg)
	l.active, l.activeAt = f, seg.path
	l.size.Add(seg.size)
	l.logger.Debug("rolled state log segment", zap.String("segment", seg.path), zap.Int64("base_offset", seg.base))
	if err := old.Close(); err != nil {
		return fmt.Errorf("statelog: close sealed segment %s: %w", oldPath, err)
	}
	return nil
}
