package raftnet

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
	"go.uber.org/goleak"

	"github.com/coordinatord/coordinatord/internal/connlimit"
	"github.com/coordinatord/coordinatord/internal/testcert"
	"github.com/coordinatord/coordinatord/internal/tlsconfig"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// peer is a started Transport and what its handlers received.
type peer struct {
	t        *Transport
	batches  chan pb.MessageBatch
	chunks   chan pb.Chunk
	acceptCh bool // what the chunk handler answers
}

func startPeer(t *testing.T, o Options) *peer {
	t.Helper()
	p := &peer{batches: make(chan pb.MessageBatch, 16), chunks: make(chan pb.Chunk, 16), acceptCh: true}
	tr := NewFactory(o).Create(config.NodeHostConfig{RaftAddress: "127.0.0.1:0"},
		func(b pb.MessageBatch) { p.batches <- b },
		func(c pb.Chunk) bool { p.chunks <- c; return p.acceptCh })
	p.t = tr.(*Transport)
	if err := p.t.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.t.Close() })
	return p
}

func (p *peer) addr() string { return p.t.Addr().String() }

// connect opens a message connection from p to q, closed when the test ends.
func (p *peer) connect(t *testing.T, q *peer) raftio.IConnection {
	t.Helper()
	c, err := p.t.GetConnection(context.Background(), q.addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func batch(n int) pb.MessageBatch {
	b := pb.MessageBatch{DeploymentId: 7, SourceAddress: "127.0.0.1:1", BinVer: 210}
	for i := range n {
		b.Requests = append(b.Requests, pb.Message{ShardID: uint64(i), From: 1, To: 2, Type: pb.Replicate,
			Entries: []pb.Entry{{Index: uint64(i + 1), Term: 3, Cmd: make([]byte, 100+i)}}})
	}
	return b
}

func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("nothing received in 5 s")
		panic("unreachable")
	}
}

func nothingReceived[T any](t *testing.T, ch <-chan T, wait time.Duration) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("received %+v, want nothing", v)
	case <-time.After(wait):
	}
}

