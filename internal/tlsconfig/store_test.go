package tlsconfig

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/coordinatord/coordinatord/internal/testcert"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture is a CA, a node certificate and the CA file on disk, and the Settings naming them as
// the server's settings do.
type fixture struct {
	dir      string
	ca       *testcert.CA
	settings Settings
	logs     *observer.ObservedLogs
	reg      *prometheus.Registry
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	fx := &fixture{dir: dir, ca: testcert.NewCA(t, "tlsconfig test CA"), reg: prometheus.NewRegistry()}
	fx.settings = Settings{
		Cert: File{Setting: "tls.cert.file", Path: filepath.Join(dir, "node.pem")},
		Key:  File{Setting: "tls.key.file", Path: filepath.Join(dir, "node-key.pem")},
		CA:   File{Setting: "tls.client.ca.file", Path: testcert.WriteCAFile(t, fx.ca, dir, "ca.pem")},
	}
	fx.write(t, fx.ca.Issue(t, pkix.Name{CommonName: "node-1"}, true))
	return fx
}

// write replaces the node's certificate and key files with cert.
func (fx *fixture) write(t *testing.T, cert tls.Certificate) {
	t.Helper()
	testcert.WriteKeyPair(t, cert, fx.settings.Cert.Path, fx.settings.Key.Path)
}

// open returns a Store over the fixture's files, logging to fx.logs.
func (fx *fixture) open(t *testing.T) *Store {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	fx.logs = logs
	s, err := NewStore(zap.New(core), fx.settings, fx.reg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// reloads returns the count of s's reloads with result ("success" or "failure").
func reloads(s *Store, result string) float64 {
	return testutil.ToFloat64(s.metrics.reloads.WithLabelValues(result))
}

// servedSerial returns the serial number of the certificate s currently serves.
func servedSerial(s *Store) string { return s.material().leaf.SerialNumber.String() }

func serial(c tls.Certificate) string { return c.Leaf.SerialNumber.String() }

// handshake connects a client with client to a server with server over loopback TCP and returns
// both ends' connection states, or the first error of either end.
func handshake(t *testing.T, server, client *tls.Config) (serverState, clientState tls.ConnectionState, err error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	type result struct {
		state tls.ConnectionState
		err   error
	}
	done := make(chan result, 1)
	go func() {
		conn, err := lis.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer conn.Close()
		tc := tls.Server(conn, server)
		err = tc.Handshake()
		if err == nil {
			_, err = tc.Write([]byte{1}) // the client reads it: the server verified the client too
		}
		done <- result{tc.ConnectionState(), err}
	}()
	conn, err := tls.Dial("tcp", lis.Addr().String(), client)
	if err == nil {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		clientState = conn.ConnectionState()
		_ = conn.Close()
	}
	res := <-done
	if err == nil {
		err = res.err
	}
	return res.state, clientState, err
}

func TestNewStoreRefusesBadFiles(t *testing.T) {
	fx := newFixture(t)
	other := filepath.Join(fx.dir, "other-key.pem")
	testcert.WriteKeyPair(t, testcert.NewCA(t, "other").Issue(t, pkix.Name{CommonName: "x"}, true), filepath.Join(fx.dir, "other.pem"), other)
	expired, expiredKey := filepath.Join(fx.dir, "expired.pem"), filepath.Join(fx.dir, "expired-key.pem")
	testcert.WriteKeyPair(t, fx.ca.IssueExpired(t, pkix.Name{CommonName: "old"}), expired, expiredKey)
	early, earlyKey := filepath.Join(fx.dir, "early.pem"), filepath.Join(fx.dir, "early-key.pem")
	testcert.WriteKeyPair(t, fx.ca.IssueValidFrom(t, pkix.Name{CommonName: "early"}, time.Now().Add(time.Hour)), early, earlyKey)
	emptyCA := filepath.Join(fx.dir, "empty-ca.pem")
	testcert.WriteAtomically(t, emptyCA, []byte("no certificates here\n"))
	absent := filepath.Join(fx.dir, "absent.pem")

	for _, tc := range []struct {
		name   string
		change func(*Settings)
		want   []string // in the error of NewStore
		check  []string // in the error of Check, when it differs
	}{
		{"missing certificate file", func(s *Settings) { s.Cert.Path = absent },
			[]string{"tls.cert.file=" + absent + ": stat ", "no such file"},
			[]string{"tls.cert.file=" + absent + ", tls.key.file=" + fx.settings.Key.Path + ": open " + absent}},
		{"key of another certificate", func(s *Settings) { s.Key.Path = other },
			[]string{"tls.cert.file=" + fx.settings.Cert.Path + ", tls.key.file=" + other + ": ", "does not match"}, nil},
		{"expired certificate", func(s *Settings) { s.Cert.Path, s.Key.Path = expired, expiredKey },
			[]string{"tls.cert.file=" + expired + ": the certificate expired at ", "; renew it"}, nil},
		{"certificate not valid yet", func(s *Settings) { s.Cert.Path, s.Key.Path = early, earlyKey },
			[]string{"tls.cert.file=" + early + ": the certificate is not valid before "}, nil},
		{"CA file without certificates", func(s *Settings) { s.CA.Path = emptyCA },
			[]string{"tls.client.ca.file=" + emptyCA + ": the file holds no PEM certificate"}, nil},
		{"the setting names the file", func(s *Settings) { s.Cert = File{Setting: "--cert", Path: absent} },
			[]string{"--cert=" + absent}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fx.settings
			tc.change(&s)
			_, err := NewStore(nil, s, nil)
			for _, want := range tc.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("NewStore: %v, want an error containing %q", err, want)
				}
			}
			check := tc.check
			if check == nil {
				check = tc.want[len(tc.want)-1:]
			}
			err = Check(s)
			for _, want := range check {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("Check: %v, want an error containing %q", err, want)
				}
			}
		})
	}
	if err := Check(fx.settings); err != nil {
		t.Fatalf("Check of good files: %v", err)
	}
	if _, err := NewStore(nil, Settings{Cert: fx.settings.Cert, Key: fx.settings.Key}, nil); err != nil {
		t.Fatalf("without a CA file: %v", err)
	}
}

