package statelog

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
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
	beyond   []segment // segments wholly at or past the truncation offset, to delete unread
	cut      *cutPoint // where the newest live segment is truncated to the truncation offset

	cleanFiles []string // clean-end and clean-end.tmp, present: Open removes them
	cleanEnd   bool     // the end offset of the clean-end file vouched for the whole log
	badClean   string   // why a clean-end file could not be used ("" if none)
}

// cutPoint is where the newest live segment is cut to honour Options.TruncateAfter.
type cutPoint struct {
	seg  *segment
	at   int64 // byte position of the first frame at or past the truncation offset
	size int64 // size of the file before the cut
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
	fs   FS
	dir  string
	opts Options
	buf  []byte

	// cut ≥ 0 is the end offset to truncate the log to (Options.TruncateAfter); -1: none.
	// Nothing at or past it is read.
	cut int64
	// clean: cut is the end offset of the clean-end file, where the log ended when it was last
	// closed; the log must end exactly there.
	clean bool
	// deliver, when set, is handed the records of the live log (offsets from the log-start
	// offset up to the end or the cut) while their frames are verified, so that a load reads
	// and checksums every byte once. A frame's records go out only after the whole frame
	// verified; damage found later in the log still fails the inspection.
	deliver func(offset int64, record []byte) error
	from    int64 // the log-start offset, once known: the first offset delivered
}

func newInspector(dir string, opts Options) *inspector {
	return &inspector{fs: opts.FS, dir: dir, opts: opts, buf: make([]byte, opts.ReadBufferBytes), cut: -1}
}

func (in *inspector) path(name string) string { return filepath.Join(in.dir, name) }

