package statelog

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"go.uber.org/zap"
)

// segment is one segment file of a log.
type segment struct {
	id   uint64
	base int64  // offset of its first record
	path string // file path
	size int64  // bytes of the file that belong to the log
}

// dirState is what inspecting a log directory found: the live log, and the changes opening it
// must make, none of which inspect makes itself.
type dirState struct {
	segments []segment // live segments in offset order; the last is the newest
	start    int64     // log-start offset
	end      int64     // end offset
	maxID    uint64    // largest segment id seen (live or not)

	staleTmp bool      // a start-offset.tmp left by an interrupted SetStartOffset
	remnant  *segment  // newest segment of an interrupted roll: bad header, no frames
	below    []segment // segments wholly below the log-start offset
	torn     *tornTail // bad frame at the tail of the newest segment
	stray    []string  // files in the directory that are not the log's, left alone
}

// tornTail is the end of the newest segment that an interrupted append left behind.
type tornTail struct {
	seg    *segment
	at     int64 // valid bytes: the size to truncate to
	size   int64 // size before truncation
	reason string
}

// inspector reads a log directory without modifying it.
type inspector struct {
	logger *zap.Logger
	fs     FS
	dir    string
	opts   Options
	buf    []byte
}

func newInspector(logger *zap.Logger, dir string, opts Options) *inspector {
	return &inspector{logger: logger, fs: opts.FS, dir: dir, opts: opts, buf: make([]byte, opts.ReadBufferBytes)}
}

func (in *inspector) path(name string) string { return filepath.Join(in.dir, name) }

// inspect verifies the whole log: segment names, headers and contiguity, every frame of every
// live segment, and the log-start offset. Damage is returned as *CorruptionError, except a
// torn tail of the newest segment (and a headerless newest segment from an interrupted roll),
// which is reported in the state for the caller to truncate.
func (in *inspector) inspect() (*dirState, error) {
	names, err := in.fs.ReadDir(in.dir)
	if err != nil {
		return nil, fmt.Errorf("statelog: list %s: %w", in.dir, err)
	}
	st := &dirState{}
	var segs []segment
	hasStart := false
	for _, name := range names {
		switch {
		case name == startFileName:
			hasStart = true
		case name == startTmpName:
			st.staleTmp = true
		case name == lockFileName:
		case strings.HasSuffix(name, segmentSuffix):
			base, id, ok := parseSegmentName(name)
			if !ok {
				return nil, &CorruptionError{Segment: in.path(name), Reason: "unrecognised segment file name", kind: damageStray}
			}
			if n := len(segs); n > 0 && id <= segs[n-1].id {
				return nil, &CorruptionError{Segment: in.path(name),
					Reason: fmt.Sprintf("segment id %d does not follow id %d of %s", id, segs[n-1].id, filepath.Base(segs[n-1].path))}
			}
			segs = append(segs, segment{id: id, base: base, path: in.path(name)})
			st.maxID = max(st.maxID, id)
		default:
			st.stray = append(st.stray, name)
		}
	}

	if hasStart {
		if st.start, err = in.readStart(); err != nil {
			if ce := (*CorruptionError)(nil); errors.As(err, &ce) {
				// Unknown start: the first segment's base hides nothing that is there.
				ce.fixStart = -1
				if len(segs) > 0 {
					ce.fixStart = segs[0].base
				}
			}
			return nil, err
		}
	}

	if n := len(segs); n > 0 {
		remnant, err := in.isRollRemnant(&segs[n-1])
		if err != nil {
			return nil, err
		}
		if remnant {
			st.remnant = &segs[n-1]
			segs = segs[:n-1]
		}
	}

	if len(segs) == 0 {
		if st.start != 0 {
			return nil, &CorruptionError{Segment: in.path(startFileName), kind: damageStart, fixStart: -1,
				Reason: fmt.Sprintf("log-start offset %d but no segments", st.start)}
		}
		return st, nil
	}

	// Segments wholly below the log-start offset are leftovers of an interrupted
	// SetStartOffset: they are deleted, not verified. The newest segment always stays.
	first := 0
	for first < len(segs)-1 && segs[first+1].base <= st.start {
		first++
	}
	st.below, segs = segs[:first], segs[first:]
	if segs[0].base > st.start {
		reason := fmt.Sprintf("log-start offset %d is below the first segment's base offset %d", st.start, segs[0].base)
		if !hasStart {
			reason = fmt.Sprintf("log-start offset file missing but the first segment starts at offset %d", segs[0].base)
		}
		return nil, &CorruptionError{Segment: in.path(startFileName), Reason: reason, kind: damageStart, fixStart: segs[0].base}
	}

	next := segs[0].base
	for i := range segs {
		// A torn tail is possible only in the newest segment, and not when that segment
		// was followed by an interrupted roll: a roll starts only after the previous
		// segment's last append was synced.
		allowTorn := i == len(segs)-1 && st.remnant == nil
		end, torn, err := in.verifySegment(&segs[i], next, allowTorn)
		if err != nil {
			return nil, err
		}
		st.torn = torn
		next = end
	}
	st.segments, st.end = segs, next
	if st.start > st.end {
		return nil, &CorruptionError{Segment: in.path(startFileName), kind: damageStart, fixStart: st.end,
			Reason: fmt.Sprintf("log-start offset %d is beyond the end offset %d", st.start, st.end)}
	}
	return st, nil
}

