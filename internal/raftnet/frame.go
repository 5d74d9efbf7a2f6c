package raftnet

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"
)

// MaxFrameBytes bounds one frame's payload: dragonboat's largest message batch (64 MiB) and
// room for its framing.
const MaxFrameBytes = 64<<20 + 1<<20

const (
	prefaceSize     = 8
	frameHeaderSize = 8
	protocolVersion = 1
	// eagerBytes is the largest payload read into a buffer of its announced size at once; a
	// larger one grows its buffer as its bytes arrive.
	eagerBytes = 256 << 10
	// readBufferBytes is the read buffer of a connection: a frame's header and payload, and
	// the frames that arrived with them, come in one read call instead of two per frame.
	readBufferBytes = 64 << 10
)

// Connection kinds, the last byte of the preface.
const (
	kindMessages byte = 1
	kindSnapshot byte = 2
)

var (
	prefaceMagic = [6]byte{'C', 'D', 'R', 'A', 'F', 'T'}
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
)

// errBadFrame is a frame or preface that does not follow the protocol.
var errBadFrame = errors.New("raftnet: bad frame")

// preface returns the preface of a connection of kind.
func preface(kind byte) [prefaceSize]byte {
	var p [prefaceSize]byte
	copy(p[:], prefaceMagic[:])
	p[6] = protocolVersion
	p[7] = kind
	return p
}

// readPreface reads a preface and returns the connection's kind.
func readPreface(r io.Reader) (byte, error) {
	var p [prefaceSize]byte
	if _, err := io.ReadFull(r, p[:]); err != nil {
		return 0, err
	}
	if !bytes.Equal(p[:6], prefaceMagic[:]) {
		return 0, fmt.Errorf("%w: not a coordinatord replication connection", errBadFrame)
	}
	if p[6] != protocolVersion {
		return 0, fmt.Errorf("%w: protocol version %d, this node speaks %d", errBadFrame, p[6], protocolVersion)
	}
	if p[7] != kindMessages && p[7] != kindSnapshot {
		return 0, fmt.Errorf("%w: unknown connection kind %d", errBadFrame, p[7])
	}
	return p[7], nil
}

// sizedTimeout is how long n bytes may take to cross a connection: timeout, and as much again per
// 4 MiB of them.
func sizedTimeout(timeout time.Duration, n int) time.Duration {
	return timeout * time.Duration(1+n/(4<<20))
}

// putHeader writes the header of payload into h.
func putHeader(h []byte, payload []byte) {
	binary.BigEndian.PutUint32(h[0:4], uint32(len(payload)))
	binary.BigEndian.PutUint32(h[4:8], crc32.Checksum(payload, castagnoli))
}

// frameReader reads frames from one connection, through a buffer of readBufferBytes, reusing
// its payload buffer for payloads up to eagerBytes.
type frameReader struct {
	r      io.Reader
	header [frameHeaderSize]byte
	buf    []byte
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, readBufferBytes)}
}

// readHeader reads the next header and returns the payload's length and checksum.
func (f *frameReader) readHeader() (int, uint32, error) {
	if _, err := io.ReadFull(f.r, f.header[:]); err != nil {
		return 0, 0, err
	}
	n := binary.BigEndian.Uint32(f.header[0:4])
	if n > MaxFrameBytes {
		return 0, 0, fmt.Errorf("%w: a payload of %d bytes, at most %d allowed", errBadFrame, n, MaxFrameBytes)
	}
	return int(n), binary.BigEndian.Uint32(f.header[4:8]), nil
}

// readPayload reads a payload of n bytes and checks it against sum. The slice returned is valid
// until the next call.
func (f *frameReader) readPayload(n int, sum uint32) ([]byte, error) {
	var p []byte
	if n <= eagerBytes {
		if cap(f.buf) < n {
			f.buf = make([]byte, n)
		}
		p = f.buf[:n]
		if _, err := io.ReadFull(f.r, p); err != nil {
			return nil, err
		}
	} else {
		var b bytes.Buffer
		if _, err := io.CopyN(&b, f.r, int64(n)); err != nil {
			return nil, err
		}
		p = b.Bytes()
	}
	if crc32.Checksum(p, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch in a payload of %d bytes", errBadFrame, n)
	}
	return p, nil
}
