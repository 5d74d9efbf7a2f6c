package statelog

import (
	"encoding/binary"
	"errors"
	"fmt"
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

// Checkpoint makes every frame the log has written durable in the log itself. It is safe to call
// while the owner appends (from the journal's goroutine): every frame written before the call is
// in the active segment, which it syncs, or in one sealed (and synced) before. A closed log has
// nothing to sync: Close synced it. A log that failed cannot vouch for its frames
// (ErrCheckpointFailed): the kernel may have dropped pages a later sync reports nothing of.
func (l *Log) Checkpoint() error {
	if l.hasFailed.Load() {
		return fmt.Errorf("%w: %s", ErrCheckpointFailed, l.dir)
	}
	l.activeMu.Lock()
	defer l.activeMu.Unlock()
	if l.active == nil {
		return nil
	}
	if err := l.active.Sync(); err != nil {
		return fmt.Errorf("statelog: checkpoint %s: %w", l.dir, err)
	}
	return nil
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
