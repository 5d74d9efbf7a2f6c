package raftnet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/semaphore"

	"github.com/coordinatord/coordinatord/internal/connlimit"
	"github.com/coordinatord/coordinatord/internal/tlsconfig"
)

// Name is the transport's name, as dragonboat logs it.
const Name = "coordinatord-raftnet"

// Defaults of the Options' timeouts.
const (
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultIdleTimeout      = 10 * time.Minute
	DefaultSendTimeout      = 10 * time.Second
	// DefaultMaxPendingBytes bounds the bytes of messages being read from every peer at once.
	DefaultMaxPendingBytes = 256 << 20
	dialTimeout            = 5 * time.Second
)

// Options configure a Factory. The zero value is a plaintext transport with no connection bounds
// and the default timeouts.
type Options struct {
	// Limits bound the replication port's connections; Metrics, when not nil, counts them under
	// the listener label "raft".
	Limits  connlimit.Limits
	Metrics *connlimit.Metrics
	// TLS, when not nil, makes every connection mutual TLS over its certificate and CA (the CA
	// that signs every node's certificate). MinTLSVersion is the oldest version accepted (0: TLS 1.2).
	TLS           *tlsconfig.Store
	MinTLSVersion uint16
	// HandshakeTimeout bounds a new connection's TLS handshake and preface; IdleTimeout closes
	// a connection that sends nothing for that long; SendTimeout bounds each write to a peer
	// (and, per 4 MiB of it, the arrival of a message announced).
	HandshakeTimeout, IdleTimeout, SendTimeout time.Duration
	// MaxPendingBytes bounds the bytes of the messages being read from all connections at once
	// (at least MaxFrameBytes; 0: DefaultMaxPendingBytes): a message waits for room, within the
	// time it has to arrive, or its connection is closed.
	MaxPendingBytes int64
	// Logger receives the transport's warnings (nil: none).
	Logger *zap.Logger
}

func (o Options) withDefaults() Options {
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = DefaultSendTimeout
	}
	if o.MaxPendingBytes <= 0 {
		o.MaxPendingBytes = DefaultMaxPendingBytes
	}
	o.MaxPendingBytes = max(o.MaxPendingBytes, MaxFrameBytes)
	if o.MinTLSVersion == 0 {
		o.MinTLSVersion = tls.VersionTLS12
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}

// Factory creates the transport of a dragonboat NodeHost (NodeHostConfig.Expert.TransportFactory).
// A Factory serves one NodeHost: LastContact reads the transport it created.
type Factory struct {
	opts Options

	mu      sync.Mutex
	created *Transport
}

// NewFactory returns a Factory of transports configured by o.
func NewFactory(o Options) *Factory { return &Factory{opts: o.withDefaults()} }

// Create implements config.TransportFactory.
func (f *Factory) Create(nhc config.NodeHostConfig, messages raftio.MessageHandler, chunks raftio.ChunkHandler) raftio.ITransport {
	t := &Transport{
		opts:     f.opts,
		address:  nhc.GetListenAddress(),
		messages: messages,
		chunks:   chunks,
		warn: f.opts.Logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return zapcore.NewSamplerWithOptions(c, 10*time.Second, 1, 0)
		})),
		stop:    make(chan struct{}),
		pending: semaphore.NewWeighted(f.opts.MaxPendingBytes),
	}
	t.closing, t.cancel = context.WithCancel(context.Background())
	if f.opts.TLS != nil {
		t.server = f.opts.TLS.ServerConfig(tls.RequireAndVerifyClientCert, f.opts.MinTLSVersion)
	}
	f.mu.Lock()
	f.created = t
	f.mu.Unlock()
	return t
}

// LastContact is the LastContact of the transport created last (false before Create).
func (f *Factory) LastContact(addr string) (time.Time, bool) {
	f.mu.Lock()
	t := f.created
	f.mu.Unlock()
	if t == nil {
		return time.Time{}, false
	}
	return t.LastContact(addr)
}

// Validate implements config.TransportFactory: a replication address is HOST:PORT.
func (f *Factory) Validate(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	return err == nil && host != "" && port != ""
}

// Transport is one node's replication transport: the listening port and the connections to
// peers. dragonboat calls its methods.
type Transport struct {
	opts     Options
	address  string
	messages raftio.MessageHandler
	chunks   raftio.ChunkHandler
	warn     *zap.Logger         // sampled: once per 10 s per message
	server   *tls.Config         // nil without TLS
	pending  *semaphore.Weighted // bytes of the messages being read (Options.MaxPendingBytes)

	contactMu sync.Mutex
	contact   map[string]time.Time // by source address: when its last message batch arrived

	mu       sync.Mutex
	listener *connlimit.Listener
	conns    map[net.Conn]struct{} // accepted, open
	closed   bool

	streamsMu sync.Mutex
	streams   map[string]*stream // by target: the connection for Raft messages to it

	stop    chan struct{}
	closing context.Context // ends with Close
	cancel  context.CancelFunc
	workers sync.WaitGroup
}

