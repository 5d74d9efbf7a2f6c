package raftnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// stream is the one connection for Raft messages to a peer, shared by every message connection
// dragonboat opens to it (it opens several per peer, each for some of the Raft shards, so one
// step's messages to a peer go out on several of them). Frames queued while another write is under way are written
// together after it, in one write call, and each send returns once its own frame is written: a
// peer's batches of one step cost about one write and one read, not one per connection.
type stream struct {
	target      string
	conn        net.Conn
	sendTimeout time.Duration
	refs        int // message connections using it; guarded by the Transport's streamsMu

	mu      sync.Mutex
	cond    sync.Cond
	pending []byte // frames queued for the next write
	spare   []byte
	queued  uint64 // frames queued so far
	written uint64 // frames written so far
	writing bool
	err     error // the write that failed: the connection is closed
}

func newStream(target string, c *peerConn) *stream {
	s := &stream{target: target, conn: c.conn, sendTimeout: c.sendTimeout}
	s.cond.L = &s.mu
	return s
}

// send writes frame (header and payload) on the stream, with the frames queued with it, and
// returns once it is written or the stream failed.
func (s *stream) send(frame []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.pending = append(s.pending, frame...)
	s.queued++
	mine := s.queued
	for s.written < mine {
		switch {
		case s.err != nil:
			return s.err
		case s.writing:
			s.cond.Wait()
		default:
			s.writeLocked()
		}
	}
	return nil
}

// writeLocked writes every queued frame in one write call, with s.mu held on entry and exit
// (released meanwhile).
func (s *stream) writeLocked() {
	s.writing = true
	buf, upto := s.pending, s.queued
	s.pending, s.spare = s.spare[:0], nil
	s.mu.Unlock()
	err := s.conn.SetWriteDeadline(time.Now().Add(sizedTimeout(s.sendTimeout, len(buf))))
	if err == nil {
		_, err = s.conn.Write(buf)
	}
	s.mu.Lock()
	s.writing = false
	if err != nil {
		s.err = fmt.Errorf("raftnet: write to %s: %w", s.target, err)
		_ = s.conn.Close()
	} else {
		s.written = upto
	}
	if cap(buf) <= eagerBytes {
		s.spare = buf[:0]
	}
	s.cond.Broadcast()
}

// failed reports whether a write on the stream failed.
func (s *stream) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil
}

// messageConn is one of dragonboat's message connections to a peer (raftio.IConnection), sending
// on the peer's stream.
type messageConn struct {
	t     *Transport
	s     *stream
	buf   []byte // the frame being marshalled
	close sync.Once
}

// SendMessageBatch implements raftio.IConnection.
func (c *messageConn) SendMessageBatch(batch pb.MessageBatch) error {
	frame, err := marshalFrame(c.buf, &batch)
	if err != nil {
		return err
	}
	c.buf = frame[:0]
	if cap(c.buf) > eagerBytes {
		c.buf = nil // do not keep a large batch's buffer
	}
	return c.s.send(frame)
}

// Close implements raftio.IConnection: the stream closes with the last connection using it.
func (c *messageConn) Close() { c.close.Do(func() { c.t.release(c.s) }) }

// GetConnection implements raftio.ITransport: a connection for Raft messages to target, on the
// stream to target, which it dials if there is none or the one there failed.
func (t *Transport) GetConnection(ctx context.Context, target string) (raftio.IConnection, error) {
	if s := t.acquire(target, nil); s != nil {
		return &messageConn{t: t, s: s}, nil
	}
	c, err := t.dial(ctx, target, kindMessages)
	if err != nil {
		return nil, err
	}
	s := t.acquire(target, newStream(target, c))
	if s == nil {
		return nil, errTransportClosed
	}
	return &messageConn{t: t, s: s}, nil
}

// errTransportClosed is a connection asked for after Close.
var errTransportClosed = errors.New("raftnet: the transport is closed")

// acquire takes a reference to the working stream to target, if there is one; otherwise, with
// fresh not nil, fresh becomes the stream to target. A fresh stream not needed (another dial
// made one meanwhile, or the transport closed: nil) is closed.
func (t *Transport) acquire(target string, fresh *stream) *stream {
	t.streamsMu.Lock()
	defer t.streamsMu.Unlock()
	select {
	case <-t.stop: // Close closes the streams it finds after it closed stop
		if fresh != nil {
			_ = fresh.conn.Close()
		}
		return nil
	default:
	}
	if s := t.streams[target]; s != nil && !s.failed() {
		if fresh != nil {
			_ = fresh.conn.Close()
		}
		s.refs++
		return s
	}
	if fresh == nil {
		return nil
	}
	if t.streams == nil {
		t.streams = map[string]*stream{}
	}
	fresh.refs = 1
	t.streams[target] = fresh
	return fresh
}

// release drops a reference to s, closing it with the last one.
func (t *Transport) release(s *stream) {
	t.streamsMu.Lock()
	defer t.streamsMu.Unlock()
	s.refs--
	if s.refs > 0 {
		return
	}
	if t.streams[s.target] == s {
		delete(t.streams, s.target)
	}
	_ = s.conn.Close()
}
