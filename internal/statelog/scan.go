package statelog

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"syscall"

	"go.uber.org/zap"
)

// Scan reads a log directory or a single segment file read-only (it never modifies anything,
// and takes no lock) and calls fn for every record, in offset order, for dump-log. For a
// directory these are the records Open and Replay(StartOffset()) would yield: segments below
// the log-start offset and records below it are skipped. A single file is read from its first
// record. Like Load it reads the log once, handing over each frame's records as soon as the
// frame verified: a torn tail of the newest segment (or of the single file) ends the scan and
// is logged; corruption elsewhere stops it there with a *CorruptionError, after the records
// before the damage went to fn. record aliases an internal buffer and is valid only until fn
// returns; a non-nil error from fn stops the scan and is returned. A directory without any file
// of a log is refused with ErrNoLog.
//
// A log in use by a server changes under the scan: a prune deletes segments, a start-up removes
// the clean-end file and appends past it. Either can make a read fail as if the log were
// damaged. So when a scan of a directory fails with damage or a missing file and the
// directory's files (names and sizes) changed meanwhile, Scan reads the log again (up to scanAttempts times in
// all), handing fn only the records past the last one it already had.
func Scan(logger *zap.Logger, path string, opts Options, fn func(offset int64, record []byte) error) error {
	if logger == nil {
		logger = zap.NewNop()
	}
	opts, err := opts.resolve()
	if err != nil {
		return err
	}
	var torn *tornTail
	files, err := dirFiles(opts.FS, path)
	if err == nil && !holdsLog(fileNames(files)) {
		return fmt.Errorf("statelog: scan %s: %w", path, ErrNoLog)
	}
	if err == nil {
		torn, err = scanDir(logger, path, files, opts, fn)
	} else if errors.Is(err, syscall.ENOTDIR) {
		torn, err = scanSegmentFile(path, opts, fn)
	} else {
		return fmt.Errorf("statelog: scan %s: %w", path, err)
	}
	var cb callbackError
	if errors.As(err, &cb) {
		return cb.err
	}
	if err != nil {
		return err
	}
	if torn != nil {
		logger.Warn("scan ended at the torn tail of the newest segment",
			zap.String("segment", torn.seg.path), zap.Int64("at_byte", torn.at),
			zap.Int64("ignored_bytes", torn.size-torn.at), zap.String("reason", torn.reason))
	}
	return nil
}

// scanAttempts bounds how often Scan reads a directory that keeps changing under it.
const scanAttempts = 3

// scanDir verifies the log in dir, whose files were listed as before, handing its records to
// fn (fn's errors come back as callbackError), and returns any torn tail. It reads the log
// again while a read fails with damage or a missing file and the directory's files have changed
// since the read began.
func scanDir(logger *zap.Logger, dir string, before []dirFile, opts Options, fn func(int64, []byte) error) (*tornTail, error) {
	next := int64(math.MinInt64) // the offset after the last record handed to fn
	deliver := func(offset int64, record []byte) error {
		if offset < next {
			return nil
		}
		next = offset + 1
		return fn(offset, record)
	}
	for attempt := 1; ; attempt++ {
		in := newInspector(dir, opts)
		in.deliver = deliver
		st, err := in.inspect()
		if err == nil {
			if st.remnant != nil {
				logger.Warn("skipped segment left by an interrupted roll", zap.String("segment", st.remnant.path))
			}
			return st.torn, nil
		}
		var ce *CorruptionError
		if attempt == scanAttempts || !(errors.As(err, &ce) || errors.Is(err, fs.ErrNotExist)) {
			return nil, err
		}
		now, ferr := dirFiles(opts.FS, dir)
		if ferr != nil || slices.Equal(now, before) {
			return nil, err
		}
		logger.Warn("the log changed while it was read (a server is using it); reading it again",
			zap.String("dir", dir), zap.NamedError("read_error", err))
		before = now
	}
}

// dirFile is a file of a log directory and its size (-1: gone before it could be opened).
type dirFile struct {
	name string
	size int64
}

// fileNames returns the names of files.
func fileNames(files []dirFile) []string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.name
	}
	return names
}

// dirFiles lists the files of dir with their sizes: a server that used the log meanwhile, even
// one that started, appended and stopped again, leaves a different list.
func dirFiles(fsys FS, dir string) ([]dirFile, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := make([]dirFile, len(names))
	for i, name := range names {
		files[i] = dirFile{name: name, size: -1}
		f, err := fsys.Open(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		if size, err := f.Size(); err == nil {
			files[i].size = size
		}
		_ = f.Close()
	}
	return files, nil
}

// scanSegmentFile verifies a lone segment file, taking its id and base offset from its header,
// and hands its records to deliver as its frames verify (deliver's errors come back as
// callbackError); it returns any torn tail.
func scanSegmentFile(path string, opts Options, deliver func(int64, []byte) error) (*tornTail, error) {
	in := newInspector("", opts)
	seg := segment{path: path}
	err := withFile(opts.FS, path, func(f File, size int64) error {
		h, err := readSegmentHeader(newFrameReader(f, path, size, in.buf, opts.MaxRecordBytes))
		seg.id, seg.base = h.id, h.base
		return err
	})
	if err != nil {
		return nil, err
	}
	in.deliver, in.from = deliver, seg.base
	_, torn, _, err := in.verifySegment(&seg, seg.base, true, -1)
	return torn, err
}
