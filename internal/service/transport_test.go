package service

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// startStubServer serves NewServer with opts on 127.0.0.1 over stub partitions and configs, and
// returns its address and a function that waits until Serve has returned. The server is stopped at
// cleanup.
func startStubServer(t *testing.T, opts ServerOptions) (*Server, string, func() error) {
	t.Helper()
	srv := NewServer(zaptest.NewLogger(t), NewStateServer([]Partition{stubPartition{}}, StateOptions{NodeID: 1}),
		NewConfigServer(stubConfigs{}, ConfigOptions{}), opts)
	srv.SetServing(true)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.GRPC.Serve(lis) }()
	served := sync.OnceValue(func() error { return <-done })
	t.Cleanup(func() {
		srv.GRPC.Stop()
		_ = served()
	})
	return srv, lis.Addr().String(), served
}

// rawH2 is a hand-driven HTTP/2 client connection, for what a gRPC client will not send: pings
// at any rate, header blocks of any size, a request message in pieces.
type rawH2 struct {
	t    *testing.T
	conn net.Conn

	wmu sync.Mutex
	fr  *http2.Framer

	mu      sync.Mutex
	goAway  *http2.GoAwayFrame
	headers map[uint32][]hpack.HeaderField // response headers and trailers, per stream
	ended   map[uint32]bool                // stream ended (END_STREAM or RST_STREAM)
	acked   map[[8]byte]bool               // the data of the pings the server answered
	closed  bool                           // the server closed the connection
	changed chan struct{}                  // closed and replaced on every change above
}

func dialH2(t *testing.T, addr string) *rawH2 {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := &rawH2{t: t, conn: conn, fr: http2.NewFramer(conn, conn), headers: map[uint32][]hpack.HeaderField{},
		ended: map[uint32]bool{}, acked: map[[8]byte]bool{}, changed: make(chan struct{})}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(1<<16, nil)
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	c.write(func(fr *http2.Framer) error { return fr.WriteSettings() })
	go c.read()
	return c
}

func (c *rawH2) write(w func(*http2.Framer) error) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return w(c.fr) == nil
}

func (c *rawH2) read() {
	defer c.update(func() { c.closed = true })
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if f.IsAck() {
				c.update(func() { c.acked[f.Data] = true })
			} else {
				c.write(func(fr *http2.Framer) error { return fr.WritePing(true, f.Data) })
			}
		case *http2.GoAwayFrame:
			c.update(func() { c.goAway = f })
		case *http2.MetaHeadersFrame:
			c.update(func() {
				c.headers[f.StreamID] = append(c.headers[f.StreamID], f.Fields...)
				if f.StreamEnded() {
					c.ended[f.StreamID] = true
				}
			})
		case *http2.DataFrame:
			if n := len(f.Data()); n > 0 { // keep the windows open
				c.write(func(fr *http2.Framer) error {
					_ = fr.WriteWindowUpdate(0, uint32(n))
					return fr.WriteWindowUpdate(f.StreamID, uint32(n))
				})
			}
			if f.StreamEnded() {
				c.update(func() { c.ended[f.StreamID] = true })
			}
		case *http2.RSTStreamFrame:
			c.update(func() { c.ended[f.StreamID] = true })
		}
	}
}

func (c *rawH2) update(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
	close(c.changed)
	c.changed = make(chan struct{})
}

// waitFor waits up to d for cond (called with c.mu held) and reports whether it held.
func (c *rawH2) waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.After(d)
	for {
		c.mu.Lock()
		ok, ch := cond(), c.changed
		c.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

// startCall opens stream id for a gRPC method, with extra header fields, without ending it.
func (c *rawH2) startCall(id uint32, method string, extra ...hpack.HeaderField) {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: method},
		{Name: ":authority", Value: "localhost"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	}, extra...) {
		_ = enc.WriteField(f)
	}
	b := block.Bytes()
	const chunk = 16 << 10 // the default SETTINGS_MAX_FRAME_SIZE
	c.write(func(fr *http2.Framer) error {
		first := b[:min(len(b), chunk)]
		b = b[len(first):]
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(b) == 0}); err != nil {
			return err
		}
		for len(b) > 0 {
			next := b[:min(len(b), chunk)]
			b = b[len(next):]
			if err := fr.WriteContinuation(id, len(b) == 0, next); err != nil {
				return err
			}
		}
		return nil
	})
}

