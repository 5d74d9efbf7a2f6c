package tlsconfig

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/credentials"

	"github.com/coordinatord/coordinatord/internal/testcert"
)

// TestLogHandshakeFailures: a server handshake that the client cannot complete (no client
// certificate where one is required, a certificate of an unknown CA) is logged with the
// client's address and crypto/tls's reason; a handshake that succeeds is not.
func TestLogHandshakeFailures(t *testing.T) {
	fx := newFixture(t)
	store := fx.open(t)
	core, logs := observer.New(zapcore.InfoLevel)
	creds := LogHandshakeFailures(zap.New(core), credentials.NewTLS(store.ServerConfig(tls.RequireAndVerifyClientCert, tls.VersionTLS12, "h2")))
	stranger := testcert.NewCA(t, "another CA")
	for _, tc := range []struct {
		name   string
		certs  []tls.Certificate
		reason string // "" for a handshake that succeeds
	}{
		{"no client certificate", nil, "client didn't provide a certificate"},
		{"certificate of another CA", []tls.Certificate{stranger.Issue(t, pkix.Name{CommonName: "x"}, false)}, "certificate signed by unknown authority"},
		{"certificate of the CA", []tls.Certificate{fx.ca.Issue(t, pkix.Name{CommonName: "broker-1"}, false)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := logs.Len()
			client := &tls.Config{RootCAs: fx.ca.Pool, ServerName: "localhost", NextProtos: []string{"h2"},
				// Present the certificate even when its CA is not one the server asks for.
				GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
					if len(tc.certs) == 0 {
						return &tls.Certificate{}, nil
					}
					return &tc.certs[0], nil
				}}
			remote, err := serverHandshake(t, creds, client)
			if tc.reason == "" {
				if err != nil || logs.Len() != before {
					t.Fatalf("handshake: %v; logged %v", err, logs.All()[before:])
				}
				return
			}
			if err == nil {
				t.Fatal("the server accepted the handshake")
			}
			entries := logs.All()[before:]
			if len(entries) != 1 || entries[0].Level != zapcore.WarnLevel {
				t.Fatalf("want one WARN line, got %v", entries)
			}
			fields := entries[0].ContextMap()
			if fields["remote"] != remote || !strings.Contains(fields["reason"].(string), tc.reason) {
				t.Fatalf("logged %q %v; want remote %s and a reason with %q", entries[0].Message, fields, remote, tc.reason)
			}
		})
	}
}

// serverHandshake runs creds' server handshake against a client with cfg over loopback TCP and
// returns the client's address and the server's error.
func serverHandshake(t *testing.T, creds credentials.TransportCredentials, cfg *tls.Config) (string, error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	done := make(chan error, 1)
	go func() {
		conn, err := lis.Accept()
		if err != nil {
			done <- err
			return
		}
		out, _, err := creds.ServerHandshake(conn)
		if err == nil {
			conn = out
		}
		_ = conn.Close()
		done <- err
	}()
	raw, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	client := tls.Client(raw, cfg)
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	if client.Handshake() == nil {
		_, _ = client.Read(make([]byte, 1)) // TLS 1.3: the server's verdict on the client's certificate comes after
	}
	return raw.LocalAddr().String(), <-done
}

// fakeTimers stands in for time.AfterFunc: it records the functions to run, which the test runs.
type fakeTimers struct{ pending []func() }

func (f *fakeTimers) afterFunc(_ time.Duration, fn func()) *time.Timer {
	f.pending = append(f.pending, fn)
	return nil
}

func (f *fakeTimers) fire() {
	fns := f.pending
	f.pending = nil
	for _, fn := range fns {
		fn()
	}
}

// TestHandshakeLogRateLimit: the first handshakeLogBurst failures of a minute are logged one by
// one, the rest counted and summed up in one line when the minute ends; the next minute starts
// afresh, and a minute without suppressed failures has no summary.
func TestHandshakeLogRateLimit(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	timers := &fakeTimers{}
	h := newHandshakeLog(zap.New(core), func() time.Time { return now }, timers.afterFunc)
	addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 40000}
	bad := errors.New("tls: client didn't provide a certificate")

	for range 12 {
		h.failed(addr, bad)
		now = now.Add(time.Second)
	}
	if n := logs.FilterMessageSnippet("TLS handshake failed").Len(); n != handshakeLogBurst {
		t.Fatalf("%d failures logged one by one in the first minute, want %d", n, handshakeLogBurst)
	}
	if len(timers.pending) != 1 {
		t.Fatalf("%d summaries scheduled, want 1", len(timers.pending))
	}
	timers.fire()
	summary := logs.FilterMessageSnippet("more TLS handshakes failed")
	if summary.Len() != 1 || summary.All()[0].ContextMap()["not_logged"] != int64(12-handshakeLogBurst) {
		t.Fatalf("summary: %v, want one line counting %d failures", summary.All(), 12-handshakeLogBurst)
	}
	first := logs.FilterMessageSnippet("TLS handshake failed").All()[0].ContextMap()
	if first["remote"] != "10.0.0.7:40000" || first["reason"] != bad.Error() {
		t.Fatalf("first line: %v", first)
	}

	// A new minute: failures are logged one by one again.
	now = now.Add(handshakeLogWindow)
	h.failed(addr, bad)
	if n := logs.FilterMessageSnippet("TLS handshake failed").Len(); n != handshakeLogBurst+1 {
		t.Fatalf("%d lines after a new minute began, want %d", n, handshakeLogBurst+1)
	}
	if len(timers.pending) != 0 {
		t.Fatal("a summary was scheduled although nothing was suppressed")
	}

	// Suppressed failures of a minute that a later failure ends are summed up at once; the
	// pending summary of that minute then logs nothing more.
	for range handshakeLogBurst + 2 {
		h.failed(addr, bad)
	}
	now = now.Add(handshakeLogWindow)
	h.failed(addr, bad)
	timers.fire()
	if s := logs.FilterMessageSnippet("more TLS handshakes failed").All(); len(s) != 2 || s[1].ContextMap()["not_logged"] != int64(3) {
		t.Fatalf("summaries: %v, want a second one counting 3", s)
	}
	h.failed(addr, fmt.Errorf("read: %w", io.EOF))
	if reason := logs.All()[logs.Len()-1].ContextMap()["reason"]; reason != "the client closed the connection during the handshake (EOF)" {
		t.Fatalf("an EOF is logged with the reason %q", reason)
	}
}
