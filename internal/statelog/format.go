package statelog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The constants below are part of the on-disk format (see the package documentation).
// Changing any of them makes existing logs unreadable.
const (
	segmentMagic  uint32 = 0x47534443 // "CDSG" in file byte order
	frameMagic    uint32 = 0x46424443 // "CDBF"
	startMagic    uint32 = 0x4f534443 // "CDSO"
	cleanMagic    uint32 = 0x45434443 // "CDCE"
	formatVersion uint16 = 1

	segmentHeaderSize = 32
	frameHeaderSize   = 28
	recordPrefixSize  = 4
	startFileSize     = 20

	segmentSuffix = ".seg"
	startFileName = "start-offset"
	startTmpName  = "start-offset.tmp"
	cleanFileName = "clean-end"
	cleanTmpName  = "clean-end.tmp"
	lockFileName  = "LOCK"
)

// FrameOverheadBytes and RecordOverheadBytes are what the log adds on disk to the records of an
// append: a frame header per Append and a length prefix per record (for tools that account for
// the log's growth; a new segment adds its SegmentHeaderBytes header too). A segment file no
// larger than SegmentHeaderBytes holds no record.
const (
	FrameOverheadBytes  = frameHeaderSize
	RecordOverheadBytes = recordPrefixSize
	SegmentHeaderBytes  = segmentHeaderSize
)

// MaxBatchBytes bounds the encoded payload of one batch (every record plus a 4-byte length
// prefix each). Append rejects larger batches with ErrBatchTooLarge; a frame on disk that
// claims more is rejected before any buffer is sized for it. It is part of the format.
const MaxBatchBytes = 1 << 30

// castagnoli is the CRC-32C table; hash/crc32 uses the CPU's CRC instructions for it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// segmentHeader is the fixed header at the start of every segment file:
//
//	0  magic       uint32
//	4  version     uint16
//	6  flags       uint16 (zero)
//	8  segment id  uint64
//	16 base offset uint64
//	24 reserved    uint32 (zero)
//	28 crc32c      uint32 over bytes 0..28
type segmentHeader struct {
	id   uint64
	base int64
}

func (h segmentHeader) encode(b []byte) {
	binary.LittleEndian.PutUint32(b[0:], segmentMagic)
	binary.LittleEndian.PutUint16(b[4:], formatVersion)
	binary.LittleEndian.PutUint16(b[6:], 0)
	binary.LittleEndian.PutUint64(b[8:], h.id)
	binary.LittleEndian.PutUint64(b[16:], uint64(h.base))
	binary.LittleEndian.PutUint32(b[24:], 0)
	binary.LittleEndian.PutUint32(b[28:], crc(b[:28]))
}