var _ raftio.ITransport = (*Transport)(nil)

// Name implements raftio.ITransport.
func (t *Transport) Name() string { return Name }

// Start listens on the node's replication address and serves the peers that connect.
func (t *Transport) Start() error {
	inner, err := net.Listen("tcp", t.address)
	if err != nil {
		return fmt.Errorf("raftnet: listen on %s: %w", t.address, err)
	}
	l := connlimit.New(inner, "raft", t.opts.Limits, t.opts.Metrics, t.opts.Logger)
	t.mu.Lock()
	t.listener, t.conns = l, map[net.Conn]struct{}{}
	t.mu.Unlock()
	t.workers.Go(func() { t.accept(l) })
	return nil
}

// Addr returns the address the port listens on (nil before Start).
func (t *Transport) Addr() net.Addr {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.listener == nil {
		return nil
	}
	return t.listener.Addr()
}

// Close stops listening, closes every accepted connection and every stream to a peer, and waits
// for the accepted connections' goroutines.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.stop)
	t.cancel()
	if t.listener != nil {
		_ = t.listener.Close()
	}
	for c := range t.conns {
		_ = c.Close()
	}
	t.mu.Unlock()
	t.streamsMu.Lock()
	for _, s := range t.streams {
		_ = s.conn.Close()
	}
	t.streamsMu.Unlock()
	t.workers.Wait()
	return nil
}

// accept serves the connections l accepts until the transport closes. An accept that fails for
// another reason (out of file descriptors, say) is retried after a pause, as net/http does, so
// that the port outlives a moment of exhaustion.
func (t *Transport) accept(l net.Listener) {
	var pause time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			t.warn.Warn("replication port: accept failed; retrying", zap.Error(err), zap.Duration("pause", pause))
			select {
			case <-t.stop:
				return
			case <-time.After(pause):
			}
			continue
		}
		pause = 0
		if !t.track(c) {
			_ = c.Close()
			return
		}
		t.workers.Go(func() {
			defer t.untrack(c)
			t.serve(c)
		})
	}
}

