package statelog

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Snapshot is a point-in-time view of a log's records, from its log-start offset to its end
// offset when the snapshot was taken, that can be read while the log's owner goes on appending
// and moving the log-start offset: the files it reads are not deleted until it is closed. A
// replica streams its log to another one from a Snapshot.
type Snapshot struct {
	fs        FS
	segs      []segment
	start     int64
	end       int64
	bufBytes  int
	maxRecord int
	release   sync.Once
	unpin     func()
}

// Snapshot returns a view of the log as it is now. It is called from the owner goroutine; the
// Snapshot may be read and closed from any goroutine. Close it when done: until then, segments
// the log drops are kept on disk.
func (l *Log) Snapshot() (*Snapshot, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	if err := l.flushTail(); err != nil {
		return nil, l.fail(err)
	}
	l.remover.pin()
	return &Snapshot{
		fs: l.fs, segs: slices.Clone(l.segments), start: l.start.Load(), end: l.end.Load(),
		bufBytes: l.opts.ReadBufferBytes, maxRecord: l.opts.MaxRecordBytes, unpin: l.remover.unpin,
	}, nil
}

// StartOffset is the log-start offset when the snapshot was taken: its first record's offset.
func (s *Snapshot) StartOffset() int64 { return s.start }

// EndOffset is the end offset when the snapshot was taken.
func (s *Snapshot) EndOffset() int64 { return s.end }

// Replay calls fn for every record of the snapshot with offset ≥ from, in order, as
// Log.Replay does: every frame is verified before its records go out, record aliases a read
// buffer valid until fn returns, and a non-nil error from fn stops the replay and is returned
// as is. from outside [StartOffset(), EndOffset()] → ErrOutOfRange.
func (s *Snapshot) Replay(from int64, fn func(offset int64, record []byte) error) error {
	if from < s.start || from > s.end {
		return fmt.Errorf("%w: replay from %d, snapshot holds [%d, %d)", ErrOutOfRange, from, s.start, s.end)
	}
	err := replaySegments(s.fs, s.segs, from, s.end, make([]byte, s.bufBytes), s.maxRecord, fn)
	var cb callbackError
	if errors.As(err, &cb) {
		return cb.err
	}
	return err
}

// Close releases the snapshot's hold on the log's files. It is idempotent.
func (s *Snapshot) Close() {
	s.release.Do(s.unpin)
}
