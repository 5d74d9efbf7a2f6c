package statelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Journal is where a log's appends are made durable when Options.Journal is set: a journal that
// every log of a node writes to, made durable with one write and one fdatasync per round for all
// of them, instead of an fdatasync of each log's segment per append.
//
// Write must not return before the frame is durable in the journal, and must copy it (the log
// reuses the buffer). Now and then the journal calls the log's Checkpoint, which makes the log
// durable on its own up to the end it returns: the journal may then forget what it holds below
// that end, and the log must not move its log-start offset past the end of the last completed
// checkpoint (Checkpointed), because after a crash the log is cut back to it and what the journal
// holds past it is appended again. Open calls Attach with the log, and fails with Attach's error:
// a journal that holds records the log lacks and could not append refuses it.
type Journal interface {
	Attach(l *Log) error
	Write(frame []byte) error
	Checkpointed() int64
}

// ErrCheckpointFailed is a Checkpoint of a log that failed: a write, sync or cut of its own went
// wrong, so what it holds below its end may not be durable, however a later sync ends.
var ErrCheckpointFailed = errors.New("statelog: the log failed, so its appends may not be durable in it")

// ErrHeldInJournal is wrapped by the failure of a journaled log that could not write out
// appends it had acknowledged (see Options.Journal): the journal holds them durably, and only
// the journal's recovery, when the process starts, appends them to the log again. Reopening the
// log in the same process would serve a state without them; the process must be restarted.
var ErrHeldInJournal = errors.New("statelog: acknowledged appends that the journal holds could not be written to the log; " +
	"the process must be restarted, and its journal appends them again")

// tailBytes is how much of a journaled log's frames Append keeps before it writes them out to
// the active segment in one write: the journal makes them durable, so each append need not be
// a write call of its own.
const tailBytes = 64 << 10

// journal appends the frame of records, starting at offset first, to the log's tail, and writes
// it to the journal, which makes it durable. The tail reaches the active segment in one write
// once it holds tailBytes, or at a roll, Sync, Close, Replay, Snapshot or Checkpoint.
func (l *Log) journal(records [][]byte, frameSize int, first int64, active *segment) error {
	l.tailMu.Lock()
	if len(l.tail) > 0 && len(l.tail)+frameSize > tailBytes {
		if err := l.writeTailLocked(); err != nil {
			l.tailMu.Unlock()
			return l.fail(err)
		}
	}
	if len(l.tail) == 0 {
		l.tailAt = active.size
	}
	at := len(l.tail)
	l.tail = slices.Grow(l.tail, frameSize)[:at+frameSize]
	frame := l.tail[at:]
	encodeFrame(frame, records, first)
	l.tailMu.Unlock()
	// Only the owner changes the tail's bytes: a Checkpoint may write the frame out meanwhile, but
	// leaves it as it is.
	if err := l.opts.Journal.Write(frame); err != nil {
		return l.failJournaled(fmt.Errorf("statelog: journal the append to %s: %w", active.path, err), active)
	}
	return nil
}

// failJournaled fails the log with err, the failure of the journal's write of the frame at the
// end of active: the frame leaves the tail (or, written out by a Checkpoint since, the segment,
// cut by failAppend), and the acknowledged frames before it are written out, so that the log
// holds them when it is reopened. If that write fails too, only a restart recovers them
// (ErrHeldInJournal), and the segment is cut where the tail started.
func (l *Log) failJournaled(err error, active *segment) error {
	l.tailMu.Lock()
	defer l.tailMu.Unlock()
	if keep := active.size - l.tailAt; keep >= 0 && keep <= int64(len(l.tail)) {
		l.tail = l.tail[:keep]
	} else {
		l.tail, l.tailAt = l.tail[:0], active.size
	}
	if werr := l.writeTailLocked(); werr != nil {
		return l.failAppendAt(errors.Join(err, werr), active.path, l.tailAt)
	}
	return l.failAppend(err, active)
}

// flushTail writes the tail out to the active segment, for the owner.
func (l *Log) flushTail() error {
	if l.opts.Journal == nil {
		return nil
	}
	l.tailMu.Lock()
	defer l.tailMu.Unlock()
	return l.writeTailLocked()
}

// writeTailLocked writes the tail out to the active segment; tailMu is held. A failed write
// leaves the tail as it was, and returns an error wrapping ErrHeldInJournal.
func (l *Log) writeTailLocked() error {
	if len(l.tail) == 0 {
		return nil
	}
	if _, err := l.active.WriteAt(l.tail, l.tailAt); err != nil {
		return fmt.Errorf("%w: write %d bytes at byte %d of the active segment of %s: %w", ErrHeldInJournal, len(l.tail), l.tailAt, l.dir, err)
	}
	l.tailAt += int64(len(l.tail))
	l.tail = l.tail[:0]
	if cap(l.tail) > maxRetainedBuf {
		l.tail = nil
	}
	return nil
}

