package main

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordinatord/coordinatord/internal/testcert"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// startSecureProc is startProc for a server with TLS: its own client connection uses clientTLS.
func startSecureProc(t *testing.T, dataDir string, clientTLS *tls.Config, extra ...string) *proc {
	t.Helper()
	p := launch(t, exec.Command(binPath, serverArgs(dataDir, extra...)...), dataDir)
	p.connect(dialTLS(t, p.grpcAddr, clientTLS))
	return p
}

func dialTLS(t *testing.T, addr string, cfg *tls.Config) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// waitForLog waits until the process log has a line matching re.
func waitForLog(t *testing.T, p *proc, re *regexp.Regexp) {
	t.Helper()
	if _, ok := p.waitLine(re.MatchString); !ok {
		t.Fatalf("no log line matches %s\n%s", re, p.log())
	}
}

// securityFixture is a CA, a server certificate on disk and the flags that use them.
type securityFixture struct {
	dir                    string
	ca                     *testcert.CA
	certFile, keyFile, cas string
}

func newSecurityFixture(t *testing.T) *securityFixture {
	t.Helper()
	dir := t.TempDir()
	fx := &securityFixture{dir: dir, ca: testcert.NewCA(t, "coordinatord test CA"),
		certFile: filepath.Join(dir, "server.pem"), keyFile: filepath.Join(dir, "server-key.pem")}
	fx.cas = testcert.WriteCAFile(t, fx.ca, dir, "clients-ca.pem")
	testcert.WriteKeyPair(t, fx.ca.Issue(t, pkix.Name{CommonName: "coordinatord", Organization: []string{"Acme"}}, true), fx.certFile, fx.keyFile)
	return fx
}

// clientTLS is a client configuration trusting the CA, with a certificate for subject (none if
// nil).
func (fx *securityFixture) clientTLS(t *testing.T, subject *pkix.Name) *tls.Config {
	t.Helper()
	cfg := &tls.Config{RootCAs: fx.ca.Pool, ServerName: "localhost"}
	if subject != nil {
		cfg.Certificates = []tls.Certificate{fx.ca.Issue(t, *subject, false)}
	}
	return cfg
}

func (fx *securityFixture) args(clientAuth string, extra ...string) []string {
	args := []string{
		"--override", "tls.enabled=true",
		"--override", "tls.cert.file=" + fx.certFile,
		"--override", "tls.key.file=" + fx.keyFile,
		"--override", "tls.client.auth=" + clientAuth,
		"--override", "metrics.tls.enabled=true",
	}
	if clientAuth != "none" {
		args = append(args, "--override", "tls.client.ca.file="+fx.cas)
	}
	return append(args, extra...)
}

// The client subjects of the tests: a broker (cluster_action), an operator (alter_configs) and a
// reporting tool (describe_configs only, like every authenticated client).
func brokerSubject() *pkix.Name {
	return &pkix.Name{CommonName: "broker-1", Organization: []string{"Acme"}}
}
func adminSubject() *pkix.Name {
	return &pkix.Name{CommonName: "admin", Organization: []string{"Acme"}}
}
func otherSubject() *pkix.Name {
	return &pkix.Name{CommonName: "reporting", Organization: []string{"Elsewhere"}}
}

// authzArgs turn on authorization: broker-1 holds cluster_action, admin alter_configs, and every
// authenticated client describe_configs.
func authzArgs() []string {
	return []string{
		"--override", "authorizer.enabled=true",
		"--override", "authorizer.cluster.action.principals=User:CN=broker-1,O=Acme",
		"--override", "authorizer.alter.configs.principals=User:CN=admin,O=Acme",
		"--override", "authorizer.describe.configs.principals=*",
		"--override", "authorizer.alter.cluster.principals=User:CN=admin,O=Acme",
	}
}

