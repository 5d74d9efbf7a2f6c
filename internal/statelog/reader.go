package statelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// frameReader reads frames of one segment file through a large buffer: sequential reads are
// served from memory, and a frame larger than the buffer grows it (bounded by the frame
// checks, which run first). Slices it returns alias the buffer and stay valid until the next
// call.
type frameReader struct {
	f              File
	path           string
	size           int64 // bytes of the file that may be read
	maxRecordBytes int

	buf    []byte
	bufPos int64 // file offset of buf[0]
	bufLen int   // valid bytes in buf
}

func newFrameReader(f File, path string, size int64, buf []byte, maxRecordBytes int) *frameReader {
	return &frameReader{f: f, path: path, size: size, buf: buf, maxRecordBytes: maxRecordBytes}
}

// errShort means the file ends before the requested bytes.
var errShort = errors.New("unexpected end of segment")

// window returns the n bytes of the file at pos.
func (r *frameReader) window(pos int64, n int) ([]byte, error) {
	if pos < 0 || pos+int64(n) > r.size {
		return nil, errShort
	}
	if pos >= r.bufPos && pos+int64(n) <= r.bufPos+int64(r.bufLen) {
		s := int(pos - r.bufPos)
		return r.buf[s : s+n], nil
	}
	keep := 0
	if pos >= r.bufPos && pos < r.bufPos+int64(r.bufLen) {
		keep = copy(r.buf, r.buf[pos-r.bufPos:r.bufLen])
	}
	if n > len(r.buf) {
		grown := make([]byte, n)
		copy(grown, r.buf[:keep])
		r.buf = grown
	}
	r.bufPos, r.bufLen = pos, keep
	want := int64(len(r.buf))
	if rest := r.size - pos; want > rest {
		want = rest
	}
	m, err := r.f.ReadAt(r.buf[keep:want], pos+int64(keep))
	r.bufLen = keep + m
	if r.bufLen < int(want) {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read %s: file shrank below %d bytes", r.path, r.size)
		}
		return nil, fmt.Errorf("read %s: %w", r.path, err)
	}
	return r.buf[:n], nil
}

// frame is a frame read from a segment; payload aliases the reader's buffer and is nil when
// the frame was skipped.
type frame struct {
	hdr     frameHeader
	pos     int64 // file offset of the header
	payload []byte
}

func (f frame) end() int64 { return f.pos + frameHeaderSize + int64(f.hdr.length) }

// badFrame says why the bytes at a position are not a usable frame. torn means the damage is
// what an interrupted write leaves (missing or mismatching bytes); otherwise the frame is
// intact but unacceptable, which no interrupted write explains.
type badFrame struct {
	pos    int64
	torn   bool
	reason string
	// end is where the frame ends by its intact header (possibly past the file's end), or 0
	// when the header is damaged too.
	end int64
}

// next reads and verifies the frame at pos. I/O errors are returned as err; a frame that is
// not usable as bad.
func (r *frameReader) next(pos int64) (frame, *badFrame, error) {
	fr, bad, err := r.header(pos)
	if bad != nil || err != nil {
		return fr, bad, err
	}
	bad, err = r.verify(&fr)
	return fr, bad, err
}

// header reads and checks the header of the frame at pos, and that the frame fits in the
// file, without reading the payload: enough to skip the frame.
func (r *frameReader) header(pos int64) (frame, *badFrame, error) {
	hb, err := r.window(pos, frameHeaderSize)
	if errors.Is(err, errShort) {
		return frame{}, &badFrame{pos: pos, torn: true, reason: "incomplete frame header"}, nil
	}
	if err != nil {
		return frame{}, nil, err
	}
	hdr, ok := decodeFrameHeader(hb)
	if !ok {
		return frame{}, &badFrame{pos: pos, torn: true, reason: "bad frame header (magic or checksum)"}, nil
	}
	if reason := hdr.check(r.maxRecordBytes); reason != "" {
		return frame{}, &badFrame{pos: pos, reason: reason}, nil
	}
	fr := frame{hdr: hdr, pos: pos}
	if fr.end() > r.size {
		return frame{}, &badFrame{pos: pos, torn: true, reason: "frame extends past end of segment", end: fr.end()}, nil
	}
	return fr, nil, nil
}