// inspect verifies the whole log: segment names, headers and contiguity, every frame of every
// live segment, and the log-start offset. Damage is returned as *CorruptionError, except a
// torn tail of the newest segment (and a headerless newest segment from an interrupted roll),
// which is reported in the state for the caller to truncate.
func (in *inspector) inspect() (*dirState, error) {
	st, segs, hasStart, err := in.list()
	if err != nil {
		return nil, err
	}
	if hasStart {
		if st.start, err = readStartFile(in.fs, in.dir); err != nil {
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

	if in.cut < 0 && slices.Contains(st.cleanFiles, in.path(cleanFileName)) {
		if err := in.useCleanEnd(st); err != nil {
			return nil, err
		}
	}
	if in.cut >= 0 {
		if in.cut < st.start {
			return nil, fmt.Errorf("%w: truncate after offset %d, below the log-start offset %d", ErrOutOfRange, in.cut, st.start)
		}
		segs, st.beyond = splitAtCut(segs, st.start, in.cut, in.clean)
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
		if in.cut > 0 {
			return nil, in.endsBeforeCut(in.path(startFileName), 0, 0)
		}
		return st, nil
	}

	// Segments wholly below the log-start offset are leftovers of an interrupted
	// SetStartOffset, or of a deletion that had not ended: they are deleted, not verified.
	// The newest segment always stays.
	first := firstLive(segs, st.start)
	st.below, segs = segs[:first], segs[first:]
	if segs[0].base > st.start {
		reason := fmt.Sprintf("log-start offset %d is below the first segment's base offset %d", st.start, segs[0].base)
		if !hasStart {
			reason = fmt.Sprintf("log-start offset file missing but the first segment starts at offset %d", segs[0].base)
		}
		return nil, &CorruptionError{Segment: in.path(startFileName), Reason: reason, kind: damageStart, fixStart: segs[0].base}
	}

	next, err := in.verifySegments(st, segs)
	if err != nil {
		return nil, err
	}
	if in.clean {
		if err := in.pastCleanEnd(st); err != nil {
			return nil, err
		}
		st.cleanEnd = true
	}
	st.segments, st.end = segs, next
	if st.start > st.end {
		return nil, &CorruptionError{Segment: in.path(startFileName), kind: damageStart, fixStart: st.end,
			Reason: fmt.Sprintf("log-start offset %d is beyond the end offset %d", st.start, st.end)}
	}
	return st, nil
}

// list sorts the directory's entries into the state's files: segments (in name order, which is
// id order, checked), offset files and strays. hasStart reports a log-start offset file.
func (in *inspector) list() (st *dirState, segs []segment, hasStart bool, err error) {
	names, err := in.fs.ReadDir(in.dir)
	if err != nil {
		return nil, nil, false, fmt.Errorf("statelog: list %s: %w", in.dir, err)
	}
	st = &dirState{}
	for _, name := range names {
		switch {
		case name == startFileName:
			hasStart = true
		case name == startTmpName:
			st.staleTmp = true
		case name == lockFileName:
		case name == cleanFileName || name == cleanTmpName:
			st.cleanFiles = append(st.cleanFiles, in.path(name))
		case strings.HasSuffix(name, segmentSuffix):
			base, id, ok := parseSegmentName(name)
			if !ok {
				return nil, nil, false, &CorruptionError{Segment: in.path(name), Reason: "unrecognised segment file name", kind: damageStray}
			}
			if n := len(segs); n > 0 && id <= segs[n-1].id {
				return nil, nil, false, &CorruptionError{Segment: in.path(name),
					Reason: fmt.Sprintf("segment id %d does not follow id %d of %s", id, segs[n-1].id, filepath.Base(segs[n-1].path))}
			}
			segs = append(segs, segment{id: id, base: base, path: in.path(name)})
			st.maxID = max(st.maxID, id)
		default:
			st.stray = append(st.stray, name)
		}
	}
	return st, segs, hasStart, nil
}

// verifySegments verifies the live segments segs, from the log-start offset on, records a torn
// tail or a cut of the newest one in st, and returns the log's end offset.
func (in *inspector) verifySegments(st *dirState, segs []segment) (int64, error) {
	in.from = st.start
	next := segs[0].base
	for i := range segs {
		// A torn tail is possible only in the newest segment, and not when that segment
		// was followed by an interrupted roll: a roll starts only after the previous
		// segment's last append was synced. Nor below a truncation offset: everything
		// there was synced.
		newest := i == len(segs)-1
		allowTorn := newest && st.remnant == nil && in.cut < 0
		cut := int64(-1)
		if newest {
			cut = in.cut
		}
		end, torn, cutAt, err := in.verifySegment(&segs[i], next, allowTorn, cut)
		if err != nil {
			return 0, err
		}
		st.torn = torn
		next = end
		if cutAt >= 0 {
			st.cut = &cutPoint{seg: &segs[i], at: cutAt, size: segs[i].size}
			segs[i].size = cutAt
		}
	}
	if in.cut >= 0 && next < in.cut {
		last := &segs[len(segs)-1]
		return 0, in.endsBeforeCut(last.path, last.size, next)
	}
	return next, nil
}

// splitAtCut returns the segments that may hold records below cut, and those wholly at or
// past it. The first segment that holds the log-start offset always stays, so that the log
// keeps a segment to append to. With keepAtCut (the end of a clean close) a segment that starts
// at cut stays too: a healthy log can end in a segment that holds nothing but its header (a
// roll whose append a crash, or a failure, interrupted; a torn first frame; a repair), and it
// is verified like any other, so that bytes after its header are found.
func splitAtCut(segs []segment, start, cut int64, keepAtCut bool) (keep, beyond []segment) {
	first := firstLive(segs, start)
	n := len(segs)
	for n > first+1 && (segs[n-1].base > cut || segs[n-1].base == cut && !keepAtCut) {
		n--
	}
	return segs[:n], segs[n:]
}

// firstLive returns the index of the segment that holds the log-start offset start: the
// segments before it lie wholly below start. The newest segment always counts as live.
func firstLive(segs []segment, start int64) int {
	first := 0
	for first < len(segs)-1 && segs[first+1].base <= start {
		first++
	}
	return first
}

// endsBeforeCut reports a log that ends at offset end, below the truncation offset: records
// that were synced are missing.
func (in *inspector) endsBeforeCut(path string, at, end int64) error {
	if in.clean {
		return &CorruptionError{Segment: path, Offset: at, kind: damageClean,
			Reason: fmt.Sprintf("the log ends at offset %d, before offset %d where it ended when it was last closed (%s): acknowledged records are missing",
				end, in.cut, cleanFileName)}
	}
	return &CorruptionError{Segment: path, Offset: at,
		Reason: fmt.Sprintf("the log ends at offset %d, before its durable end %d", end, in.cut)}
}

// useCleanEnd reads the clean-end file, written when the log was last closed, and makes its end
// offset the truncation offset that the log must reach exactly: after a clean close no append
// can have been interrupted, so damage at the tail is corruption, not a torn tail. A file that
// cannot be read as one is left unused (st.badClean) and the log is judged as after a crash.
func (in *inspector) useCleanEnd(st *dirState) error {
	// A clean-end file of a format this release does not know is unusable like a damaged one:
	// without it the log is only judged as after a crash.
	off, reason, _, err := readOffsetFile(in.fs, in.path(cleanFileName), cleanMagic, cleanFileName+" file")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Gone since the listing: a server opening the log removed it (dump-log of a live
		// directory). The log is read as one that is open.
	case err != nil:
		return err
	case reason != "":
		st.badClean = reason
	case off < st.start:
		// One of the two files is wrong; the checks of a log without it tell which.
		st.badClean = fmt.Sprintf("%s offset %d is below the log-start offset %d", cleanFileName, off, st.start)
	default:
		in.cut, in.clean = off, true
	}
	return nil
}

// pastCleanEnd reports records past the end offset of the clean-end file, which a log opened
// after its clean close cannot have written before removing that file.
func (in *inspector) pastCleanEnd(st *dirState) error {
	var path string
	var at int64
	switch {
	case st.cut != nil && st.cut.at < st.cut.size:
		path, at = st.cut.seg.path, st.cut.at
	case len(st.beyond) > 0:
		path = st.beyond[0].path
	case st.remnant != nil:
		// A clean close leaves no interrupted roll: this segment came after it.
		path = st.remnant.path
	default:
		return nil
	}
	return &CorruptionError{Segment: path, Offset: at, kind: damageClean,
		Reason: fmt.Sprintf("the log holds bytes past offset %d, where it ended when it was last closed (%s)", in.cut, cleanFileName)}
}

// readStartFile reads the persisted log-start offset of the log in dir.
func readStartFile(fsys FS, dir string) (int64, error) {
	path := filepath.Join(dir, startFileName)
	off, reason, unsupported, err := readOffsetFile(fsys, path, startMagic, "log-start offset file")
	switch {
	case err == nil && unsupported:
		err = unsupportedFormat(path, reason)
	case err == nil && reason != "":
		err = &CorruptionError{Segment: path, Reason: reason, kind: damageStart}
	}
	return off, err
}

// readOffsetFile reads the offset file at path (see encodeOffsetFile); reason says why its
// content is unusable, unsupported that it is a format this release does not know, err reports
// an I/O failure.
func readOffsetFile(fsys FS, path string, magic uint32, what string) (off int64, reason string, unsupported bool, err error) {
	err = withFile(fsys, path, func(f File, size int64) error {
		if size != startFileSize {
			reason = fmt.Sprintf("%s has %d bytes, want %d", what, size, startFileSize)
			return nil
		}
		var b [startFileSize]byte
		if _, err := f.ReadAt(b[:], 0); err != nil {
			return fmt.Errorf("statelog: read %s: %w", path, err)
		}
		off, reason, unsupported = decodeOffsetFile(b[:], magic, what)
		return nil
	})
	return off, reason, unsupported, err
}

// isRollRemnant reports whether the newest segment is what an interrupted roll leaves: a
// header that is incomplete or fails its checksum, and no frame anywhere in the file. A bad
// header with frames after it is corruption.
func (in *inspector) isRollRemnant(seg *segment) (bool, error) {
	remnant := false
	err := withFile(in.fs, seg.path, func(f File, size int64) error {
		if size >= segmentHeaderSize {
			// The header alone: the segment is read whole once, when it is verified.
			var hb [segmentHeaderSize]byte
			if _, err := f.ReadAt(hb[:], 0); err != nil {
				return fmt.Errorf("read %s: %w", seg.path, err)
			}
			if _, intact, _, _ := decodeSegmentHeader(hb[:]); intact {
				return nil
			}
		}
		r := newFrameReader(f, seg.path, size, in.buf, in.opts.MaxRecordBytes)
		defer func() { in.buf = r.buf }()
		found, err := r.frameAfter(0, nil)
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
// previous segment ends at, then every frame, handing the records of each verified frame to
// in.deliver if set. It returns the segment's end offset. With allowTorn, a bad frame that no
// intact frame follows is a torn tail, returned for truncation; every other bad frame is
// corruption. With cut ≥ 0, verification stops at the frame that starts at offset cut, whose
// byte position is returned as cutAt (-1 when the segment ends first); a frame that holds
// offsets on both sides of cut is an error.
func (in *inspector) verifySegment(seg *segment, next int64, allowTorn bool, cut int64) (end int64, torn *tornTail, cutAt int64, err error) {
	cutAt = -1
	err = withFile(in.fs, seg.path, func(f File, size int64) error {
		seg.size = size
		r := newFrameReader(f, seg.path, size, in.buf, in.opts.MaxRecordBytes)
		defer func() { in.buf = r.buf }()
		if err := checkSegmentHeader(r, seg, next); err != nil {
			return err
		}
		pos := int64(segmentHeaderSize)
		for pos < size && next != cut {
			fr, bad, err := r.next(pos)
			if err != nil {
				return err
			}
			if bad == nil && fr.hdr.base != next {
				bad = &badFrame{pos: pos, reason: fmt.Sprintf("frame base offset %d, expected %d", fr.hdr.base, next)}
			}
			if bad == nil && cut >= 0 && next+int64(fr.hdr.count) > cut {
				if in.clean {
					return &CorruptionError{Segment: seg.path, Offset: pos, kind: damageClean,
						Reason: fmt.Sprintf("the frame holds offsets [%d, %d), across offset %d where the log ended when it was last closed (%s)",
							next, next+int64(fr.hdr.count), cut, cleanFileName)}
				}
				return fmt.Errorf("statelog: cannot truncate %s after offset %d: the frame at byte %d holds offsets [%d, %d)",
					seg.path, cut, pos, next, next+int64(fr.hdr.count))
			}
			if bad == nil && in.deliver != nil {
				if err := records(fr.payload, fr.hdr.count, fr.hdr.base, in.from, in.deliver); errors.Is(err, errMalformed) {
					bad = &badFrame{pos: pos, reason: err.Error()}
				} else if err != nil {
					return err
				}
			}
			if bad != nil {
				if allowTorn && bad.torn {
					// A frame a writer completed after this one cannot start inside it, when
					// its intact header says where it ends; when the header is damaged too, it
					// must at least continue the offsets.
					from, damaged := pos+1, &damagedFrame{pos: pos, next: next}
					if bad.end > 0 {
						from, damaged = bad.end, nil
					}
					found, err := r.frameAfter(from, damaged)
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
		if next == cut {
			cutAt = pos
		}
		return nil
	})
	return next, torn, cutAt, err
}

// checkSegmentHeader verifies the header of seg: intact, in agreement with the file name, and
// starting where the previous segment ends.
func checkSegmentHeader(r *frameReader, seg *segment, next int64) error {
	h, err := readSegmentHeader(r)
	switch {
	case err != nil:
		return err
	case h.id != seg.id || h.base != seg.base:
		return &CorruptionError{Segment: seg.path,
			Reason: fmt.Sprintf("segment header (id %d, base offset %d) does not match the file name", h.id, h.base)}
	case seg.base != next:
		return &CorruptionError{Segment: seg.path,
			Reason: fmt.Sprintf("segment starts at offset %d but the previous segment ends at %d", seg.base, next)}
	}
	return nil
}

// readSegmentHeader reads and decodes the header of r's segment; an incomplete or unusable
// header is a *CorruptionError, and an intact one of a format this release does not know an
// error wrapping ErrUnsupportedFormat.
func readSegmentHeader(r *frameReader) (segmentHeader, error) {
	hb, err := r.window(0, segmentHeaderSize)
	if errors.Is(err, errShort) {
		return segmentHeader{}, &CorruptionError{Segment: r.path, Reason: "incomplete segment header"}
	}
	if err != nil {
		return segmentHeader{}, err
	}
	h, _, reason, unsupported := decodeSegmentHeader(hb)
	if unsupported {
		return segmentHeader{}, unsupportedFormat(r.path, reason)
	}
	if reason != "" {
		return segmentHeader{}, &CorruptionError{Segment: r.path, Reason: reason}
	}
	return h, nil
}

// withFile opens path read-only and calls fn with it and its size; close errors are returned.
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

// fileSize returns the size of the file at path.
func fileSize(fsys FS, path string) (int64, error) {
	var size int64
	err := withFile(fsys, path, func(_ File, s int64) error { size = s; return nil })
	return size, err
}
