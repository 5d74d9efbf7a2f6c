package statelog

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// Log is a segmented, checksummed, append-only log of opaque records in one directory.
//
// Concurrency: Append, SetStartOffset, Replay and Close are called from one goroutine (the
// owner). StartOffset, EndOffset and Size are safe from any goroutine.
type Log struct {
	logger *zap.Logger
	dir    string
	opts   Options
	fs     FS
	m      logMetrics
	lock   io.Closer

	remover segmentRemover // deletes the files of dropped segments

	// Owner-goroutine state.
	segments []segment // in offset order; the last is the active segment
	active   File      // the active segment, open for writing
	// activeMu guards changes of active, and its use by Checkpoint, which runs on the
	// journal's goroutine; the owner reads active without it.
	activeMu sync.Mutex
	nextID   uint64 // id of the next segment
	buf      []byte // frame assembly buffer, reused across appends
	failed   error  // first write-side failure; sticky
	closed   bool
	dirty    bool // DeferSync, Journal: the active segment holds appends not yet synced
	notable  bool // recovery repaired or removed something, or left an unknown file alone

	// tail holds the frames of a journaled log not yet written to the active segment, where
	// they start at byte tailAt; tailErr is a Checkpoint's failure to write them. tailMu guards
	// the three: Checkpoint writes the tail out from the journal's goroutine (holding activeMu,
	// then tailMu, whose holder may use active too).
	tailMu  sync.Mutex
	tail    []byte
	tailAt  int64
	tailErr error

	start atomic.Int64
	end   atomic.Int64
	size  atomic.Int64
	// hasFailed is failed != nil, for other goroutines (a journal's checkpoint).
	hasFailed atomic.Bool
}

// createSegment creates a segment whose first record will have offset base, and makes it
// durable (header synced, directory synced) before returning it open for writing.
func (l *Log) createSegment(base int64) (segment, File, error) {
	seg := segment{id: l.nextID, base: base, path: filepath.Join(l.dir, segmentName(base, l.nextID)), size: segmentHeaderSize}
	f, err := l.fs.Create(seg.path)
	if err != nil {
		return segment{}, nil, fmt.Errorf("statelog: create segment %s: %w", seg.path, err)
	}
	l.nextID++
	var hdr [segmentHeaderSize]byte
	segmentHeader{id: seg.id, base: base}.encode(hdr[:])
	if _, err = f.WriteAt(hdr[:], 0); err != nil {
		err = fmt.Errorf("statelog: write header of %s: %w", seg.path, err)
	} else if err = f.Sync(); err != nil {
		err = fmt.Errorf("statelog: sync %s: %w", seg.path, err)
	} else {
		err = l.syncDir()
	}
	if err != nil {
		if cerr := f.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("statelog: close %s: %w", seg.path, cerr))
		}
		return segment{}, nil, err
	}
	return seg, f, nil
}

func (l *Log) remove(path string) error {
	if err := l.fs.Remove(path); err != nil {
		return fmt.Errorf("statelog: remove %s: %w", path, err)
	}
	return nil
}

func (l *Log) syncDir() error {
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("statelog: sync directory %s: %w", l.dir, err)
	}
	return nil
}

// fail makes err sticky and returns it wrapped in ErrFailed.
func (l *Log) fail(err error) error {
	if l.failed == nil {
		l.failed = err
		l.hasFailed.Store(true)
		if errors.Is(err, ErrSyncFailed) {
			l.logger.Error("state log failed with its sync group; it refuses writes until the process is restarted", zap.Error(err))
		} else {
			l.logger.Error("state log failed; it refuses writes until reopened", zap.Error(err))
		}
	}
	return fmt.Errorf("%w: %w", ErrFailed, err)
}

// usable returns why the log cannot be used by the owner now, or nil. A failed sync group
// fails the log.
func (l *Log) usable() error {
	if l.closed {
		return ErrClosed
	}
	if l.failed == nil {
		if err := l.opts.SyncGroup.Err(); err != nil {
			return l.fail(err)
		}
		if err := l.checkpointFailure(); err != nil {
			return l.fail(err)
		}
	}
	if l.failed != nil {
		return fmt.Errorf("%w: %w", ErrFailed, l.failed)
	}
	return nil
}

// publish updates the gauges from the current state.
func (l *Log) publish() {
	l.m.bounds(l.start.Load(), l.end.Load(), l.size.Load(), len(l.segments))
}

// StartOffset returns the log-start offset: the first offset Replay may return.
func (l *Log) StartOffset() int64 { return l.start.Load() }

// EndOffset returns the offset the next appended record will get.
func (l *Log) EndOffset() int64 { return l.end.Load() }

// Size returns the bytes of the log's segments; those below the log-start offset do not count,
// even while their files are being deleted.
func (l *Log) Size() int64 { return l.size.Load() }

// Close closes the log's files and releases its directory lock, once the deletions of dropped
// segments have been tried. Every acknowledged append is
// already durable; a log that has not failed records its end offset in the clean-end file
// (written, synced, renamed into place, the directory synced), so that the next Open holds the
// log to that end: damage to its tail is then corruption, not a torn tail. It is idempotent;
// after it every other owner method returns ErrClosed.
func (l *Log) Close() error {
	if l.closed {
		return nil
	}
	var err error
	if l.failed == nil && l.opts.SyncGroup.Err() == nil && l.active != nil {
		// The clean-end file vouches that the log ends there durably.
		if err = l.Sync(); err == nil {
			err = writeOffsetFile(l.fs, l.dir, cleanFileName, cleanTmpName, cleanMagic, l.end.Load())
			if err != nil {
				// A write that failed (a full disk) leaves the tmp file: it goes now if it can,
				// else when the log is next opened, which removes it durably.
				_ = l.fs.Remove(filepath.Join(l.dir, cleanTmpName))
			}
		}
	}
	l.closed = true
	if cerr := l.closeFiles(); cerr != nil || err != nil {
		return errors.Join(err, cerr)
	}
	l.logger.Debug("closed state log")
	return nil
}

func (l *Log) closeFiles() error {
	l.remover.close()
	var errs []error
	l.activeMu.Lock()
	if l.active != nil {
		if err := l.active.Close(); err != nil {
			errs = append(errs, fmt.Errorf("statelog: close %s: %w", l.segments[len(l.segments)-1].path, err))
		}
		l.active = nil
	}
	l.activeMu.Unlock()
	if l.lock != nil {
		if err := l.lock.Close(); err != nil {
			errs = append(errs, fmt.Errorf("statelog: unlock %s: %w", l.dir, err))
		}
		l.lock = nil
	}
	return errors.Join(errs...)
}