// callEvery makes one call of every API method on conn and returns the gRPC code of each.
func callEvery(ctx context.Context, conn *grpc.ClientConn) map[string]codes.Code {
	st, cfg := pb.NewShareCoordinatorServiceClient(conn), pb.NewConfigServiceClient(conn)
	del := &pb.DeleteShareGroupStateRequest{GroupId: "sec", Topics: []*pb.DeleteStateTopic{{TopicId: topicA, Partitions: []*pb.DeleteStatePartition{{Partition: 5}}}}}
	sum := &pb.ReadShareGroupStateSummaryRequest{GroupId: "sec", Topics: []*pb.ReadStateSummaryTopic{{TopicId: topicA, Partitions: []*pb.ReadStateSummaryPartition{{Partition: 0}}}}}
	alterReq := &pb.IncrementalAlterConfigsRequest{Resources: []*pb.AlterConfigsResource{{ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP,
		ResourceName: "sec", Configs: []*pb.AlterableConfig{{Name: "share.delivery.count.limit", ConfigOperation: pb.ConfigOperation_CONFIG_OPERATION_SET, Value: proto.String("4")}}}}}
	descReq := &pb.DescribeConfigsRequest{Resources: []*pb.DescribeConfigsResource{{ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: "sec"}}}
	calls := map[string]func() error{
		"InitializeShareGroupState":  func() error { _, err := st.InitializeShareGroupState(ctx, initReq("sec", topicA, 0, 1, 0)); return err },
		"ReadShareGroupState":        func() error { _, err := st.ReadShareGroupState(ctx, readReq("sec", topicA, 0, 1)); return err },
		"WriteShareGroupState":       func() error { _, err := st.WriteShareGroupState(ctx, writeReq("sec", topicA, 0, -1)); return err },
		"DeleteShareGroupState":      func() error { _, err := st.DeleteShareGroupState(ctx, del); return err },
		"ReadShareGroupStateSummary": func() error { _, err := st.ReadShareGroupStateSummary(ctx, sum); return err },
		"FindCoordinator": func() error {
			_, err := st.FindCoordinator(ctx, &pb.FindCoordinatorRequest{Keys: []string{"sec:" + topicA + ":0"}})
			return err
		},
		"IncrementalAlterConfigs": func() error { _, err := cfg.IncrementalAlterConfigs(ctx, alterReq); return err },
		"DescribeConfigs":         func() error { _, err := cfg.DescribeConfigs(ctx, descReq); return err },
		"Health": func() error {
			_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		},
	}
	out := make(map[string]codes.Code, len(calls))
	for name, call := range calls {
		out[name] = status.Code(call())
	}
	return out
}

// expectCodes builds the expected code per method: state for the ShareCoordinatorService methods.
func expectCodes(state, alter, describe codes.Code) map[string]codes.Code {
	m := map[string]codes.Code{"IncrementalAlterConfigs": alter, "DescribeConfigs": describe, "Health": codes.OK}
	for _, name := range []string{"InitializeShareGroupState", "ReadShareGroupState", "WriteShareGroupState",
		"DeleteShareGroupState", "ReadShareGroupStateSummary", "FindCoordinator"} {
		m[name] = state
	}
	return m
}

