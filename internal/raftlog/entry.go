package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The constants below are part of the format of the replicated entries and of the snapshots
// replicas send each other: changing them makes existing Raft logs unreadable.
const (
	entryVersion    = 1
	entryKindAppend = 1
	entryKindSeed   = 2
	entryHeaderSize = 1 + 1 + 2 + 8 + 8 + 8 + 4 // version, kind, reserved, expected end, proposer, sequence, count
)

// An entry is one batch of records proposed by a state partition's leader:
//
//	0  version          uint8 (1)
//	1  kind             uint8 (1: append, 2: seed)
//	2  reserved         uint16 (zero)
//	4  expected end     int64: the end offset of the log the leader built the records on
//	                    (seed: the log-start offset of the log the records start)
//	12 proposer         uint64: the leader's replica id
//	20 sequence         uint64: the proposal's number at that replica
//	28 count            uint32
//	32 count × (uint32 length | record bytes)
//
// Integers are little-endian. Every replica appends the records to its log only if its log ends
// at the expected end offset, so that records built on one state are never added to another:
// all replicas apply the same entries to logs that are alike, so they all decide the same.
//
// A seed entry starts a log that was never written, from another coordinatord's (cluster
// import): a replica whose log is empty and starts at offset 0 resets it to start at the
// entry's offset and appends the records from there; any other replica's log stays as it is.
// Its proposer is 0, no replica's id, so every replica's shard follows its records.
type entry struct {
	kind        uint8 // entryKindAppend (also when 0) or entryKindSeed
	expectedEnd int64
	proposer    uint64
	seq         uint64
	records     [][]byte // alias the encoded entry
}

var errBadEntry = errors.New("raftlog: malformed entry")

// appendEntry encodes e (records and all) to buf.
func appendEntry(buf []byte, e *entry) []byte {
	var h [entryHeaderSize]byte
	h[0], h[1] = entryVersion, e.kind
	if e.kind == 0 {
		h[1] = entryKindAppend
	}
	binary.LittleEndian.PutUint64(h[4:], uint64(e.expectedEnd))
	binary.LittleEndian.PutUint64(h[12:], e.proposer)
	binary.LittleEndian.PutUint64(h[20:], e.seq)
	binary.LittleEndian.PutUint32(h[28:], uint32(len(e.records)))
	buf = append(buf, h[:]...)
	for _, r := range e.records {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(r)))
		buf = append(buf, r...)
	}
	return buf
}

// entrySize is the encoded size of an entry holding records.
func entrySize(records [][]byte) int {
	n := entryHeaderSize
	for _, r := range records {
		n += 4 + len(r)
	}
	return n
}

// decodeEntry decodes b into e; e.records alias b, reusing e.records' backing array.
func decodeEntry(b []byte, e *entry) error {
	if len(b) < entryHeaderSize {
		return fmt.Errorf("%w: %d bytes, shorter than its header", errBadEntry, len(b))
	}
	if b[0] != entryVersion || (b[1] != entryKindAppend && b[1] != entryKindSeed) || binary.LittleEndian.Uint16(b[2:]) != 0 {
		return fmt.Errorf("%w: version %d, kind %d: written by a newer coordinatord?", errBadEntry, b[0], b[1])
	}
	e.kind = b[1]
	e.expectedEnd = int64(binary.LittleEndian.Uint64(b[4:]))
	e.proposer = binary.LittleEndian.Uint64(b[12:])
	e.seq = binary.LittleEndian.Uint64(b[20:])
	n := binary.LittleEndian.Uint32(b[28:])
	rest := b[entryHeaderSize:]
	if uint64(n) > uint64(len(rest))/4 {
		return fmt.Errorf("%w: %d records in %d bytes", errBadEntry, n, len(rest))
	}
	e.records = e.records[:0]
	for range n {
		if len(rest) < 4 {
			return fmt.Errorf("%w: truncated record length", errBadEntry)
		}
		size := binary.LittleEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(size) > uint64(len(rest)) {
			return fmt.Errorf("%w: record of %d bytes, %d left", errBadEntry, size, len(rest))
		}
		e.records = append(e.records, rest[:size:size])
		rest = rest[size:]
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d bytes after the last record", errBadEntry, len(rest))
	}
	return nil
}

// ImportEntry encodes an entry that copies records from another coordinatord's log, whose
// log-start offset is start, into a replicated one: records[0] is at offset at. With at equal
// to start it is a seed entry, which starts a log that was never written at that offset;
// otherwise it appends to a log that ends at at. Its proposer is no replica, so every replica's
// shard follows the records. The result of applying it says whether the records were appended
// (Appended); if not, the log is not where the entry expected it.
func ImportEntry(start, at int64, records [][]byte) []byte {
	e := &entry{kind: entryKindAppend, expectedEnd: at, records: records}
	if at == start {
		e.kind = entryKindSeed
	}
	return appendEntry(make([]byte, 0, entrySize(records)), e)
}

// Appended reports whether the result of an applied entry says its records were appended.
func Appended(result uint64) bool { return result == resultAppended }