// TestRotation: a certificate replaced on disk is served from the next connection on; a
// replacement that does not load, or is expired, is logged once and the previous certificate stays
// in use; one not valid yet is used from its start on, without a further change to the files.
func TestRotation(t *testing.T) {
	fx := newFixture(t)
	s := fx.open(t)
	first := servedSerial(s)

	rotated := fx.ca.Issue(t, pkix.Name{CommonName: "node-1-rotated"}, true)
	fx.write(t, rotated)
	if got := servedSerial(s); got != serial(rotated) {
		t.Fatalf("served serial %s after rotation, want %s (was %s)", got, serial(rotated), first)
	}
	if n := fx.logs.FilterMessage("TLS certificate reloaded").FilterField(zap.String("reason", "the files changed")).Len(); n != 1 {
		t.Fatalf("%d reload log lines, want 1: %v", n, fx.logs.All())
	}

	testcert.WriteAtomically(t, fx.settings.Cert.Path, []byte("not a certificate\n"))
	for range 3 {
		if got := servedSerial(s); got != serial(rotated) {
			t.Fatalf("served serial %s after a broken replacement, want the previous %s", got, serial(rotated))
		}
	}
	if n := fx.logs.FilterMessage("TLS reload failed; the loaded certificate stays in use until the files change again").Len(); n != 1 {
		t.Fatalf("a broken replacement logged %d failures, want 1 (not retried until it changes)", n)
	}

	fx.write(t, fx.ca.IssueExpired(t, pkix.Name{CommonName: "node-1-old"}))
	if got := servedSerial(s); got != serial(rotated) {
		t.Fatalf("served serial %s after an expired replacement, want the previous %s", got, serial(rotated))
	}
	expiredLogged := false
	for _, e := range fx.logs.FilterMessage("TLS reload failed; the loaded certificate stays in use until the files change again").All() {
		if err, _ := e.ContextMap()["error"].(string); strings.Contains(err, "the certificate expired at") {
			expiredLogged = true
		}
	}
	if !expiredLogged {
		t.Fatalf("no failure log names the expiry: %v", fx.logs.All())
	}

	start := time.Now().Add(time.Hour).Truncate(time.Second)
	early := fx.ca.IssueValidFrom(t, pkix.Name{CommonName: "node-1-early"}, start)
	fx.write(t, early)
	if got := servedSerial(s); got != serial(rotated) {
		t.Fatalf("served serial %s before the renewal is valid, want the previous %s", got, serial(rotated))
	}
	waiting := fx.logs.FilterMessage("TLS reload failed; the loaded certificate stays in use until the new one becomes valid or the files change again").All()
	if len(waiting) != 1 || !waiting[0].ContextMap()["retry_at"].(time.Time).Equal(start) {
		t.Fatalf("want one failure that retries at %s: %v", start, waiting)
	}
	if got := servedSerial(s); got != serial(rotated) {
		t.Fatalf("served serial %s before the renewal's start, want the previous %s", got, serial(rotated))
	}
	s.now = func() time.Time { return start.Add(time.Second) }
	if got := servedSerial(s); got != serial(early) {
		t.Fatalf("served serial %s once the renewal is valid, want %s", got, serial(early))
	}

	if got := reloads(s, "success"); got != 2 {
		t.Errorf("successful reloads %v, want 2", got)
	}
	if got := reloads(s, "failure"); got != 3 {
		t.Errorf("failed reloads %v, want 3", got)
	}
	if got, want := testutil.ToFloat64(s.metrics.notAfter), float64(early.Leaf.NotAfter.Unix()); got != want {
		t.Errorf("not_after %v, want %v (the certificate in use)", got, want)
	}
}

