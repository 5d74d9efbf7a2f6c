package statelog

import (
	"errors"
	"fmt"
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
func Scan(logger *zap.Logger, path string, opts Options, fn func(offset int64, record []byte) error) error {
	if logger == nil {
		logger = zap.NewNop()
	}
	opts, err := opts.resolve()
	if err != nil {
		return err
	}
	var torn *tornTail
	names, err := opts.FS.ReadDir(path)
	if err == nil && !holdsLog(names) {
		return fmt.Errorf("statelog: scan %s: %w", path, ErrNoLog)
	}
	if err == nil {
		in := newInspector(path, opts)
		in.deliver = fn
		var st *dirState
		if st, err = in.inspect(); err == nil {
			if st.remnant != nil {
				logger.Warn("skipped segment left by an interrupted roll", zap.String("segment", st.remnant.path))
			}
			torn = st.torn
		}
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