func TestMessagesAndChunksArriveWhole(t *testing.T) {
	a, b := startPeer(t, Options{}), startPeer(t, Options{})
	conn := a.connect(t, b)
	for _, n := range []int{1, 50, 3000} { // the last one is larger than eagerBytes
		want := batch(n)
		if err := conn.SendMessageBatch(want); err != nil {
			t.Fatal(err)
		}
		got := receive(t, b.batches)
		if len(got.Requests) != n || got.DeploymentId != 7 || got.Requests[n-1].Entries[0].Index != uint64(n) ||
			len(got.Requests[n-1].Entries[0].Cmd) != 100+n-1 {
			t.Fatalf("batch of %d arrived as %d requests: %+v", n, len(got.Requests), got.Requests[len(got.Requests)-1])
		}
	}
	sc, err := a.t.GetSnapshotConnection(context.Background(), b.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	data := make([]byte, 2<<20)
	for i := range data {
		data[i] = byte(i)
	}
	if err := sc.SendChunk(pb.Chunk{ShardID: 4, ReplicaID: 2, ChunkId: 1, ChunkCount: 3, Data: data}); err != nil {
		t.Fatal(err)
	}
	got := receive(t, b.chunks)
	if got.ShardID != 4 || got.ChunkId != 1 || len(got.Data) != len(data) || got.Data[12345] != data[12345] {
		t.Fatalf("chunk arrived as shard %d chunk %d with %d bytes", got.ShardID, got.ChunkId, len(got.Data))
	}
}

func TestRejectedChunkClosesTheConnection(t *testing.T) {
	a, b := startPeer(t, Options{}), startPeer(t, Options{})
	b.acceptCh = false
	sc, err := a.t.GetSnapshotConnection(context.Background(), b.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if err := sc.SendChunk(pb.Chunk{ShardID: 1, Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	receive(t, b.chunks)
	waitClosed(t, sc.(*snapshotConn).conn)
}

// waitClosed waits until the server end of c is closed: a read on c ends.
func waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the connection is still open after 5 s")
	}
}

// tlsFixture is a peer CA with the files of two nodes' certificates, and a stranger's files.
type tlsFixture struct {
	ca              *testcert.CA
	node1, stranger tlsconfig.Settings
}

func newTLSFixture(t *testing.T) *tlsFixture {
	dir := t.TempDir()
	fx := &tlsFixture{ca: testcert.NewCA(t, "peer CA")}
	settings := func(name string, ca *testcert.CA) tlsconfig.Settings {
		s := tlsconfig.Settings{
			Cert: tlsconfig.File{Setting: "tls.cert.file", Path: filepath.Join(dir, name+".pem")},
			Key:  tlsconfig.File{Setting: "tls.key.file", Path: filepath.Join(dir, name+"-key.pem")},
			CA:   tlsconfig.File{Setting: "tls.peer.ca.file", Path: testcert.WriteCAFile(t, ca, dir, name+"-ca.pem")},
		}
		testcert.WriteKeyPair(t, ca.IssuePeer(t, pkix.Name{CommonName: name}), s.Cert.Path, s.Key.Path)
		return s
	}
	fx.node1 = settings("node1", fx.ca)
	fx.stranger = settings("stranger", testcert.NewCA(t, "another CA"))
	return fx
}

func store(t *testing.T, s tlsconfig.Settings) *tlsconfig.Store {
	t.Helper()
	st, err := tlsconfig.NewStore(nil, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestMutualTLSAdmitsOnlyPeersOfTheCA(t *testing.T) {
	fx := newTLSFixture(t)
	nodeStore := store(t, fx.node1)
	a, b := startPeer(t, Options{TLS: nodeStore}), startPeer(t, Options{TLS: nodeStore})
	conn := a.connect(t, b)
	if err := conn.SendMessageBatch(batch(1)); err != nil {
		t.Fatal(err)
	}
	receive(t, b.batches)
	conn.Close()

	t.Run("a node of another CA", func(t *testing.T) {
		stranger := startPeer(t, Options{TLS: store(t, fx.stranger)})
		if c, err := stranger.t.GetConnection(context.Background(), b.addr()); err == nil {
			_ = c.SendMessageBatch(batch(1))
			c.Close()
			t.Error("a node with a certificate of another CA connected")
		}
		nothingReceived(t, b.batches, 300*time.Millisecond)
		if _, err := b.t.GetConnection(context.Background(), stranger.addr()); err == nil {
			t.Error("connected to a node whose certificate another CA signed")
		}
	})
	t.Run("no certificate", func(t *testing.T) {
		raw, err := tls.Dial("tcp", b.addr(), &tls.Config{RootCAs: fx.ca.Pool, ServerName: "127.0.0.1"})
		if err == nil {
			p := preface(kindMessages)
			_, err = raw.Write(p[:])
			if err == nil {
				_, err = raw.Read(make([]byte, 1))
			}
			raw.Close()
		}
		if err == nil {
			t.Fatal("a client without a certificate held a connection")
		}
		nothingReceived(t, b.batches, 300*time.Millisecond)
	})
	t.Run("plaintext", func(t *testing.T) {
		plain := startPeer(t, Options{})
		if c, err := plain.t.GetConnection(context.Background(), b.addr()); err == nil {
			_ = c.SendMessageBatch(batch(1))
			c.Close()
		}
		nothingReceived(t, b.batches, 300*time.Millisecond)
	})
}

func TestSilentAndBrokenConnectionsAreClosed(t *testing.T) {
	b := startPeer(t, Options{HandshakeTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond,
		SendTimeout: 200 * time.Millisecond})
	dial := func(t *testing.T) net.Conn {
		c, err := net.Dial("tcp", b.addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	write := func(t *testing.T, c net.Conn, p []byte) {
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	pre := preface(kindMessages)
	t.Run("no preface", func(t *testing.T) { waitClosedWithin(t, dial(t), time.Second) })
	t.Run("idle after the preface", func(t *testing.T) {
		c := dial(t)
		write(t, c, pre[:])
		waitClosedWithin(t, c, 2*time.Second)
	})
	t.Run("a message that does not arrive", func(t *testing.T) {
		c := dial(t)
		write(t, c, pre[:])
		var h [frameHeaderSize]byte
		binary.BigEndian.PutUint32(h[:4], 1<<20)
		write(t, c, h[:])
		write(t, c, make([]byte, 10))
		waitClosedWithin(t, c, 2*time.Second)
	})
	t.Run("too large", func(t *testing.T) {
		c := dial(t)
		write(t, c, pre[:])
		var h [frameHeaderSize]byte
		binary.BigEndian.PutUint32(h[:4], MaxFrameBytes+1)
		write(t, c, h[:])
		waitClosedWithin(t, c, time.Second)
	})
	t.Run("bad checksum", func(t *testing.T) {
		c := dial(t)
		write(t, c, pre[:])
		payload, _ := func() ([]byte, error) { m := batch(1); return m.Marshal() }()
		var h [frameHeaderSize]byte
		putHeader(h[:], payload)
		h[7] ^= 1
		write(t, c, append(h[:], payload...))
		waitClosedWithin(t, c, time.Second)
		nothingReceived(t, b.batches, 100*time.Millisecond)
	})
	t.Run("not the protocol", func(t *testing.T) {
		c := dial(t)
		write(t, c, []byte("GET / HTTP/1.1\r\n\r\n"))
		waitClosedWithin(t, c, time.Second)
	})
}

// waitClosedWithin checks that the server closes c within d.
func waitClosedWithin(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection is still open after %v", d)
	}
}

func TestConnectionBounds(t *testing.T) {
	m := connlimit.NewMetrics(nil)
	b := startPeer(t, Options{Limits: connlimit.Limits{MaxPerIP: 2, MaxPerIPKey: "max.connections.per.ip"}, Metrics: m})
	var open []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", b.addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		open = append(open, c)
	}
	third, err := net.Dial("tcp", b.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	waitClosedWithin(t, third, time.Second)
	// The two within the bound still serve.
	p := preface(kindMessages)
	if _, err := open[0].Write(p[:]); err != nil {
		t.Fatal(err)
	}
	payload, err := func() ([]byte, error) { m := batch(2); return m.Marshal() }()
	if err != nil {
		t.Fatal(err)
	}
	var h [frameHeaderSize]byte
	putHeader(h[:], payload)
	if _, err := open[0].Write(append(h[:], payload...)); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, b.batches); len(got.Requests) != 2 {
		t.Fatalf("%d requests, want 2", len(got.Requests))
	}
}

func TestCloseEndsEveryConnection(t *testing.T) {
	a, b := startPeer(t, Options{}), startPeer(t, Options{})
	conn := a.connect(t, b)
	if err := conn.SendMessageBatch(batch(1)); err != nil {
		t.Fatal(err)
	}
	receive(t, b.batches)
	if err := b.t.Close(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, conn.(*messageConn).s.conn)
	if _, err := net.Dial("tcp", b.addr()); err == nil {
		t.Fatal("the port still accepts connections after Close")
	}
}

func TestMessagesBeingReadAreBounded(t *testing.T) {
	b := startPeer(t, Options{MaxPendingBytes: MaxFrameBytes, SendTimeout: 100 * time.Millisecond})
	pre := preface(kindMessages)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", b.addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write(pre[:]); err != nil {
			t.Fatal(err)
		}
		return c
	}
	frame := func() []byte {
		m := batch(1)
		payload, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var h [frameHeaderSize]byte
		putHeader(h[:], payload)
		return append(h[:], payload...)
	}
	// A announces the largest message and sends a little of it: it holds the whole bound.
	hog := dial()
	var h [frameHeaderSize]byte
	binary.BigEndian.PutUint32(h[:4], MaxFrameBytes)
	if _, err := hog.Write(append(h[:], make([]byte, 10)...)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the hog's header is read and its room reserved
	// B's message finds no room within its time to arrive: its connection is closed.
	starved := dial()
	if _, err := starved.Write(frame()); err != nil {
		t.Fatal(err)
	}
	waitClosedWithin(t, starved, 2*time.Second)
	nothingReceived(t, b.batches, 10*time.Millisecond)
	// The hog's message does not arrive in time either; once it is closed there is room again.
	waitClosedWithin(t, hog, 5*time.Second)
	if _, err := dial().Write(frame()); err != nil {
		t.Fatal(err)
	}
	receive(t, b.batches)
}

// failingListener fails its first accepts, as a listener out of file descriptors does.
type failingListener struct {
	net.Listener
	failures int
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.failures > 0 {
		l.failures--
		return nil, errors.New("accept tcp: too many open files")
	}
	return l.Listener.Accept()
}

func TestAcceptOutlivesFailures(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{batches: make(chan pb.MessageBatch, 1), chunks: make(chan pb.Chunk, 1)}
	tr := NewFactory(Options{}).Create(config.NodeHostConfig{RaftAddress: "127.0.0.1:0"},
		func(b pb.MessageBatch) { p.batches <- b }, func(pb.Chunk) bool { return true }).(*Transport)
	tr.conns = map[net.Conn]struct{}{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.accept(&failingListener{Listener: inner, failures: 3})
	}()
	sender := startPeer(t, Options{})
	conn, err := sender.t.GetConnection(context.Background(), inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SendMessageBatch(batch(1)); err != nil {
		t.Fatal(err)
	}
	receive(t, p.batches)
	inner.Close()
	<-done // a closed listener ends the loop
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
}
