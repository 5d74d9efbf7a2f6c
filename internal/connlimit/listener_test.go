package connlimit

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// server accepts on a Listener with limits and keeps every accepted connection open, without
// reading, until the test ends.
type server struct {
	l        *Listener
	reg      *prometheus.Registry
	logs     *observer.ObservedLogs
	accepted chan net.Conn
}

func newServer(t *testing.T, limits Limits) *server {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	reg := prometheus.NewRegistry()
	s := &server{l: New(inner, "grpc", limits, NewMetrics(reg), zap.New(core)), reg: reg, logs: logs, accepted: make(chan net.Conn, 100)}
	done := make(chan struct{})
	var held []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := s.l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
			s.accepted <- c
		}
	}()
	t.Cleanup(func() {
		_ = s.l.Close()
		<-done
		for _, c := range held {
			_ = c.Close()
		}
	})
	return s
}

// dial connects from the loopback address from (127.0.0.0/8) to the server.
func (s *server) dial(t *testing.T, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", s.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// accepted waits for the server to hand out the next connection.
func (s *server) next(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-s.accepted:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted")
		return nil
	}
}

// closedByServer reports whether the server closed c: a read sees the end of the stream.
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	return err == io.EOF || err != nil
}

func TestPerIPBoundAndOverrides(t *testing.T) {
	s := newServer(t, Limits{MaxConnections: 10, MaxPerIP: 2, MaxPerIPKey: "max.connections.per.ip",
		PerIPOverrides: map[netip.Addr]int{netip.MustParseAddr("127.0.0.3"): 3, netip.MustParseAddr("127.0.0.4"): 0}})
	for range 2 {
		s.dial(t, "127.0.0.1")
		s.next(t)
	}
	over := s.dial(t, "127.0.0.1")
	if !closedByServer(t, over) {
		t.Fatal("a third connection from 127.0.0.1 stayed open, past max.connections.per.ip=2")
	}
	// Another address is not held back by the first.
	s.dial(t, "127.0.0.2")
	s.next(t)
	for range 3 {
		s.dial(t, "127.0.0.3")
		s.next(t)
	}
	if !closedByServer(t, s.dial(t, "127.0.0.3")) {
		t.Fatal("a fourth connection from 127.0.0.3 stayed open, past its override of 3")
	}
	if !closedByServer(t, s.dial(t, "127.0.0.4")) {
		t.Fatal("a connection from 127.0.0.4, whose override is 0, stayed open")
	}
	if got := s.l.Open(); got != 6 {
		t.Fatalf("open connections %d, want 6", got)
	}
	if got := testutil.ToFloat64(s.refused(ReasonPerIP)); got != 3 {
		t.Fatalf("refused per_ip %v, want 3", got)
	}
	// Warned once for the reason, not once per connection.
	if got := s.logs.FilterMessageSnippet("its address holds max.connections.per.ip connections").Len(); got != 1 {
		t.Fatalf("%d warnings, want 1: %v", got, s.logs.All())
	}
}

func (s *server) refused(reason string) prometheus.Counter { return s.l.refused[reason] }

func TestMaxConnectionsAndClose(t *testing.T) {
	s := newServer(t, Limits{MaxConnections: 2, MaxConnectionsKey: "grpc.max.connections"})
	a := s.dial(t, "127.0.0.1")
	first := s.next(t)
	s.dial(t, "127.0.0.2")
	s.next(t)
	if !closedByServer(t, s.dial(t, "127.0.0.3")) {
		t.Fatal("a third connection stayed open, past grpc.max.connections=2")
	}
	if got := testutil.ToFloat64(s.refused(ReasonMaxConnections)); got != 1 {
		t.Fatalf("refused max_connections %v, want 1", got)
	}
	if !s.l.CloseConn(first.RemoteAddr()) || !closedByServer(t, a) {
		t.Fatal("CloseConn did not close the connection of its address")
	}
	if s.l.CloseConn(first.RemoteAddr()) {
		t.Fatal("CloseConn of a closed connection reported one")
	}
	// Its place is free again.
	s.dial(t, "127.0.0.3")
	s.next(t)
	if got, want := testutil.ToFloat64(s.l.open), 2.0; got != want {
		t.Fatalf("sharecoord_connections_open %v, want %v", got, want)
	}
}

// A write to a client that reads nothing fails once it has blocked for WriteTimeout.
func TestWriteTimeout(t *testing.T) {
	s := newServer(t, Limits{WriteTimeout: 200 * time.Millisecond})
	s.dial(t, "127.0.0.1")
	c := s.next(t)
	buf := make([]byte, 1<<20)
	start := time.Now()
	var err error
	for err == nil && time.Since(start) < 30*time.Second {
		_, err = c.Write(buf)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("writes to a client that reads nothing: %v after %v, want a deadline error", err, time.Since(start))
	}
}

func TestParseOverrides(t *testing.T) {
	got, err := ParseOverrides(" 127.0.0.1:200, [::1]:5,::ffff:10.0.0.1:0 ,")
	if err != nil {
		t.Fatal(err)
	}
	want := map[netip.Addr]int{netip.MustParseAddr("127.0.0.1"): 200, netip.MustParseAddr("::1"): 5, netip.MustParseAddr("10.0.0.1"): 0}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for a, n := range want {
		if got[a] != n {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	for text, wantErr := range map[string]string{
		"broker-1:100":        "not an IP address",
		"127.0.0.1":           "want ADDRESS:COUNT",
		"127.0.0.1:-1":        "not a connection count",
		"127.0.0.1:x":         "not a connection count",
		"1.2.3.4:1,1.2.3.4:2": "named twice",
	} {
		if _, err := ParseOverrides(text); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseOverrides(%q) = %v, want an error saying %q", text, err, wantErr)
		}
	}
}