// TestMutualTLSAndAuthorization runs the binary with TLS, client certificates required and
// authorization on: the handshake verifies both sides, clients without a certificate (or with
// one from another CA, or in plaintext) cannot connect, each principal may call exactly what its
// permissions allow and denials are logged, the metrics port serves HTTPS, and a certificate
// rotated on disk is served from the next connection on without a restart.
func TestMutualTLSAndAuthorization(t *testing.T) {
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	fx := newSecurityFixture(t)
	p := startSecureProc(t, t.TempDir(), fx.clientTLS(t, brokerSubject()), fx.args("required", authzArgs()...)...)
	ctx := ctxT(t)

	t.Run("handshake", func(t *testing.T) {
		conn, err := tls.Dial("tcp", p.grpcAddr, withALPN(fx.clientTLS(t, brokerSubject())))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		st := conn.ConnectionState()
		if st.Version < tls.VersionTLS12 || st.NegotiatedProtocol != "h2" || len(st.VerifiedChains) == 0 ||
			st.PeerCertificates[0].Subject.CommonName != "coordinatord" {
			t.Fatalf("handshake: version %x, ALPN %q, verified %d chains, server %s", st.Version, st.NegotiatedProtocol,
				len(st.VerifiedChains), st.PeerCertificates[0].Subject)
		}
	})

	t.Run("refused handshakes are logged", func(t *testing.T) {
		stranger := testcert.NewCA(t, "another CA").Issue(t, *brokerSubject(), false)
		for _, tc := range []struct {
			name   string
			cert   *tls.Certificate // nil: none; ignored for plaintext
			plain  bool
			reason string
		}{
			{name: "no client certificate", reason: "client didn't provide a certificate"},
			{name: "certificate of another CA", cert: &stranger, reason: "certificate signed by unknown authority"},
			{name: "plaintext", plain: true, reason: "does not look like a TLS handshake"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				raw, err := net.Dial("tcp", p.grpcAddr)
				if err != nil {
					t.Fatal(err)
				}
				defer raw.Close()
				_ = raw.SetDeadline(time.Now().Add(30 * time.Second))
				if tc.plain {
					_, _ = raw.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
				} else {
					cfg := withALPN(fx.clientTLS(t, nil))
					cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
						if tc.cert == nil {
							return &tls.Certificate{}, nil
						}
						return tc.cert, nil // even though the server does not ask for its CA
					}
					if tls.Client(raw, cfg).Handshake() == nil {
						_, _ = raw.Read(make([]byte, 1)) // TLS 1.3: the refusal comes after the client's flight
					}
				}
				_, _ = raw.Read(make([]byte, 1))
				// The line names the client's address and crypto/tls's reason.
				remote := regexp.QuoteMeta(`"remote":"` + raw.LocalAddr().String() + `"`)
				waitForLog(t, p, regexp.MustCompile(`"logger":"security.grpc-tls".*"msg":"TLS handshake failed; the connection was closed".*`+
					remote+`.*"reason":"[^"]*`+regexp.QuoteMeta(tc.reason)))
			})
		}
	})

	t.Run("refused connections", func(t *testing.T) {
		stranger := testcert.NewCA(t, "another CA")
		for name, cfg := range map[string]*tls.Config{
			"no client certificate": fx.clientTLS(t, nil),
			"certificate of another CA": {RootCAs: fx.ca.Pool, ServerName: "localhost",
				Certificates: []tls.Certificate{stranger.Issue(t, *brokerSubject(), false)}},
			"plaintext": nil,
		} {
			t.Run(name, func(t *testing.T) {
				conn := dialTLS(t, p.grpcAddr, cfg)
				_, err := pb.NewShareCoordinatorServiceClient(conn).FindCoordinator(ctx, &pb.FindCoordinatorRequest{Keys: []string{"sec:" + topicA + ":0"}})
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("call = %v, want Unavailable: no connection without a client certificate of the CA", err)
				}
			})
		}
	})

	t.Run("authorization per RPC", func(t *testing.T) {
		ok, denied := codes.OK, codes.PermissionDenied
		for name, tc := range map[string]struct {
			subject *pkix.Name
			want    map[string]codes.Code
		}{
			"broker (cluster_action)": {brokerSubject(), expectCodes(ok, denied, ok)},
			"admin (alter_configs)":   {adminSubject(), expectCodes(denied, ok, ok)},
			"other (describe only)":   {otherSubject(), expectCodes(denied, denied, ok)},
		} {
			t.Run(name, func(t *testing.T) {
				got := callEvery(ctx, dialTLS(t, p.grpcAddr, fx.clientTLS(t, tc.subject)))
				for method, want := range tc.want {
					if got[method] != want {
						t.Errorf("%s: %v, want %v", method, got[method], want)
					}
				}
			})
		}
		// Each denial is logged with the principal, the method and the missing permission.
		found := false
		for _, line := range strings.Split(p.log(), "\n") {
			var e map[string]any
			if json.Unmarshal([]byte(line), &e) == nil && e["msg"] == "call denied" &&
				e["principal"] == "User:CN=admin,O=Acme" && e["permission"] == "cluster_action" &&
				e["method"] == "/sharecoord.v1.ShareCoordinatorService/WriteShareGroupState" {
				found = true
			}
		}
		if !found {
			t.Fatalf("no denial log line for admin's WriteShareGroupState\n%s", p.log())
		}
	})

	t.Run("cluster service", func(t *testing.T) {
		// TransferLeader needs alter_cluster, which only admin holds; ListNodes describe_configs,
		// which everyone does. Past the authorizer a single node answers FAILED_PRECONDITION.
		for name, tc := range map[string]struct {
			subject        *pkix.Name
			transfer, list codes.Code
		}{
			"broker": {brokerSubject(), codes.PermissionDenied, codes.FailedPrecondition},
			"admin":  {adminSubject(), codes.FailedPrecondition, codes.FailedPrecondition},
		} {
			t.Run(name, func(t *testing.T) {
				c := pb.NewClusterServiceClient(dialTLS(t, p.grpcAddr, fx.clientTLS(t, tc.subject)))
				_, err := c.TransferLeader(ctx, &pb.TransferLeaderRequest{Partition: 0, NodeId: 1})
				if status.Code(err) != tc.transfer {
					t.Errorf("TransferLeader: %v, want %v", err, tc.transfer)
				}
				_, err = c.ListNodes(ctx, &pb.ListNodesRequest{})
				if status.Code(err) != tc.list {
					t.Errorf("ListNodes: %v, want %v", err, tc.list)
				}
				if tc.list == codes.FailedPrecondition && !strings.Contains(status.Convert(err).Message(), "--initial-cluster") {
					t.Errorf("ListNodes on a single node: %q does not say what it needs", status.Convert(err).Message())
				}
			})
		}
	})

	t.Run("metrics port over TLS", func(t *testing.T) {
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: fx.ca.Pool, ServerName: "localhost"}}}
		code, body := httpGet(t, client, "https://"+p.metricsAddr+"/metrics")
		if code != http.StatusOK || !strings.Contains(body, "sharecoord_tls_certificate_not_after_seconds") {
			t.Fatalf("GET /metrics over TLS: %d\n%.500s", code, body)
		}
		if code, _ := httpGet(t, client, "https://"+p.metricsAddr+"/readyz"); code != http.StatusOK {
			t.Fatalf("GET /readyz over TLS: %d", code)
		}
		code, body = httpGet(t, &http.Client{}, "http://"+p.metricsAddr+"/metrics")
		if code != http.StatusBadRequest || strings.Contains(body, "sharecoord_") {
			t.Fatalf("plain HTTP to the TLS metrics port: %d %q", code, body)
		}
		// A failed handshake is logged as JSON by the server's logger, not by Go's plain one.
		junk, err := net.Dial("tcp", p.metricsAddr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = junk.Write([]byte{0x16, 0x03, 0x01, 0x00, 0x01, 0x00})
		_ = junk.Close()
		waitForLog(t, p, regexp.MustCompile(`^\{.*"logger":"metrics-http".*TLS handshake error`))
	})

	t.Run("certificate rotation without restart", func(t *testing.T) {
		pid := p.cmd.Process.Pid
		rotated := fx.ca.Issue(t, pkix.Name{CommonName: "coordinatord-rotated", Organization: []string{"Acme"}}, true)
		testcert.WriteKeyPair(t, rotated, fx.certFile, fx.keyFile)
		if got := servedSerial(t, p.grpcAddr, fx.clientTLS(t, brokerSubject())); got != rotated.Leaf.SerialNumber.String() {
			t.Fatalf("served certificate serial %s after rotation, want %s", got, rotated.Leaf.SerialNumber)
		}
		// The metrics port serves it too, and gRPC works over a new connection.
		metricsConn, err := tls.Dial("tcp", p.metricsAddr, &tls.Config{RootCAs: fx.ca.Pool, ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		if got := metricsConn.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(rotated.Leaf.SerialNumber) != 0 {
			t.Fatalf("metrics port serves serial %s, want %s", got, rotated.Leaf.SerialNumber)
		}
		_ = metricsConn.Close()
		if got := callEvery(ctx, dialTLS(t, p.grpcAddr, fx.clientTLS(t, brokerSubject()))); got["WriteShareGroupState"] != codes.OK {
			t.Fatalf("write over a new connection after rotation: %v", got["WriteShareGroupState"])
		}

		// A broken replacement is refused and logged; the last good certificate stays in use.
		testcert.WriteAtomically(t, fx.certFile, []byte("not a certificate\n"))
		if got := servedSerial(t, p.grpcAddr, fx.clientTLS(t, brokerSubject())); got != rotated.Leaf.SerialNumber.String() {
			t.Fatalf("served serial %s after a broken replacement, want the previous %s", got, rotated.Leaf.SerialNumber)
		}
		waitForLog(t, p, regexp.MustCompile(`TLS reload failed`))
		// So is an expired one: clients would refuse it.
		testcert.WriteKeyPair(t, fx.ca.IssueExpired(t, pkix.Name{CommonName: "coordinatord-old"}), fx.certFile, fx.keyFile)
		if got := servedSerial(t, p.grpcAddr, fx.clientTLS(t, brokerSubject())); got != rotated.Leaf.SerialNumber.String() {
			t.Fatalf("served serial %s after an expired replacement, want the previous %s", got, rotated.Leaf.SerialNumber)
		}
		waitForLog(t, p, regexp.MustCompile(`TLS reload failed.*the certificate expired at`))
		// A renewal whose validity starts a moment from now (clock skew with its issuer) is
		// refused until then, and used from then on without any further change to the files.
		start := time.Now().Add(2 * time.Second).Truncate(time.Second)
		early := fx.ca.IssueValidFrom(t, pkix.Name{CommonName: "coordinatord-early"}, start)
		testcert.WriteKeyPair(t, early, fx.certFile, fx.keyFile)
		if got := servedSerial(t, p.grpcAddr, fx.clientTLS(t, brokerSubject())); got != rotated.Leaf.SerialNumber.String() {
			t.Fatalf("served serial %s before the renewal is valid, want the previous %s", got, rotated.Leaf.SerialNumber)
		}
		waitForLog(t, p, regexp.MustCompile(`TLS reload failed; the loaded certificate stays in use until the new one becomes valid.*the certificate is not valid before`))
		// Not a wait for an event: the renewal's validity starts at a time of the real clock, which
		// the server checks at the next connection (and the client too); only that time passing
		// makes it valid.
		time.Sleep(time.Until(start) + 100*time.Millisecond)
		if got := servedSerial(t, p.grpcAddr, fx.clientTLS(t, brokerSubject())); got != early.Leaf.SerialNumber.String() {
			t.Fatalf("served serial %s once the renewal is valid, want %s", got, early.Leaf.SerialNumber)
		}
		rotated = early

		// SIGHUP re-reads the files too; the process keeps running.
		again := fx.ca.Issue(t, pkix.Name{CommonName: "coordinatord-hup"}, true)
		testcert.WriteKeyPair(t, again, fx.certFile, fx.keyFile)
		if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitForLog(t, p, regexp.MustCompile(`TLS certificate reloaded.*"reason":"SIGHUP".*`+again.Leaf.SerialNumber.String()))
		if p.cmd.Process.Pid != pid {
			t.Fatal("the process was restarted")
		}
		select {
		case <-p.exited:
			t.Fatalf("SIGHUP stopped the server: %v\n%s", p.exitErr, p.log())
		default:
		}
		if got := servedSerial(t, p.grpcAddr, fx.clientTLS(t, brokerSubject())); got != again.Leaf.SerialNumber.String() {
			t.Fatalf("served serial %s after SIGHUP, want %s", got, again.Leaf.SerialNumber)
		}
	})

	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d after SIGTERM\n%s", code, p.log())
	}
}