// track records an accepted connection, unless the transport is closing.
func (t *Transport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *Transport) untrack(c net.Conn) {
	_ = c.Close()
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

// serve reads one peer connection until it ends, handing what it carries to dragonboat.
func (t *Transport) serve(raw net.Conn) {
	c, kind, err := t.handshake(raw)
	if err != nil {
		t.warn.Warn("replication port: refused a connection (further refusals within 10 s are not logged)",
			zap.String("peer.address", raw.RemoteAddr().String()), zap.Error(err))
		return
	}
	fr := newFrameReader(c)
	for {
		if err := c.SetReadDeadline(time.Now().Add(t.opts.IdleTimeout)); err != nil {
			return
		}
		n, sum, err := fr.readHeader()
		if err != nil {
			t.logReadError(raw, err)
			return
		}
		if !t.readAndDeliver(raw, c, fr, kind, n, sum) {
			return
		}
	}
}

// readAndDeliver reads a payload of n bytes, once there is room for it among the messages being
// read, and hands it to dragonboat; it reports whether the connection goes on.
func (t *Transport) readAndDeliver(raw, c net.Conn, fr *frameReader, kind byte, n int, sum uint32) bool {
	timeout := t.bodyTimeout(n)
	deadline := time.Now().Add(timeout)
	if err := t.reserve(int64(n), timeout); err != nil {
		t.warn.Warn("replication port: no room for a message in time (other peers' messages fill the bound); closing its connection",
			zap.String("peer.address", raw.RemoteAddr().String()), zap.Int("bytes", n), zap.Error(err))
		return false
	}
	defer t.pending.Release(int64(n))
	if err := c.SetReadDeadline(deadline); err != nil {
		return false
	}
	payload, err := fr.readPayload(n, sum)
	if err != nil {
		t.logReadError(raw, err)
		return false
	}
	return t.deliver(kind, payload)
}

// reserve waits at most timeout, or until the transport closes, for room for n bytes.
func (t *Transport) reserve(n int64, timeout time.Duration) error {
	if t.pending.TryAcquire(n) {
		return nil
	}
	ctx, cancel := context.WithTimeout(t.closing, timeout)
	defer cancel()
	return t.pending.Acquire(ctx, n)
}

// handshake runs the TLS handshake, when TLS is on, and reads the preface, within the handshake
// timeout.
func (t *Transport) handshake(raw net.Conn) (net.Conn, byte, error) {
	c := raw
	if err := c.SetDeadline(time.Now().Add(t.opts.HandshakeTimeout)); err != nil {
		return nil, 0, err
	}
	if t.server != nil {
		tc := tls.Server(raw, t.server)
		if err := tc.Handshake(); err != nil {
			return nil, 0, fmt.Errorf("TLS handshake: %w", err)
		}
		c = tc
	}
	kind, err := readPreface(c)
	if err != nil {
		return nil, 0, fmt.Errorf("preface: %w", err)
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return nil, 0, err
	}
	return c, kind, nil
}

// bodyTimeout is how long a payload of n bytes may take to arrive.
func (t *Transport) bodyTimeout(n int) time.Duration {
	return sizedTimeout(t.opts.SendTimeout, n)
}

// deliver hands one payload to dragonboat and reports whether the connection goes on.
func (t *Transport) deliver(kind byte, payload []byte) bool {
	if kind == kindMessages {
		var batch pb.MessageBatch
		if err := batch.Unmarshal(payload); err != nil {
			t.warn.Warn("replication port: a message batch that does not decode; closing its connection", zap.Error(err))
			return false
		}
		t.contacted(batch.SourceAddress)
		t.messages(batch)
		return true
	}
	var chunk pb.Chunk
	if err := chunk.Unmarshal(payload); err != nil {
		t.warn.Warn("replication port: a snapshot chunk that does not decode; closing its connection", zap.Error(err))
		return false
	}
	return t.chunks(chunk)
}

// maxContacts bounds the source addresses whose last contact a Transport remembers: a cluster
// has a few nodes, and a plaintext port may hear any address.
const maxContacts = 256

// contacted records that a message batch from addr arrived now.
func (t *Transport) contacted(addr string) {
	now := time.Now()
	t.contactMu.Lock()
	defer t.contactMu.Unlock()
	if t.contact == nil {
		t.contact = map[string]time.Time{}
	}
	if _, known := t.contact[addr]; known || len(t.contact) < maxContacts {
		t.contact[addr] = now
	}
}

// LastContact returns when a message batch from the node whose replication address is addr
// last arrived, if one has.
func (t *Transport) LastContact(addr string) (time.Time, bool) {
	t.contactMu.Lock()
	defer t.contactMu.Unlock()
	at, ok := t.contact[addr]
	return at, ok
}

// logReadError warns of a connection that ended other than by its peer closing it.
func (t *Transport) logReadError(raw net.Conn, err error) {
	var ne net.Error
	switch {
	case errors.Is(err, errBadFrame):
		t.warn.Warn("replication port: closed a connection that broke the protocol",
			zap.String("peer.address", raw.RemoteAddr().String()), zap.Error(err))
	case errors.As(err, &ne) && ne.Timeout():
		t.warn.Info("replication port: closed a connection that sent nothing, or not in time",
			zap.String("peer.address", raw.RemoteAddr().String()), zap.Error(err))
	}
}

// GetSnapshotConnection implements raftio.ITransport: a connection for snapshot chunks to target.
func (t *Transport) GetSnapshotConnection(ctx context.Context, target string) (raftio.ISnapshotConnection, error) {
	c, err := t.dial(ctx, target, kindSnapshot)
	if err != nil {
		return nil, err
	}
	return &snapshotConn{peerConn: c}, nil
}

// dial connects to target, runs the TLS handshake and sends the preface of kind.
func (t *Transport) dial(ctx context.Context, target string, kind byte) (*peerConn, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("raftnet: peer address %q: %w", target, err)
	}
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: 15 * time.Second}
	raw, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return nil, fmt.Errorf("raftnet: connect to %s: %w", target, err)
	}
	c := raw
	if err := c.SetDeadline(time.Now().Add(t.opts.HandshakeTimeout)); err != nil {
		_ = raw.Close()
		return nil, err
	}
	if t.opts.TLS != nil {
		tc := tls.Client(raw, t.opts.TLS.ClientConfig(host, t.opts.MinTLSVersion))
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, fmt.Errorf("raftnet: TLS handshake with %s: %w", target, err)
		}
		c = tc
	}
	p := preface(kind)
	if _, err := c.Write(p[:]); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("raftnet: send the preface to %s: %w", target, err)
	}
	return &peerConn{conn: c, sendTimeout: t.opts.SendTimeout}, nil
}
