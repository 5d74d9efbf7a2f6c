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
// record. A torn tail of the newest segment (or of the single file) ends the scan and is
// logged; corruption elsewhere → *CorruptionError. record aliases an internal buffer and is
// valid only until fn returns; a non-nil error from fn stops the scan and is returned.
func Scan(logger *zap.Logger, path string, opts Options, fn func(offset int64, record []byte) error) error {
	if logger == nil {
		logger = zap.NewNop()
	}
	opts, err := opts.resolve()
	if err != nil {
		return err
	}
	var segs []segment
	var start, end int64
	var torn *tornTail
	if _, err := opts.FS.ReadDir(path); err == nil {
		st, err := newInspector(path, opts).inspect()
		if err != nil {
			return err
		}
		if st.remnant != nil {
			logger.Warn("skipping segment left by an interrupted roll", zap.String("segment", st.remnant.path))
		}
		segs, start, end, torn = st.segments, st.start, st.end, st.torn
	} else if errors.Is(err, syscall.ENOTDIR) {
		seg, segEnd, t, err := scanSegmentFile(path, opts)
		if err != nil {
			return err
		}
		segs, start, end, torn = []segment{seg}, seg.base, segEnd, t
	} else {
		return fmt.Errorf("statelog: scan %s: %w", path, err)
	}
	if torn != nil {
		logger.Warn("scan ends at the torn tail of the newest segment",
			zap.String("segment", torn.seg.path), zap.Int64("at_byte", torn.at),
			zap.Int64("ignored_bytes", torn.size-torn.at), zap.String("reason", torn.reason))
	}
	err = replaySegments(opts.FS, segs, start, end, make([]byte, opts.ReadBufferBytes), opts.MaxRecordBytes, fn)
	var cb callbackError
	if errors.As(err, &cb) {
		return cb.err
	}
	return err
}

// scanSegmentFile verifies a lone segment file, taking its id and base offset from its header,
// and returns it with its end offset and any torn tail.
func scanSegmentFile(path string, opts Options) (segment, int64, *tornTail, error) {
	in := newInspector("", opts)
	seg := segment{path: path}
	err := withFile(opts.FS, path, func(f File, size int64) error {
		h, err := readSegmentHeader(newFrameReader(f, path, size, in.buf, opts.MaxRecordBytes))
		seg.id, seg.base = h.id, h.base
		return err
	})
	if err != nil {
		return segment{}, 0, nil, err
	}
	end, torn, _, err := in.verifySegment(&seg, seg.base, true, -1)
	if err != nil {
		return segment{}, 0, nil, err
	}
	return seg, end, torn, nil
}