// decodeSegmentHeader parses b (segmentHeaderSize bytes). intact reports whether the bytes
// are a header as written (magic and checksum match); reason is non-empty when the header is
// not usable, whether or not it is intact. unsupported reports an intact header of a later
// format version, or of this one with flags or a reserved field this release does not know: a
// newer release wrote it, and it is not damage.
func decodeSegmentHeader(b []byte) (h segmentHeader, intact bool, reason string, unsupported bool) {
	if binary.LittleEndian.Uint32(b[0:]) != segmentMagic {
		return h, false, "bad segment header magic", false
	}
	if binary.LittleEndian.Uint32(b[28:]) != crc(b[:28]) {
		return h, false, "segment header checksum mismatch", false
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != formatVersion {
		// Only a later version is a newer release's; no release wrote an earlier one.
		return h, true, fmt.Sprintf("segment format version %d, but this release reads version %d", v, formatVersion), v > formatVersion
	}
	if f, r := binary.LittleEndian.Uint16(b[6:]), binary.LittleEndian.Uint32(b[24:]); f != 0 || r != 0 {
		return h, true, fmt.Sprintf("segment header flags %#x and reserved field %#x, but this release knows neither", f, r), true
	}
	h.id = binary.LittleEndian.Uint64(b[8:])
	base := binary.LittleEndian.Uint64(b[16:])
	if base > maxOffset {
		return h, true, "segment base offset out of range", false
	}
	h.base = int64(base)
	return h, true, "", false
}

// maxOffset is the largest offset a log may reach.
const maxOffset = 1<<63 - 1

// frameHeader precedes the payload of every batch:
//
//	0  magic       uint32
//	4  count       uint32  records in the batch (at least one)
//	8  length      uint32  payload bytes
//	12 base offset uint64  offset of the first record
//	20 payload crc uint32  crc32c of the payload
//	24 header crc  uint32  crc32c of bytes 0..24
type frameHeader struct {
	count      uint32
	length     uint32
	base       int64
	payloadCRC uint32
}

func (h frameHeader) encode(b []byte) {
	binary.LittleEndian.PutUint32(b[0:], frameMagic)
	binary.LittleEndian.PutUint32(b[4:], h.count)
	binary.LittleEndian.PutUint32(b[8:], h.length)
	binary.LittleEndian.PutUint64(b[12:], uint64(h.base))
	binary.LittleEndian.PutUint32(b[20:], h.payloadCRC)
	binary.LittleEndian.PutUint32(b[24:], crc(b[:24]))
}

// decodeFrameHeader parses b (frameHeaderSize bytes) and reports whether it is intact.
func decodeFrameHeader(b []byte) (frameHeader, bool) {
	if binary.LittleEndian.Uint32(b[0:]) != frameMagic || binary.LittleEndian.Uint32(b[24:]) != crc(b[:24]) {
		return frameHeader{}, false
	}
	return frameHeader{
		count:      binary.LittleEndian.Uint32(b[4:]),
		length:     binary.LittleEndian.Uint32(b[8:]),
		base:       int64(binary.LittleEndian.Uint64(b[12:])),
		payloadCRC: binary.LittleEndian.Uint32(b[20:]),
	}, true
}

// check returns why an intact header cannot describe a batch this log accepts, or "".
// The bounds are checked before any buffer is sized for the payload.
func (h frameHeader) check(maxRecordBytes int) string {
	switch {
	case h.count == 0:
		return "frame holds no records"
	case h.base < 0 || h.base > maxOffset-int64(h.count):
		return "frame base offset out of range"
	case int64(h.length) < int64(h.count)*recordPrefixSize:
		return "frame payload too short for its record count"
	case h.length > MaxBatchBytes:
		return "frame payload exceeds MaxBatchBytes"
	case int64(h.length) > int64(h.count)*(recordPrefixSize+int64(maxRecordBytes)):
		return "frame payload exceeds count × MaxRecordBytes (raise MaxRecordBytes to read it)"
	}
	return ""
}

// checkPayload verifies the record structure of a checksummed payload: exactly count
// length-prefixed records, each at most maxRecordBytes, filling the payload.
func checkPayload(p []byte, count uint32, maxRecordBytes int) string {
	off := 0
	for range count {
		if len(p)-off < recordPrefixSize {
			return "record length prefix past end of payload"
		}
		n := int(binary.LittleEndian.Uint32(p[off:]))
		off += recordPrefixSize
		if n > maxRecordBytes {
			return "record exceeds MaxRecordBytes (raise MaxRecordBytes to read it)"
		}
		if n > len(p)-off {
			return "record past end of payload"
		}
		off += n
	}
	if off != len(p) {
		return "trailing bytes after the last record"
	}
	return ""
}

// An offset file holds one offset: the log-start offset (start-offset, magic "CDSO") or the end
// offset of a cleanly closed log (clean-end, magic "CDCE"):
//
//	0  magic   uint32
//	4  version uint16
//	6  flags   uint16 (zero)
//	8  offset  uint64
//	16 crc32c  uint32 over bytes 0..16
func encodeOffsetFile(b []byte, magic uint32, off int64) {
	binary.LittleEndian.PutUint32(b[0:], magic)
	binary.LittleEndian.PutUint16(b[4:], formatVersion)
	binary.LittleEndian.PutUint16(b[6:], 0)
	binary.LittleEndian.PutUint64(b[8:], uint64(off))
	binary.LittleEndian.PutUint32(b[16:], crc(b[:16]))
}

// decodeOffsetFile decodes an offset file with the given magic; what names the file in the
// reason it gives for one it cannot use. unsupported reports a file whose checksum holds but
// whose format version is later than this release's, or whose flags it does not know: a newer
// release wrote it.
func decodeOffsetFile(b []byte, magic uint32, what string) (off int64, reason string, unsupported bool) {
	switch {
	case len(b) != startFileSize:
		return 0, what + " has the wrong size", false
	case binary.LittleEndian.Uint32(b[0:]) != magic:
		return 0, "bad " + what + " magic", false
	case binary.LittleEndian.Uint32(b[16:]) != crc(b[:16]):
		return 0, what + " checksum mismatch", false
	}
	if v, f := binary.LittleEndian.Uint16(b[4:]), binary.LittleEndian.Uint16(b[6:]); v != formatVersion || f != 0 {
		return 0, fmt.Sprintf("%s format version %d, flags %#x, but this release reads version %d without flags",
			what, v, f, formatVersion), v >= formatVersion
	}
	u := binary.LittleEndian.Uint64(b[8:])
	if u > maxOffset {
		return 0, what + ": offset out of range", false
	}
	return int64(u), "", false
}
