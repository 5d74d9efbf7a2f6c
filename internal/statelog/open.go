package statelog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"time"

	"go.uber.org/zap"
)

// Open opens (creating if needed) the log in dir and recovers it: segments left below the
// log-start offset by an interrupted SetStartOffset and a segment left headerless by an
// interrupted roll are deleted, and a torn tail of the newest segment is truncated and
// reported (log line and metric). Corruption anywhere else returns a *CorruptionError and
// changes nothing. The directory is locked until Close; a second Open of it fails.
func Open(logger *zap.Logger, dir string, opts Options) (*Log, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	lock, err := lockDir(opts.FS, dir)
	if err != nil {
		return nil, err
	}
	return openLocked(logger, dir, opts, lock)
}

// openLocked opens the log in dir, whose lock the caller holds and hands over to the Log (it
// is released on failure).
func openLocked(logger *zap.Logger, dir string, opts Options, lock io.Closer) (*Log, error) {
	began := time.Now()
	logger = logger.With(zap.String("dir", dir))
	l := &Log{logger: logger, dir: dir, opts: opts, fs: opts.FS, m: opts.Metrics.forLog(opts.Name), lock: lock}
	if err := l.recover(); err != nil {
		if ce := (*CorruptionError)(nil); errors.As(err, &ce) {
			l.m.corruption()
			logger.Error("state log is corrupt", zap.Error(err))
		}
		if cerr := l.closeFiles(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	l.publish()
	logger.Info("opened state log",
		zap.Int("segments", len(l.segments)),
		zap.Int64("start_offset", l.start.Load()),
		zap.Int64("end_offset", l.end.Load()),
		zap.Int64("size_bytes", l.size.Load()),
		zap.Duration("took", time.Since(began)))
	return l, nil
}

// lockDir creates dir and any missing parents if needed, makes every new directory entry
// durable, and locks dir.
func lockDir(fsys FS, dir string) (io.Closer, error) {
	dir = filepath.Clean(dir)
	// The directories MkdirAll is about to create: each one's entry in its parent must be
	// synced, or a power cut can take the whole log with it.
	syncs := []string{filepath.Dir(dir)}
	for p := dir; ; {
		if _, err := fsys.ReadDir(p); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("statelog: read directory %s: %w", p, err)
		}
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		if parent != syncs[len(syncs)-1] {
			syncs = append(syncs, parent)
		}
		p = parent
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("statelog: create %s: %w", dir, err)
	}
	for _, p := range slices.Backward(syncs) {
		if err := fsys.SyncDir(p); err != nil {
			return nil, fmt.Errorf("statelog: sync directory %s: %w", p, err)
		}
	}
	lock, err := fsys.Lock(filepath.Join(dir, lockFileName))
	if err != nil {
		return nil, fmt.Errorf("statelog: lock %s (is another process using it?): %w", dir, err)
	}
	return lock, nil
}

// recover inspects the directory and applies the recovery the inspection calls for.
func (l *Log) recover() error {
	st, err := newInspector(l.logger, l.dir, l.opts).inspect()
	if err != nil {
		return err
	}
	for _, name := range st.stray {
		l.logger.Warn("ignoring unknown file in state log directory", zap.String("file", name))
	}
	dirty := false
	if st.staleTmp {
		if err := l.remove(filepath.Join(l.dir, startTmpName)); err != nil {
			return err
		}
		dirty = true
	}
	if st.remnant != nil {
		l.logger.Warn("removing segment left by an interrupted roll", zap.String("segment", st.remnant.path))
		if err := l.remove(st.remnant.path); err != nil {
			return err
		}
		dirty = true
	}
	for _, s := range st.below {
		l.logger.Info("removing segment below the log-start offset", zap.String("segment", s.path), zap.Int64("start_offset", st.start))
		if err := l.remove(s.path); err != nil {
			return err
		}
		dirty = true
	}
	if dirty {
		if err := l.syncDir(); err != nil {
			return err
		}
	}
	l.nextID = st.maxID + 1
	l.segments = st.segments
	l.start.Store(st.start)
	l.end.Store(st.end)

	if len(l.segments) == 0 {
		seg, f, err := l.createSegment(st.start)
		if err != nil {
			return err
		}
		l.segments, l.active = []segment{seg}, f
	} else {
		newest := &l.segments[len(l.segments)-1]
		f, err := l.fs.OpenReadWrite(newest.path)
		if err != nil {
			return fmt.Errorf("statelog: open %s: %w", newest.path, err)
		}
		l.active = f
		if t := st.torn; t != nil {
			if err := l.truncateTornTail(t); err != nil {
				return err
			}
		}
	}
	var size int64
	for _, s := range l.segments {
		size += s.size
	}
	l.size.Store(size)
	return nil
}

func (l *Log) truncateTornTail(t *tornTail) error {
	if err := l.active.Truncate(t.at); err != nil {
		return fmt.Errorf("statelog: truncate torn tail of %s: %w", t.seg.path, err)
	}
	if err := l.active.Sync(); err != nil {
		return fmt.Errorf("statelog: sync %s after truncating its torn tail: %w", t.seg.path, err)
	}
	t.seg.size = t.at
	l.m.tornTail()
	l.logger.Warn("truncated torn tail of the newest segment (an unacknowledged append interrupted by a crash)",
		zap.String("segment", t.seg.path),
		zap.Int64("at_byte", t.at),
		zap.Int64("dropped_bytes", t.size-t.at),
		zap.String("reason", t.reason))
	return nil
}