// TestReload: Reload re-reads the files whether or not they changed, and logs why; a file it
// cannot read leaves the loaded certificate in use.
func TestReload(t *testing.T) {
	fx := newFixture(t)
	s := fx.open(t)
	if got := reloads(s, "success"); got != 0 {
		t.Fatalf("successful reloads %v before any, want 0", got)
	}
	// The registry has the expiry and both results of the reload counter from the start.
	if n, err := testutil.GatherAndCount(fx.reg, "sharecoord_tls_certificate_not_after_seconds", "sharecoord_tls_reloads_total"); err != nil || n != 3 {
		t.Fatalf("%d series registered (%v), want 3", n, err)
	}
	s.Reload("SIGHUP")
	if n := fx.logs.FilterMessage("TLS certificate reloaded").FilterField(zap.String("reason", "SIGHUP")).Len(); n != 1 {
		t.Fatalf("%d reload log lines with reason SIGHUP, want 1: %v", n, fx.logs.All())
	}
	loaded := servedSerial(s)
	if err := os.Remove(fx.settings.Key.Path); err != nil {
		t.Fatal(err)
	}
	s.Reload("SIGHUP")
	if n := fx.logs.FilterMessage("TLS reload failed; the loaded certificate stays in use").Len(); n != 1 {
		t.Fatalf("%d failure log lines, want 1: %v", n, fx.logs.All())
	}
	if got := servedSerial(s); got != loaded {
		t.Fatalf("served serial %s after a failed reload, want %s", got, loaded)
	}
	if got := reloads(s, "success"); got != 1 {
		t.Errorf("successful reloads %v, want 1", got)
	}
}

// TestMissingFileLoggedOnce: a file that cannot be checked is logged once, not on every
// connection, and the loaded certificate stays in use until it is back.
func TestMissingFileLoggedOnce(t *testing.T) {
	fx := newFixture(t)
	s := fx.open(t)
	loaded := servedSerial(s)
	if err := os.Remove(fx.settings.CA.Path); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got := servedSerial(s); got != loaded {
			t.Fatalf("served serial %s with the CA file missing, want %s", got, loaded)
		}
	}
	if n := fx.logs.FilterMessage("cannot check the TLS files; the loaded certificate stays in use").Len(); n != 1 {
		t.Fatalf("%d log lines for the missing file, want 1", n)
	}
	if got := reloads(s, "failure"); got != 1 {
		t.Errorf("failed reloads %v, want 1", got)
	}
	testcert.WriteCAFile(t, fx.ca, fx.dir, filepath.Base(fx.settings.CA.Path))
	if got := servedSerial(s); got != loaded {
		t.Fatalf("served serial %s once the file is back, want %s", got, loaded)
	}
}

