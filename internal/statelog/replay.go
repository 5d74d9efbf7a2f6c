package statelog

import (
	"errors"
	"fmt"
	"sort"
)

// Replay calls fn for every record with offset ≥ from, in order, up to the EndOffset at the
// time of the call, streaming through a buffer of about ReadBufferBytes (grown only for a
// larger frame). record aliases that buffer and is valid only until fn returns. from <
// StartOffset() or from > EndOffset() → ErrOutOfRange. A non-nil error from fn stops the
// replay and is returned as is. A frame is verified again (checksum and record structure)
// before any of its records is passed to fn, so a damaged batch yields none of its records;
// frames wholly below from are skipped on their header alone. Damage found is a
// *CorruptionError. A failed log refuses to replay (ErrFailed): what it wrote last may not
// be what the disk holds.
func (l *Log) Replay(from int64, fn func(offset int64, record []byte) error) error {
	if err := l.usable(); err != nil {
		return err
	}
	start, end := l.start.Load(), l.end.Load()
	if from < start || from > end {
		return fmt.Errorf("%w: replay from %d, log holds [%d, %d)", ErrOutOfRange, from, start, end)
	}
	if err := l.flushTail(); err != nil {
		return l.fail(err)
	}
	err := replaySegments(l.fs, l.segments, from, end, make([]byte, l.opts.ReadBufferBytes), l.opts.MaxRecordBytes, fn)
	var cb callbackError
	if errors.As(err, &cb) {
		return cb.err
	}
	if ce := (*CorruptionError)(nil); errors.As(err, &ce) {
		l.m.corruption()
	}
	return err
}

// callbackError carries an error returned by a replay callback through replaySegments.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// replaySegments streams the records of segs with offsets in [from, end) to fn. A callback
// error comes back as callbackError.
func replaySegments(fsys FS, segs []segment, from, end int64, buf []byte, maxRecordBytes int,
	fn func(offset int64, record []byte) error) error {
	if from >= end {
		return nil
	}
	i := max(sort.Search(len(segs), func(i int) bool { return segs[i].base > from })-1, 0)
	for ; i < len(segs); i++ {
		segEnd := end
		if i+1 < len(segs) {
			segEnd = min(segs[i+1].base, end)
		}
		seg := &segs[i]
		err := withFile(fsys, seg.path, func(f File, size int64) error {
			if size < seg.size {
				return &CorruptionError{Segment: seg.path, Offset: size,
					Reason: fmt.Sprintf("segment shrank from %d to %d bytes", seg.size, size)}
			}
			r := newFrameReader(f, seg.path, seg.size, buf, maxRecordBytes)
			defer func() { buf = r.buf }()
			return replaySegment(r, seg, from, segEnd, fn)
		})
		if err != nil {
			return err
		}
		if segEnd == end {
			return nil
		}
	}
	return nil
}

// replaySegment streams the records of one segment with offsets in [from, segEnd).
func replaySegment(r *frameReader, seg *segment, from, segEnd int64, fn func(int64, []byte) error) error {
	if err := checkSegmentHeader(r, seg, seg.base); err != nil {
		return err
	}
	pos, next := int64(segmentHeaderSize), seg.base
	for next < segEnd {
		fr, bad, err := r.header(pos)
		if err != nil {
			return err
		}
		switch {
		case bad != nil:
		case fr.hdr.base != next:
			bad = &badFrame{pos: pos, reason: fmt.Sprintf("frame base offset %d, expected %d", fr.hdr.base, next)}
		case next+int64(fr.hdr.count) > segEnd:
			bad = &badFrame{pos: pos, reason: fmt.Sprintf("frame runs past offset %d", segEnd)}
		case next+int64(fr.hdr.count) > from:
			// Frames wholly below from are skipped on their header alone. The rest are
			// verified whole (checksum and record structure) before any record goes out.
			if bad, err = r.verify(&fr); err != nil {
				return err
			}
			if bad == nil {
				err := records(fr.payload, fr.hdr.count, fr.hdr.base, from, fn)
				if errors.Is(err, errMalformed) {
					bad = &badFrame{pos: pos, reason: err.Error()}
				} else if err != nil {
					return err
				}
			}
		}
		if bad != nil {
			return &CorruptionError{Segment: seg.path, Offset: pos, Reason: bad.reason}
		}
		next += int64(fr.hdr.count)
		pos = fr.end()
	}
	return nil
}
