package statelog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Open opens (creating if needed) the log in dir and recovers it: segments left below the
// log-start offset by an interrupted SetStartOffset and a segment left headerless by an
// interrupted roll are deleted, and a torn tail of the newest segment is truncated and
// reported (log line and metric). Corruption anywhere else returns a *CorruptionError and
// changes nothing. The directory is locked until Close; a second Open of it fails.
func Open(logger *zap.Logger, dir string, opts Options) (*Log, error) {
	return open(logger, dir, opts, nil)
}

// Load opens the log in dir like Open and, in the same pass, calls fn for every record of the
// log from its log-start offset to its end offset, in order: what Open followed by
// Replay(StartOffset()) delivers, with every byte read and checksummed once instead of twice.
// Recovery is Open's: segments are verified in order, each frame before any of its records goes
// to fn; a torn tail of the newest segment is truncated and reported; any other damage returns
// a *CorruptionError naming the file and byte offset and changes nothing on disk. record
// aliases the read buffer and is valid only until fn returns.
//
// On any error (damage, I/O, or a non-nil error from fn, which stops the load and is returned
// as is) no Log is returned and the directory is unlocked; fn may already have been called for
// records that precede the damage, so the caller must discard whatever it built from them, as
// it would after any failed load.
func Load(logger *zap.Logger, dir string, opts Options, fn func(offset int64, record []byte) error) (*Log, error) {
	if fn == nil {
		return nil, errors.New("statelog: Load needs a record callback")
	}
	return open(logger, dir, opts, fn)
}

// open is Open, and Load when deliver is set.
func open(logger *zap.Logger, dir string, opts Options, deliver func(int64, []byte) error) (*Log, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	lock, err := LockDir(opts.FS, dir)
	if err != nil {
		return nil, err
	}
	return openLocked(logger, dir, opts, lock, deliver)
}

