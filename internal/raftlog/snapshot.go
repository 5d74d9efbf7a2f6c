package raftlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/statelog"
)

// A snapshot is a replica's log as one replica sends it to another (part of the format):
//
//	header  magic "CDRS" uint32 | version uint16 | flags uint16 (zero) | applied index uint64 |
//	        log-start offset int64 | end offset int64 | crc32c uint32 over the 32 bytes before it
//	chunk   count uint32 | length uint32 | crc32c uint32 of the payload |
//	        payload: count × (uint32 length | record bytes), the next records in offset order
//	end     a chunk with count 0 and length 0
//
// Integers are little-endian. The records run from the log-start offset to the end offset.
const (
	snapshotMagic      = 0x53524443 // "CDRS"
	snapshotVersion    = 1
	snapshotHeaderSize = 36
	chunkHeaderSize    = 12
	chunkBytes         = 1 << 20
)

// writeSnapshot writes snap, holding the records of the entries up to index, to w.
func writeSnapshot(w io.Writer, snap *statelog.Snapshot, index uint64, stopc <-chan struct{}) error {
	bw := bufio.NewWriterSize(w, chunkBytes+chunkHeaderSize)
	var h [snapshotHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], snapshotMagic)
	binary.LittleEndian.PutUint16(h[4:], snapshotVersion)
	binary.LittleEndian.PutUint64(h[8:], index)
	binary.LittleEndian.PutUint64(h[16:], uint64(snap.StartOffset()))
	binary.LittleEndian.PutUint64(h[24:], uint64(snap.EndOffset()))
	binary.LittleEndian.PutUint32(h[32:], crc32.Checksum(h[:32], castagnoli))
	if _, err := bw.Write(h[:]); err != nil {
		return err
	}
	payload := make([]byte, 0, chunkBytes)
	count := 0
	flush := func() error {
		var ch [chunkHeaderSize]byte
		binary.LittleEndian.PutUint32(ch[0:], uint32(count))
		binary.LittleEndian.PutUint32(ch[4:], uint32(len(payload)))
		binary.LittleEndian.PutUint32(ch[8:], crc32.Checksum(payload, castagnoli))
		if _, err := bw.Write(ch[:]); err != nil {
			return err
		}
		if _, err := bw.Write(payload); err != nil {
			return err
		}
		payload, count = payload[:0], 0
		return nil
	}
	err := snap.Replay(snap.StartOffset(), func(_ int64, r []byte) error {
		if count > 0 && len(payload)+4+len(r) > chunkBytes {
			select {
			case <-stopc:
				return sm.ErrSnapshotStopped
			default:
			}
			if err := flush(); err != nil {
				return err
			}
		}
		payload = binary.LittleEndian.AppendUint32(payload, uint32(len(r)))
		payload = append(payload, r...)
		count++
		return nil
	})
	if err != nil {
		return err
	}
	if count > 0 {
		if err := flush(); err != nil {
			return err
		}
	}
	if err := flush(); err != nil { // the end chunk
		return err
	}
	return bw.Flush()
}

// readSnapshot resets the log in dir to the snapshot's log-start offset, appends its records
// and returns the log, open, with what it was applied up to. On error the log may be left
// partly filled (the caller's recovering marker says so); it is returned, open, if it was
// opened.
func readSnapshot(logger *zap.Logger, r io.Reader, dir string, opts statelog.Options, stopc <-chan struct{}) (appliedState, *statelog.Log, error) {
	br := bufio.NewReaderSize(r, chunkBytes+chunkHeaderSize)
	var h [snapshotHeaderSize]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return appliedState{}, nil, fmt.Errorf("raftlog: read the snapshot header: %w", err)
	}
	switch {
	case binary.LittleEndian.Uint32(h[0:]) != snapshotMagic || binary.LittleEndian.Uint32(h[32:]) != crc32.Checksum(h[:32], castagnoli):
		return appliedState{}, nil, errors.New("raftlog: the snapshot header is damaged")
	case binary.LittleEndian.Uint16(h[4:]) != snapshotVersion || binary.LittleEndian.Uint16(h[6:]) != 0:
		return appliedState{}, nil, fmt.Errorf("raftlog: snapshot format version %d: sent by a newer coordinatord", binary.LittleEndian.Uint16(h[4:]))
	}
	index := binary.LittleEndian.Uint64(h[8:])
	start, end := int64(binary.LittleEndian.Uint64(h[16:])), int64(binary.LittleEndian.Uint64(h[24:]))
	if start < 0 || end < start {
		return appliedState{}, nil, fmt.Errorf("raftlog: the snapshot holds offsets [%d, %d)", start, end)
	}
	if err := statelog.Reset(logger, dir, opts, start); err != nil {
		return appliedState{}, nil, err
	}
	l, err := statelog.Open(logger, dir, opts)
	if err != nil {
		return appliedState{}, nil, err
	}
	var payload []byte
	var records [][]byte
	for {
		select {
		case <-stopc:
			return appliedState{}, l, sm.ErrSnapshotStopped
		default:
		}
		var ch [chunkHeaderSize]byte
		if _, err := io.ReadFull(br, ch[:]); err != nil {
			return appliedState{}, l, fmt.Errorf("raftlog: read a snapshot chunk: %w", err)
		}
		count, length := binary.LittleEndian.Uint32(ch[0:]), binary.LittleEndian.Uint32(ch[4:])
		if count == 0 && length == 0 {
			break
		}
		if length > chunkBytes+statelog.DefaultMaxRecordBytes+4 {
			return appliedState{}, l, fmt.Errorf("raftlog: a snapshot chunk of %d bytes", length)
		}
		payload = append(payload[:0], make([]byte, length)...)
		if _, err := io.ReadFull(br, payload); err != nil {
			return appliedState{}, l, fmt.Errorf("raftlog: read a snapshot chunk: %w", err)
		}
		if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(ch[8:]) {
			return appliedState{}, l, errors.New("raftlog: a snapshot chunk is damaged")
		}
		records = records[:0]
		rest := payload
		for range count {
			if len(rest) < 4 || uint64(binary.LittleEndian.Uint32(rest)) > uint64(len(rest)-4) {
				return appliedState{}, l, errors.New("raftlog: a snapshot chunk is malformed")
			}
			n := binary.LittleEndian.Uint32(rest)
			records = append(records, rest[4:4+n])
			rest = rest[4+n:]
		}
		if len(rest) != 0 {
			return appliedState{}, l, errors.New("raftlog: a snapshot chunk is malformed")
		}
		if _, err := l.Append(records); err != nil {
			return appliedState{}, l, fmt.Errorf("raftlog: append the records of a snapshot: %w", err)
		}
	}
	if l.EndOffset() != end {
		return appliedState{}, l, fmt.Errorf("raftlog: the snapshot's records end at offset %d, its header says %d", l.EndOffset(), end)
	}
	return appliedState{index: index, end: end}, l, nil
}
