package statelog

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"go.uber.org/zap"
)

// Reset replaces whatever log dir holds, damaged or not, with an empty log whose log-start and
// end offsets are start: every file of a log (segments, the log-start offset and clean-end files
// and their temporary files) is deleted, then the first segment is created at start and the
// log-start offset recorded, each step synced. Files that are not a log's (Options.OwnerFiles
// among them) are left alone. The directory is locked meanwhile, so no Log may be open on it. A
// crash during Reset leaves a log that may fail to open (a first segment without its log-start
// offset file): the caller records that a reset is under way and runs it again.
//
// A replica that receives another one's log (a Raft snapshot) resets its own to the snapshot's
// log-start offset, then appends the records it received.
func Reset(logger *zap.Logger, dir string, opts Options, start int64) error {
	if logger == nil {
		logger = zap.NewNop()
	}
	opts, err := opts.resolve()
	if err != nil {
		return err
	}
	if start < 0 || start > maxOffset {
		return fmt.Errorf("%w: log-start offset %d", ErrOutOfRange, start)
	}
	lock, err := LockDir(opts.FS, dir)
	if err != nil {
		return err
	}
	l := &Log{logger: logger, dir: dir, opts: opts, fs: opts.FS, nextID: 1}
	err = l.reset(start)
	if cerr := lock.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("statelog: unlock %s: %w", dir, cerr))
	}
	return err
}

func (l *Log) reset(start int64) error {
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("statelog: list %s: %w", l.dir, err)
	}
	removed := 0
	for _, name := range names {
		switch {
		case isLogFile(name), name == startTmpName, name == cleanTmpName, strings.HasSuffix(name, segmentSuffix):
			if err := l.remove(filepath.Join(l.dir, name)); err != nil {
				return err
			}
			removed++
		}
	}
	if removed > 0 {
		if err := l.syncDir(); err != nil {
			return err
		}
	}
	_, f, err := l.createSegment(start)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("statelog: close the new segment of %s: %w", l.dir, err)
	}
	if start > 0 {
		if err := writeStartFile(l.fs, l.dir, start); err != nil {
			return err
		}
	}
	l.logger.Info("reset the state log", zap.String("dir", l.dir), zap.Int("removed_files", removed), zap.Int64("start_offset", start))
	return nil
}