func withALPN(cfg *tls.Config) *tls.Config {
	cfg.NextProtos = []string{"h2"}
	return cfg
}

// servedSerial returns the serial number of the certificate the server presents to a new
// connection.
func servedSerial(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, withALPN(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestUnauthenticatedClient: with client certificates only requested, a client without one
// connects, but every call that needs a permission answers UNAUTHENTICATED; health checks work.
func TestUnauthenticatedClient(t *testing.T) {
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	fx := newSecurityFixture(t)
	p := startSecureProc(t, t.TempDir(), fx.clientTLS(t, nil), fx.args("requested", authzArgs()...)...)
	got := callEvery(ctxT(t), p.conn)
	want := expectCodes(codes.Unauthenticated, codes.Unauthenticated, codes.Unauthenticated)
	for method, w := range want {
		if got[method] != w {
			t.Errorf("%s without a client certificate: %v, want %v", method, got[method], w)
		}
	}
	waitForLog(t, p, regexp.MustCompile(`call refused: client not authenticated`))
	// The same server authorizes a client that does present a certificate.
	if got := callEvery(ctxT(t), dialTLS(t, p.grpcAddr, fx.clientTLS(t, brokerSubject()))); got["ReadShareGroupState"] != codes.OK {
		t.Fatalf("with a certificate: %v", got["ReadShareGroupState"])
	}
}

// TestTLSWithoutClientAuth: TLS only encrypts; without authorization every call is allowed.
func TestTLSWithoutClientAuth(t *testing.T) {
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	fx := newSecurityFixture(t)
	p := startSecureProc(t, t.TempDir(), fx.clientTLS(t, nil), fx.args("none")...)
	for method, code := range callEvery(ctxT(t), p.conn) {
		if code != codes.OK {
			t.Errorf("%s: %v", method, code)
		}
	}
}

// TestSecurityConfigErrors: security settings that do not fit together, or files that do not
// load, stop start-up with exit status 2 and a line naming the keys and the fix.
func TestSecurityConfigErrors(t *testing.T) {
	fx := newSecurityFixture(t)
	other := testcert.NewCA(t, "other")
	mismatchedKey := filepath.Join(fx.dir, "other-key.pem")
	testcert.WriteKeyPair(t, other.Issue(t, pkix.Name{CommonName: "x"}, true), filepath.Join(fx.dir, "other.pem"), mismatchedKey)
	expiredCert, expiredKey := filepath.Join(fx.dir, "expired.pem"), filepath.Join(fx.dir, "expired-key.pem")
	testcert.WriteKeyPair(t, fx.ca.IssueExpired(t, pkix.Name{CommonName: "old"}), expiredCert, expiredKey)
	emptyCA := filepath.Join(fx.dir, "empty-ca.pem")
	if err := os.WriteFile(emptyCA, []byte("no certificates here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := func(kv ...string) []string {
		var args []string
		for _, s := range kv {
			args = append(args, "--override", s)
		}
		return args
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"authorization without TLS", o("authorizer.enabled=true"),
			[]string{"authorizer.enabled=true needs client certificates", "tls.client.auth=required"}},
		{"authorization without client certificates", append(fx.args("none"), o("authorizer.enabled=true")...),
			[]string{"authorizer.enabled=true needs client certificates"}},
		{"principals without authorization", o("authorizer.cluster.action.principals=User:CN=broker-1"),
			[]string{"authorizer.cluster.action.principals is set but authorizer.enabled=false"}},
		{"TLS without a certificate", o("tls.enabled=true"), []string{"tls.enabled=true needs tls.cert.file and tls.key.file"}},
		{"client auth without a CA", o("tls.enabled=true", "tls.cert.file="+fx.certFile, "tls.key.file="+fx.keyFile, "tls.client.auth=required"),
			[]string{"tls.client.auth=required needs tls.client.ca.file"}},
		{"a CA without client auth", o("tls.enabled=true", "tls.cert.file="+fx.certFile, "tls.key.file="+fx.keyFile, "tls.client.ca.file="+fx.cas),
			[]string{"tls.client.ca.file is set but tls.client.auth=none"}},
		{"certificate files without TLS", o("tls.cert.file=" + fx.certFile), []string{"tls.cert.file is set but tls.enabled=false"}},
		{"client auth without TLS", o("tls.client.auth=requested"), []string{"tls.client.auth=requested needs TLS"}},
		{"metrics TLS without TLS", o("metrics.tls.enabled=true"), []string{"metrics.tls.enabled=true needs tls.enabled=true"}},
		{"missing certificate file", o("tls.enabled=true", "tls.cert.file="+filepath.Join(fx.dir, "absent.pem"), "tls.key.file="+fx.keyFile),
			[]string{"tls.cert.file=" + filepath.Join(fx.dir, "absent.pem"), "no such file"}},
		{"expired certificate", o("tls.enabled=true", "tls.cert.file="+expiredCert, "tls.key.file="+expiredKey),
			[]string{"tls.cert.file=" + expiredCert, "the certificate expired at", "renew it"}},
		{"key of another certificate", o("tls.enabled=true", "tls.cert.file="+fx.certFile, "tls.key.file="+mismatchedKey),
			[]string{"tls.key.file=" + mismatchedKey, "does not match"}},
		{"client CA file without certificates", o("tls.enabled=true", "tls.cert.file="+fx.certFile, "tls.key.file="+fx.keyFile,
			"tls.client.auth=required", "tls.client.ca.file="+emptyCA),
			[]string{"tls.client.ca.file=" + emptyCA + ": the file holds no PEM certificate"}},
		{"bad principal", o("authorizer.enabled=true", "authorizer.alter.configs.principals=CN=admin"),
			[]string{"authorizer.alter.configs.principals", `"CN=admin"`, "User:<distinguished name>"}},
		{"unknown client auth mode", o("tls.client.auth=optional"), []string{"tls.client.auth=optional", "none, requested, required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantBadConfig(t, t.TempDir(), nil, tc.args, tc.want...)
		})
	}
}