// readStart reads the persisted log-start offset.
func (in *inspector) readStart() (int64, error) {
	path := in.path(startFileName)
	f, err := in.fs.Open(path)
	if err != nil {
		return 0, fmt.Errorf("statelog: open %s: %w", path, err)
	}
	off, err := func() (int64, error) {
		size, err := f.Size()
		if err != nil {
			return 0, fmt.Errorf("statelog: size of %s: %w", path, err)
		}
		if size != startFileSize {
			return 0, &CorruptionError{Segment: path, Reason: fmt.Sprintf("log-start offset file has %d bytes, want %d", size, startFileSize), kind: damageStart}
		}
		var b [startFileSize]byte
		if _, err := f.ReadAt(b[:], 0); err != nil {
			return 0, fmt.Errorf("statelog: read %s: %w", path, err)
		}
		off, reason := decodeStartFile(b[:])
		if reason != "" {
			return 0, &CorruptionError{Segment: path, Reason: reason, kind: damageStart}
		}
		return off, nil
	}()
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("statelog: close %s: %w", path, cerr)
	}
	return off, err
}

// isRollRemnant reports whether the newest segment is what an interrupted roll leaves: a
// header that is incomplete or fails its checksum, and no frame anywhere in the file. A bad
// header with frames after it is corruption.
func (in *inspector) isRollRemnant(seg *segment) (bool, error) {
	remnant := false
	err := in.withFile(seg.path, func(f File, size int64) error {
		r := newFrameReader(f, seg.path, size, in.buf, in.opts.MaxRecordBytes)
		defer func() { in.buf = r.buf }()
		if size >= segmentHeaderSize {
			hb, err := r.window(0, segmentHeaderSize)
			if err != nil {
				return err
			}
			if _, intact, _ := decodeSegmentHeader(hb); intact {
				return nil
			}
		}
		found, err := r.frameAfter(0)
		if err != nil {
			return err
		}
		if found {
			return &CorruptionError{Segment: seg.path, Reason: "damaged segment header followed by frames"}
		}
		remnant = true
		return nil
	})
	return remnant, err
}

// verifySegment checks seg's header against its name and against next, the offset the
// previous segment ends at, then every frame. It returns the segment's end offset. With
// allowTorn, a bad frame that no intact frame follows is a torn tail, returned for
// truncation; every other bad frame is corruption.
func (in *inspector) verifySegment(seg *segment, next int64, allowTorn bool) (int64, *tornTail, error) {
	var torn *tornTail
	err := in.withFile(seg.path, func(f File, size int64) error {
		seg.size = size
		r := newFrameReader(f, seg.path, size, in.buf, in.opts.MaxRecordBytes)
		defer func() { in.buf = r.buf }()
		if err := checkSegmentHeader(r, seg, next); err != nil {
			return err
		}
		pos := int64(segmentHeaderSize)
		for pos < size {
			fr, bad, err := r.next(pos)
			if err != nil {
				return err
			}
			if bad == nil && fr.hdr.base != next {
				bad = &badFrame{pos: pos, reason: fmt.Sprintf("frame base offset %d, expected %d", fr.hdr.base, next)}
			}
			if bad != nil {
				if allowTorn && bad.torn {
					found, err := r.frameAfter(pos + 1)
					if err != nil {
						return err
					}
					if !found {
						torn = &tornTail{seg: seg, at: pos, size: size, reason: bad.reason}
						seg.size = pos
						return nil
					}
				}
				return &CorruptionError{Segment: seg.path, Offset: pos, Reason: bad.reason}
			}
			next += int64(fr.hdr.count)
			pos = fr.end()
		}
		return nil
	})
	return next, torn, err
}

// checkSegmentHeader verifies the header of seg: intact, in agreement with the file name, and
// starting where the previous segment ends.
func checkSegmentHeader(r *frameReader, seg *segment, next int64) error {
	hb, err := r.window(0, segmentHeaderSize)
	if errors.Is(err, errShort) {
		return &CorruptionError{Segment: seg.path, Reason: "incomplete segment header"}
	}
	if err != nil {
		return err
	}
	h, _, reason := decodeSegmentHeader(hb)
	switch {
	case reason != "":
		return &CorruptionError{Segment: seg.path, Reason: reason}
	case h.id != seg.id || h.base != seg.base:
		return &CorruptionError{Segment: seg.path,
			Reason: fmt.Sprintf("segment header (id %d, base offset %d) does not match the file name", h.id, h.base)}
	case seg.base != next:
		return &CorruptionError{Segment: seg.path,
			Reason: fmt.Sprintf("segment starts at offset %d but the previous segment ends at %d", seg.base, next)}
	}
	return nil
}

// withFile opens path read-only and calls fn with it and its size; close errors are returned.
func (in *inspector) withFile(path string, fn func(f File, size int64) error) error {
	return withFile(in.fs, path, fn)
}

func withFile(fsys FS, path string, fn func(f File, size int64) error) error {
	f, err := fsys.Open(path)
	if err != nil {
		return fmt.Errorf("statelog: open %s: %w", path, err)
	}
	size, err := f.Size()
	if err != nil {
		err = fmt.Errorf("statelog: size of %s: %w", path, err)
	} else {
		err = fn(f, size)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("statelog: close %s: %w", path, cerr)
	}
	return err
}