// openLocked opens the log in dir, whose lock the caller holds and hands over to the Log (it
// is released on failure). deliver, if not nil, receives the records as recovery verifies them
// (Load).
func openLocked(logger *zap.Logger, dir string, opts Options, lock io.Closer, deliver func(int64, []byte) error) (*Log, error) {
	began := time.Now()
	logger = logger.With(zap.String("dir", dir))
	l := &Log{logger: logger, dir: dir, opts: opts, fs: opts.FS, m: opts.Metrics.forLog(opts.Name), lock: lock,
		remover: segmentRemover{logger: logger, fs: opts.FS, dir: dir}}
	err := opts.SyncGroup.join(dir)
	if err == nil {
		err = l.recover(deliver)
	}
	if err != nil {
		var cb callbackError
		if errors.As(err, &cb) {
			err = cb.err
		} else if ce := (*CorruptionError)(nil); errors.As(err, &ce) {
			l.m.corruption()
			logger.Error("state log is corrupt", zap.Error(err))
		}
		if cerr := l.closeFiles(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	if opts.Journal != nil {
		if err := opts.Journal.Attach(l); err != nil {
			return nil, errors.Join(err, l.closeFiles())
		}
	}
	l.publish()
	// A log that opened as it was closed is one of many, summed up by whoever opens them all; one
	// that recovery had to repair or clean up gets a line of its own, next to the WARN lines
	// saying what was done.
	level := zap.DebugLevel
	if l.notable {
		level = zap.InfoLevel
	}
	logger.Log(level, "opened state log",
		zap.Int("segments", len(l.segments)),
		zap.Int64("start_offset", l.start.Load()),
		zap.Int64("end_offset", l.end.Load()),
		zap.Int64("size_bytes", l.size.Load()),
		zap.Duration("took", time.Since(began)))
	return l, nil
}

// LockDir creates dir and any missing parents if needed, makes the directory entries of dir and
// of the directories it created durable, syncs every other ancestor where the file system lets
// it, and takes an exclusive lock on the file LOCK in dir, held until Close. It fails when another
// process (or another LockDir of this one) holds the lock. Open and Repair take it on the log's
// directory; datadir.Lock takes it on the data directory, so that two servers never share one.
func LockDir(fsys FS, dir string) (io.Closer, error) {
	dir = filepath.Clean(dir)
	// The entries this call creates, and dir's own, must be made durable: a failure to sync
	// their directories fails the call. dir's parent is synced even when dir exists, as whoever
	// created dir may not have synced its entry.
	must := map[string]bool{filepath.Dir(dir): true}
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
		must[parent] = true
		p = parent
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("statelog: create %s: %w", dir, err)
	}
	// The other ancestors are synced too, from the top, where the file system lets this process:
	// a process killed before it synced the directories it created leaves entries that a power
	// cut can still take, and the whole log with them.
	var ancestors []string
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		ancestors = append(ancestors, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	for _, p := range slices.Backward(ancestors) {
		if err := fsys.SyncDir(p); err != nil && must[p] {
			return nil, fmt.Errorf("statelog: sync directory %s: %w", p, err)
		}
	}
	lock, err := fsys.Lock(filepath.Join(dir, lockFileName))
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("statelog: %s is in use: another process holds its lock: %w", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("statelog: lock %s: %w", dir, err)
	}
	return lock, nil
}

// recover inspects the directory, handing the live records to deliver if set, and applies the
// recovery the inspection calls for. Nothing is changed on disk before the whole log verified.
// The steps run in the order the package documentation argues is crash-safe: leftovers are
// removed, then the segments past a truncation offset (newest first), then the directory is
// synced, and only then is the newest segment truncated (torn tail, truncation offset) and
// synced.
func (l *Log) recover(deliver func(int64, []byte) error) error {
	st, err := l.inspectDir(deliver)
	if err != nil {
		return err
	}
	if err := l.removeLeftovers(st); err != nil {
		return err
	}
	cutBytes, err := l.removeBeyond(st)
	if err != nil {
		return err
	}
	unvouched := l.unvouched(st)
	// The directory is synced whether or not recovery changed it: a process killed before it
	// synced a new segment's entry may have left one that this process is about to use.
	if err := l.syncDir(); err != nil {
		return notDurable(unvouched, err)
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
		cut, err := l.reopenNewest(st, unvouched)
		if err != nil {
			return err
		}
		cutBytes += cut
	}
	if cutBytes > 0 {
		l.reportDurableEndCut(st, cutBytes)
	}
	var size int64
	for _, s := range l.segments {
		size += s.size
	}
	l.size.Store(size)
	return nil
}

// inspectDir verifies the log in the directory without changing it, held to the truncation
// offset of Options.TruncateAfter when set, and handing the live records to deliver if set.
func (l *Log) inspectDir(deliver func(int64, []byte) error) (*dirState, error) {
	in := newInspector(l.dir, l.opts)
	in.deliver = deliver
	if c := l.opts.TruncateAfter; c != nil {
		if *c < 0 {
			return nil, fmt.Errorf("%w: truncate after offset %d", ErrOutOfRange, *c)
		}
		in.cut = *c
	}
	return in.inspect()
}

// removeLeftovers deletes what interrupted operations left in the directory (a start-offset.tmp,
// the clean-end files, an interrupted roll's segment, segments below the log-start offset) and
// logs the files it leaves alone, so that the log recovery builds on holds only live segments.
func (l *Log) removeLeftovers(st *dirState) error {
	for _, name := range st.stray {
		if slices.Contains(l.opts.OwnerFiles, name) {
			continue
		}
		l.notable = true
		l.logger.Warn("ignoring unknown file in state log directory", zap.String("file", name))
	}
	if st.staleTmp {
		if err := l.remove(filepath.Join(l.dir, startTmpName)); err != nil {
			return err
		}
	}
	if st.badClean != "" {
		l.notable = true
		l.logger.Warn("ignoring an unreadable clean-end file: the log is checked as after a crash", zap.String("reason", st.badClean))
	}
	// The clean-end file vouches for the log only until it changes: it goes (and the directory
	// sync that follows recovery's removals makes that durable) before anything is appended.
	for _, path := range st.cleanFiles {
		if filepath.Base(path) == cleanTmpName {
			l.notable = true
			l.logger.Warn("removing the clean-end.tmp that a close which could not record the log's end left (a full disk, "+
				"say): the log is checked as after a crash", zap.String("file", path))
		}
		if err := l.remove(path); err != nil {
			return err
		}
	}
	if st.remnant != nil {
		l.notable = true
		l.logger.Warn("removing segment left by an interrupted roll", zap.String("segment", st.remnant.path))
		if err := l.remove(st.remnant.path); err != nil {
			return err
		}
	}
	for _, s := range st.below {
		l.notable = true
		l.logger.Info("removing segment below the log-start offset", zap.String("segment", s.path), zap.Int64("start_offset", st.start))
		if err := l.remove(s.path); err != nil {
			return err
		}
	}
	return nil
}

// removeBeyond deletes the segments wholly past the truncation offset and returns their bytes.
// Segments past the truncation offset go first, newest first: were the cut interrupted, no later
// segment is left to continue from a cut segment.
func (l *Log) removeBeyond(st *dirState) (int64, error) {
	var cutBytes int64
	for _, s := range slices.Backward(st.beyond) {
		size, err := fileSize(l.fs, s.path)
		if err != nil {
			return 0, err
		}
		if err := l.remove(s.path); err != nil {
			return 0, err
		}
		cutBytes += size
	}
	return cutBytes, nil
}

// unvouched reports whether a failed sync of what recovery found must fail with ErrNotDurable:
// when the log holds records and no truncation offset vouches for them, a killed process may have
// left an append it never synced, which a retry would read again from the page cache and sync
// without an error (the kernel reports a failed write-back once). A new log, or segments holding
// nothing but their headers, leave nothing to mistake for durable, and a truncation offset means
// that everything kept was synced before: then it is an ordinary I/O error.
func (l *Log) unvouched(st *dirState) bool {
	return l.opts.TruncateAfter == nil && !st.cleanEnd && len(st.segments) > 0 && st.end > st.segments[0].base
}

// notDurable marks err, a failed sync during recovery, with ErrNotDurable when unvouched (see
// Log.unvouched).
func notDurable(unvouched bool, err error) error {
	if !unvouched {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNotDurable, err)
}

// reopenNewest makes the newest live segment the active one: it truncates a torn tail and cuts
// the segment to the truncation offset, then syncs it, and returns the bytes the cut dropped.
func (l *Log) reopenNewest(st *dirState, unvouched bool) (int64, error) {
	newest := &l.segments[len(l.segments)-1]
	f, err := l.fs.OpenReadWrite(newest.path)
	if err != nil {
		return 0, fmt.Errorf("statelog: open %s: %w", newest.path, err)
	}
	l.active = f
	if t := st.torn; t != nil {
		if err := l.truncateTornTail(t); err != nil {
			return 0, notDurable(unvouched, err)
		}
	}
	var cutBytes int64
	if c := st.cut; c != nil && c.at < c.size {
		if err := l.truncateActive(c.seg.path, c.at); err != nil {
			return 0, err
		}
		cutBytes = c.size - c.at
	}
	// What the newest segment holds was read from the page cache, which may hold an append a
	// killed process wrote but never synced. Syncing it makes everything this log serves and
	// builds on durable, and keeps the rule that a roll seals a synced segment.
	if err := l.active.Sync(); err != nil {
		return 0, notDurable(unvouched, fmt.Errorf("statelog: sync %s: %w", newest.path, err))
	}
	return cutBytes, nil
}

// reportDurableEndCut counts and logs a truncation to the durable end, which drops bytes a
// failed append may have left and so must never go unnoticed.
func (l *Log) reportDurableEndCut(st *dirState, cutBytes int64) {
	l.m.durableEndCut()
	l.notable = true
	paths := make([]string, len(st.beyond))
	for i, s := range st.beyond {
		paths[i] = s.path
	}
	l.logger.Warn("truncated the log to its durable end: removed what a failed append may have left",
		zap.Int64("durable_end", st.end),
		zap.Int64("dropped_bytes", cutBytes),
		zap.Strings("deleted_segments", paths))
}

func (l *Log) truncateTornTail(t *tornTail) error {
	if err := l.truncateActive(t.seg.path, t.at); err != nil {
		return err
	}
	t.seg.size = t.at
	l.m.tornTail()
	l.notable = true
	l.logger.Warn("truncated torn tail of the newest segment (an unacknowledged append interrupted by a crash)",
		zap.String("segment", t.seg.path),
		zap.Int64("at_byte", t.at),
		zap.Int64("dropped_bytes", t.size-t.at),
		zap.String("reason", t.reason))
	return nil
}

// truncateActive cuts the active segment (at path) to size bytes and syncs it.
func (l *Log) truncateActive(path string, size int64) error {
	if err := l.active.Truncate(size); err != nil {
		return fmt.Errorf("statelog: truncate %s to %d bytes: %w", path, size, err)
	}
	if err := l.active.Sync(); err != nil {
		return fmt.Errorf("statelog: sync %s after truncating it: %w", path, err)
	}
	return nil
}
