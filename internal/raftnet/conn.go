package raftnet

import (
	"net"
	"sync"
	"time"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// peerConn is a connection to a peer that writes frames: a snapshot connection's, or, once
// dialed, a stream's.
type peerConn struct {
	conn        net.Conn
	sendTimeout time.Duration

	mu  sync.Mutex // serializes writes; guards buf
	buf []byte     // header and payload of the frame being written
}

// marshaler is what raftpb's messages offer for marshalling into a buffer.
type marshaler interface {
	Size() int
	MarshalTo([]byte) (int, error)
}

// send writes m as one frame, within the send timeout.
func (c *peerConn) send(m marshaler) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	frame, err := marshalFrame(c.buf, m)
	if err != nil {
		return err
	}
	c.buf = frame[:0]
	if err := c.conn.SetWriteDeadline(time.Now().Add(sizedTimeout(c.sendTimeout, len(frame)))); err != nil {
		return err
	}
	_, err = c.conn.Write(frame)
	if cap(c.buf) > eagerBytes {
		c.buf = nil // do not keep a snapshot chunk's or a large batch's buffer
	}
	return err
}

// marshalFrame returns m as a frame, header and payload, in buf if it has room.
func marshalFrame(buf []byte, m marshaler) ([]byte, error) {
	size := m.Size()
	if need := frameHeaderSize + size; cap(buf) < need {
		buf = make([]byte, need)
	}
	frame := buf[:frameHeaderSize+size]
	n, err := m.MarshalTo(frame[frameHeaderSize:])
	if err != nil {
		return nil, err
	}
	frame = frame[:frameHeaderSize+n]
	putHeader(frame[:frameHeaderSize], frame[frameHeaderSize:])
	return frame, nil
}

func (c *peerConn) close() { _ = c.conn.Close() }

// snapshotConn carries snapshot chunks (raftio.ISnapshotConnection).
type snapshotConn struct{ *peerConn }

// Close implements raftio.ISnapshotConnection.
func (c *snapshotConn) Close() { c.close() }

// SendChunk implements raftio.ISnapshotConnection.
func (c *snapshotConn) SendChunk(chunk pb.Chunk) error { return c.send(&chunk) }