// TestServerConfig: a port's configuration serves the current certificate, verifies client
// certificates as asked, offers its protocols, and is rebuilt only when the material changes.
func TestServerConfig(t *testing.T) {
	fx := newFixture(t)
	s := fx.open(t)
	server := s.ServerConfig(tls.RequireAndVerifyClientCert, tls.VersionTLS13, "h2")
	client := &tls.Config{RootCAs: fx.ca.Pool, ServerName: "localhost", NextProtos: []string{"h2"},
		Certificates: []tls.Certificate{fx.ca.Issue(t, pkix.Name{CommonName: "broker-1"}, false)}}
	srv, cli, err := handshake(t, server, client)
	if err != nil {
		t.Fatal(err)
	}
	if cli.Version != tls.VersionTLS13 || cli.NegotiatedProtocol != "h2" || cli.PeerCertificates[0].SerialNumber.String() != servedSerial(s) {
		t.Fatalf("client side: version %x, ALPN %q, server serial %s", cli.Version, cli.NegotiatedProtocol, cli.PeerCertificates[0].SerialNumber)
	}
	if len(srv.VerifiedChains) == 0 || srv.PeerCertificates[0].Subject.CommonName != "broker-1" {
		t.Fatalf("server side: %d verified chains", len(srv.VerifiedChains))
	}
	noCert := &tls.Config{RootCAs: fx.ca.Pool, ServerName: "localhost", NextProtos: []string{"h2"}}
	if _, _, err := handshake(t, server, noCert); err == nil {
		t.Fatal("a client without a certificate connected to a port that requires one")
	}
	plain := &tls.Config{RootCAs: fx.ca.Pool, ServerName: "localhost", NextProtos: []string{"http/1.1"}}
	if _, _, err := handshake(t, s.ServerConfig(tls.NoClientCert, tls.VersionTLS12, "http/1.1"), plain); err != nil {
		t.Fatalf("a port that asks for no client certificate: %v", err)
	}

	first, err := server.GetConfigForClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := server.GetConfigForClient(nil); again != first {
		t.Fatal("the per-connection configuration was rebuilt with the material unchanged")
	}
	fx.write(t, fx.ca.Issue(t, pkix.Name{CommonName: "node-1-rotated"}, true))
	if again, _ := server.GetConfigForClient(nil); again == first || again.Certificates[0].Leaf.SerialNumber.String() != servedSerial(s) {
		t.Fatal("the per-connection configuration was not rebuilt for the rotated certificate")
	}
}

// TestClientConfig: two nodes whose certificates one CA signs connect with mutual TLS, each
// from its own Store; a node with a certificate of another CA is refused.
func TestClientConfig(t *testing.T) {
	fx := newFixture(t)
	server := fx.open(t)
	peerDir := t.TempDir()
	peer := Settings{
		Cert: File{Setting: "tls.cert.file", Path: filepath.Join(peerDir, "node.pem")},
		Key:  File{Setting: "tls.key.file", Path: filepath.Join(peerDir, "node-key.pem")},
		CA:   fx.settings.CA,
	}
	testcert.WriteKeyPair(t, fx.ca.Issue(t, pkix.Name{CommonName: "node-2"}, false), peer.Cert.Path, peer.Key.Path)
	client, err := NewStore(nil, peer, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, cli, err := handshake(t, server.ServerConfig(tls.RequireAndVerifyClientCert, tls.VersionTLS12), client.ClientConfig("localhost", tls.VersionTLS12))
	if err != nil {
		t.Fatal(err)
	}
	if len(cli.VerifiedChains) == 0 || cli.PeerCertificates[0].Subject.CommonName != "node-1" {
		t.Fatalf("the client did not verify node-1: %d chains", len(cli.VerifiedChains))
	}
	if len(srv.VerifiedChains) == 0 || srv.PeerCertificates[0].Subject.CommonName != "node-2" {
		t.Fatalf("the server did not verify node-2: %d chains", len(srv.VerifiedChains))
	}

	// The client presents the certificate current at the handshake.
	rotated := fx.ca.Issue(t, pkix.Name{CommonName: "node-2-rotated"}, false)
	testcert.WriteKeyPair(t, rotated, peer.Cert.Path, peer.Key.Path)
	srv, _, err = handshake(t, server.ServerConfig(tls.RequireAndVerifyClientCert, tls.VersionTLS12), client.ClientConfig("localhost", tls.VersionTLS12))
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.PeerCertificates[0].SerialNumber.String(); got != serial(rotated) {
		t.Fatalf("the client presented serial %s after rotation, want %s", got, serial(rotated))
	}

	stranger := testcert.NewCA(t, "another CA")
	testcert.WriteKeyPair(t, stranger.Issue(t, pkix.Name{CommonName: "node-3"}, false), peer.Cert.Path, peer.Key.Path)
	if _, _, err := handshake(t, server.ServerConfig(tls.RequireAndVerifyClientCert, tls.VersionTLS12), client.ClientConfig("localhost", tls.VersionTLS12)); err == nil {
		t.Fatal("a node with a certificate of another CA connected")
	}
}