// verify reads fr's payload into fr.payload and checks its checksum and record structure.
func (r *frameReader) verify(fr *frame) (*badFrame, error) {
	fb, err := r.window(fr.pos, frameHeaderSize+int(fr.hdr.length))
	if err != nil {
		return nil, err
	}
	fr.payload = fb[frameHeaderSize:]
	if crc(fr.payload) != fr.hdr.payloadCRC {
		return &badFrame{pos: fr.pos, torn: true, reason: "frame payload checksum mismatch", end: fr.end()}, nil
	}
	if reason := checkPayload(fr.payload, fr.hdr.count, r.maxRecordBytes); reason != "" {
		return &badFrame{pos: fr.pos, reason: reason}, nil
	}
	return nil, nil
}

// frameAfter reports whether anything from pos on is, or may be, a frame a writer completed:
// a frame that verifies, or one whose checksums hold but whose content is unacceptable. It
// decides between a torn tail (nothing follows the damage) and corruption (acknowledged data
// follows). The bytes inside a damaged frame are a client's record bytes and may contain
// anything, frame headers included: the caller starts past them when the damaged frame's header
// says where it ends, and when it does not, passes where the damaged frame starts (damaged, nil
// for none), to skip intact headers whose base offset no frame written after it can have. It
// scans the buffered bytes for the frame magic, so it is linear in the file size.
func (r *frameReader) frameAfter(pos int64, damaged *damagedFrame) (bool, error) {
	var magic [4]byte
	binary.LittleEndian.PutUint32(magic[:], frameMagic)
	for pos+frameHeaderSize <= r.size {
		if _, err := r.window(pos, frameHeaderSize); err != nil {
			return false, err
		}
		w := r.buf[pos-r.bufPos : r.bufLen]
		i := bytes.Index(w, magic[:])
		if i < 0 {
			pos += int64(len(w) - len(magic) + 1)
			continue
		}
		cand := pos + int64(i)
		if damaged != nil && !r.follows(cand, *damaged) {
			pos = cand + 1
			continue
		}
		_, bad, err := r.next(cand)
		if err != nil {
			return false, err
		}
		if bad == nil || !bad.torn {
			return true, nil
		}
		pos = cand + 1
	}
	return false, nil
}

// damagedFrame is where a damaged frame starts: its byte position and the log offset there.
type damagedFrame struct{ pos, next int64 }

// follows reports whether the bytes at cand may be the header of a frame written after the
// damaged frame d: a header that does not decode may be one that got damaged too; an intact one
// must start past d's first record, and not further than d's bytes up to cand, less its header,
// can hold records (a length prefix each).
func (r *frameReader) follows(cand int64, d damagedFrame) bool {
	hb, err := r.window(cand, frameHeaderSize)
	if err != nil {
		return true
	}
	h, ok := decodeFrameHeader(hb)
	if !ok {
		return true
	}
	return h.base > d.next && h.base-d.next <= (cand-d.pos-frameHeaderSize)/recordPrefixSize
}

// records calls fn for every record of a verified payload holding count records, skipping
// those before from; base is the offset of the first record. Its own bounds checks are a
// second line of defence: a payload that does not fit (impossible after verify) is reported
// as errMalformed instead of panicking. Record slices are capped so that an append by fn
// cannot overwrite the buffer.
func records(payload []byte, count uint32, base, from int64, fn func(offset int64, record []byte) error) error {
	p := payload
	for i := range int64(count) {
		if len(p) < recordPrefixSize {
			return errMalformed
		}
		n := int(binary.LittleEndian.Uint32(p))
		p = p[recordPrefixSize:]
		if n > len(p) {
			return errMalformed
		}
		if base+i >= from {
			if err := fn(base+i, p[:n:n]); err != nil {
				return callbackError{err}
			}
		}
		p = p[n:]
	}
	if len(p) != 0 {
		return errMalformed
	}
	return nil
}

// errMalformed reports a checksummed payload whose records do not fit it.
var errMalformed = errors.New("malformed records in a checksummed frame")