// grpcStatus is the grpc-status trailer of stream id ("" if none arrived).
func (c *rawH2) grpcStatus(id uint32) string {
	for _, f := range c.headers[id] {
		if f.Name == "grpc-status" {
			return f.Value
		}
	}
	return ""
}

// TestKeepaliveMinTimeZeroPermitsAnyInterval: grpc.keepalive.min.time.ms=0 lets clients ping as
// often as they like. gRPC itself reads a zero minimum as its default of five minutes, which
// would disconnect every client with a keepalive shorter than that.
func TestKeepaliveMinTimeZeroPermitsAnyInterval(t *testing.T) {
	_, addr, _ := startStubServer(t, ServerOptions{KeepaliveMinTime: 0})
	c := dialH2(t, addr)
	for i := range 10 {
		if i > 0 {
			// Not a wait for an event: the interval between pings is what the test is about.
			time.Sleep(20 * time.Millisecond)
		}
		c.write(func(fr *http2.Framer) error { return fr.WritePing(false, [8]byte{byte(i)}) })
	}
	// The server answers each ping before it decides whether the ping was one too many, on the
	// connection's single ordered stream of frames; so once the answer to one more ping arrives,
	// so has any GOAWAY that the ten brought.
	fence := [8]byte{'f', 'e', 'n', 'c', 'e'}
	c.write(func(fr *http2.Framer) error { return fr.WritePing(false, fence) })
	if !c.waitFor(10*time.Second, func() bool { return c.acked[fence] || c.goAway != nil || c.closed }) {
		t.Fatal("the server answered no ping")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.goAway != nil || c.closed {
		t.Fatalf("keepalive minimum 0: the server ended the connection after 10 pings 20 ms apart (GOAWAY %v)", c.goAway)
	}
	for i := range 10 {
		if !c.acked[[8]byte{byte(i)}] {
			t.Fatalf("ping %d was not answered", i)
		}
	}
}

// TestKeepaliveEnforcement: a client that pings more often than the minimum is disconnected with
// GOAWAY ENHANCE_YOUR_CALM (too_many_pings).
func TestKeepaliveEnforcement(t *testing.T) {
	_, addr, _ := startStubServer(t, ServerOptions{KeepaliveMinTime: 10 * time.Second})
	c := dialH2(t, addr)
	for i := range 10 {
		c.write(func(fr *http2.Framer) error { return fr.WritePing(false, [8]byte{byte(i)}) })
	}
	if !c.waitFor(5*time.Second, func() bool { return c.goAway != nil && c.closed }) {
		t.Fatal("a ping flood was not disconnected")
	}
	if c.goAway.ErrCode != http2.ErrCodeEnhanceYourCalm || !strings.Contains(string(c.goAway.DebugData()), "too_many_pings") {
		t.Fatalf("GOAWAY %v %q, want ENHANCE_YOUR_CALM too_many_pings", c.goAway.ErrCode, c.goAway.DebugData())
	}
}

// TestLargeMetadataRefused: request metadata is bounded by MaxHeaderListBytes. Headers are not
// flow-controlled: under gRPC's default bound of 16 MiB, a stream that sends its headers and
// never its message held that much for as long as the connection lived, grpc.max.concurrent.streams
// times per connection.
func TestLargeMetadataRefused(t *testing.T) {
	_, addr, _ := startStubServer(t, ServerOptions{})
	client := dialClient(t, addr)
	find := func(pad int) error {
		ctx := metadata.AppendToOutgoingContext(ctxT(t), "x-pad", strings.Repeat("a", pad))
		_, err := client.FindCoordinator(ctx, &pb.FindCoordinatorRequest{Keys: []string{"g:" + topicA + ":0"}})
		return err
	}
	if err := find(MaxHeaderListBytes / 2); err != nil {
		t.Fatalf("metadata of %d bytes: %v", MaxHeaderListBytes/2, err)
	}
	err := find(1 << 20)
	if err == nil {
		t.Fatal("1 MiB of metadata was accepted")
	}
	t.Logf("1 MiB of metadata: %v", err)
	if err := find(16); err != nil {
		t.Fatalf("after oversized metadata: %v", err)
	}
}

// TestShutdownWaitsForRequestStillArriving: a drain answers a unary call whose request message is
// still being received when it starts, however long that takes within the drain timeout (such a
// call has not reached the interceptors yet).
func TestShutdownWaitsForRequestStillArriving(t *testing.T) {
	srv, addr, done := startStubServer(t, ServerOptions{})
	c := dialH2(t, addr)
	msg, err := proto.Marshal(writeReq("g", topicA, 0, 1, 1, 0, batch(0, 9, 0, 1)))
	if err != nil {
		t.Fatal(err)
	}
	frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	frame = append(frame, msg...)
	half := len(frame) / 2

	counted := make(chan struct{}, 1)
	srv.calls.mu.Lock()
	srv.calls.counted = counted
	srv.calls.mu.Unlock()
	c.startCall(1, "/sharecoord.v1.ShareCoordinatorService/WriteShareGroupState")
	c.write(func(fr *http2.Framer) error { return fr.WriteData(1, false, frame[:half]) })
	// Wait until the server has the headers (and, on the way, half the message).
	for deadline := time.After(10 * time.Second); ; {
		srv.calls.mu.Lock()
		n := srv.calls.n
		srv.calls.mu.Unlock()
		if n == 1 {
			break
		}
		select {
		case <-counted:
		case <-deadline:
			t.Fatal("the server never saw the call start")
		}
	}

	drained := make(chan bool, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		drained <- srv.Shutdown(ctx)
	}()
	// The drain has begun once the server sends this connection its GOAWAY.
	if !c.waitFor(10*time.Second, func() bool { return c.goAway != nil || c.closed }) {
		t.Fatal("the drain did not begin")
	}
	// Not a wait for an event: the rest of the message arrives late, well after the idleGrace in
	// which a drain that did not count the call would have closed it.
	time.Sleep(5 * idleGrace)
	c.write(func(fr *http2.Framer) error { return fr.WriteData(1, true, frame[half:]) })

	if !c.waitFor(10*time.Second, func() bool { return c.ended[1] || c.closed }) {
		t.Fatal("no answer")
	}
	c.mu.Lock()
	st := c.grpcStatus(1)
	c.mu.Unlock()
	if st != "0" {
		t.Fatalf("call in flight at shutdown: grpc-status %q, want 0 (OK)", st)
	}
	if !<-drained {
		t.Error("Shutdown reported calls cancelled")
	}
	_ = done()
}

// TestShutdownRefusesNewCallsRetriably: once a drain starts, new calls fail with UNAVAILABLE
// (which clients retry elsewhere or later), never with a code that says the request was wrong.
func TestShutdownRefusesNewCallsRetriably(t *testing.T) {
	srv, addr, done := startStubServer(t, ServerOptions{})
	client := dialClient(t, addr)
	if _, err := client.WriteShareGroupState(ctxT(t), writeReq("g", topicA, 0, 1, 1, 0)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !srv.Shutdown(ctx) {
		t.Error("Shutdown of an idle server reported calls cancelled")
	}
	_ = done()
	callCtx, callCancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer callCancel()
	_, err := client.WriteShareGroupState(callCtx, writeReq("g", topicA, 0, 1, 1, 0))
	if c := status.Code(err); c != codes.Unavailable {
		t.Fatalf("call after shutdown: %v, want UNAVAILABLE", err)
	}
}

// dialClient connects a state client to addr, closed when the test ends.
func dialClient(t *testing.T, addr string) pb.ShareCoordinatorServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewShareCoordinatorServiceClient(conn)
}