// Checkpoint makes every frame the log has acknowledged durable in the log itself. It is safe to
// call while the owner appends (from the journal's goroutine): every frame acknowledged before
// the call is in the log's tail, which it writes out to the active segment before it syncs that,
// or in a segment sealed (and synced) before. A closed log has nothing to sync: Close synced it.
// A log that failed cannot vouch for its frames (ErrCheckpointFailed): the kernel may have
// dropped pages a later sync reports nothing of. A failure to write the tail out fails the log
// (ErrHeldInJournal), whose owner sees it at its next call.
func (l *Log) Checkpoint() error {
	if l.hasFailed.Load() {
		return fmt.Errorf("%w: %s", ErrCheckpointFailed, l.dir)
	}
	l.activeMu.Lock()
	defer l.activeMu.Unlock()
	if l.active == nil {
		return nil
	}
	// The owner appends to the tail meanwhile, waiting only for the write, not for the sync.
	l.tailMu.Lock()
	err := l.writeTailLocked()
	if err != nil {
		l.tailErr = err
		l.hasFailed.Store(true)
	}
	l.tailMu.Unlock()
	if err != nil {
		return fmt.Errorf("statelog: checkpoint %s: %w", l.dir, err)
	}
	if err := l.active.Sync(); err != nil {
		return fmt.Errorf("statelog: checkpoint %s: %w", l.dir, err)
	}
	return nil
}

// checkpointFailure is the failure of a Checkpoint to write the tail out, or nil.
func (l *Log) checkpointFailure() error {
	if !l.hasFailed.Load() {
		return nil
	}
	l.tailMu.Lock()
	defer l.tailMu.Unlock()
	return l.tailErr
}

// FrameEnd returns the end offset of the records of a frame as Append writes it (the offset
// after its last record), reading its header only: for a journal that tracks how far each log's
// journaled frames reach.
func FrameEnd(frame []byte) (int64, bool) {
	if len(frame) < frameHeaderSize {
		return 0, false
	}
	h, ok := decodeFrameHeader(frame[:frameHeaderSize])
	return h.base + int64(h.count), ok
}

// Closed reports whether the log was closed; safe from any goroutine.
func (l *Log) Closed() bool {
	l.activeMu.Lock()
	defer l.activeMu.Unlock()
	return l.active == nil
}

// Failed reports whether the log failed (see Checkpoint); safe from any goroutine.
func (l *Log) Failed() bool { return l.hasFailed.Load() }

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// ErrBadFrame is a frame that DecodeFrame cannot vouch for.
var ErrBadFrame = errors.New("statelog: damaged frame")

// DecodeFrame checks one frame, as Append writes it, and returns the offset of its first record
// and its records, which alias b: for a journal that replays frames into a log.
func DecodeFrame(b []byte, maxRecordBytes int) (base int64, records [][]byte, err error) {
	if maxRecordBytes <= 0 {
		maxRecordBytes = DefaultMaxRecordBytes
	}
	if len(b) < frameHeaderSize {
		return 0, nil, fmt.Errorf("%w: %d bytes, shorter than a frame header", ErrBadFrame, len(b))
	}
	h, ok := decodeFrameHeader(b[:frameHeaderSize])
	if !ok {
		return 0, nil, fmt.Errorf("%w: bad header", ErrBadFrame)
	}
	if why := h.check(maxRecordBytes); why != "" {
		return 0, nil, fmt.Errorf("%w: %s", ErrBadFrame, why)
	}
	payload := b[frameHeaderSize:]
	if uint64(len(payload)) != uint64(h.length) || crc(payload) != h.payloadCRC {
		return 0, nil, fmt.Errorf("%w: payload of %d bytes does not match its header", ErrBadFrame, len(payload))
	}
	if why := checkPayload(payload, h.count, maxRecordBytes); why != "" {
		return 0, nil, fmt.Errorf("%w: %s", ErrBadFrame, why)
	}
	records = make([][]byte, 0, h.count)
	for off := 0; len(records) < int(h.count); {
		n := int(binary.LittleEndian.Uint32(payload[off:]))
		off += recordPrefixSize
		records = append(records, payload[off:off+n:off+n])
		off += n
	}
	return h.base, records, nil
}

// ObserveSync records one shared sync of seconds in sharecoord_fsync_duration_seconds (a
// journal's round).
func (m *Metrics) ObserveSync(seconds float64) { m.observeSync(seconds) }
