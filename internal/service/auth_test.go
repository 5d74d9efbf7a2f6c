package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/principal"
	"github.com/coordinatord/coordinatord/internal/shard"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// stubPartition answers every operation with success and no state.
type stubPartition struct{}

func (stubPartition) Initialize(context.Context, shard.InitializeRequest) shard.Result {
	return shard.Result{}
}
func (stubPartition) Read(context.Context, shard.ReadRequest) shard.ReadResult {
	return shard.ReadResult{StartOffset: -1}
}
func (stubPartition) Write(context.Context, shard.WriteRequest) shard.Result   { return shard.Result{} }
func (stubPartition) Delete(context.Context, shard.DeleteRequest) shard.Result { return shard.Result{} }
func (stubPartition) ReadSummary(context.Context, shard.SummaryRequest) shard.SummaryResult {
	return shard.SummaryResult{}
}

// stubConfigs answers every resource with success.
type stubConfigs struct{}

func (stubConfigs) IncrementalAlterConfigs(_ context.Context, rs []groupcfg.AlterResource, _ bool) []groupcfg.AlterResult {
	out := make([]groupcfg.AlterResult, len(rs))
	for i, r := range rs {
		out[i] = groupcfg.AlterResult{Type: r.Type, Name: r.Name}
	}
	return out
}

func (stubConfigs) DescribeConfigs(rs []groupcfg.DescribeResource, _, _ bool) []groupcfg.DescribeResult {
	out := make([]groupcfg.DescribeResult, len(rs))
	for i, r := range rs {
		out[i] = groupcfg.DescribeResult{Type: r.Type, Name: r.Name}
	}
	return out
}

// authFixture is a TLS gRPC server with an Authorizer, its CA and its log.
type authFixture struct {
	addr   string
	ca     *testCA
	logs   *observer.ObservedLogs
	server tls.Certificate
}

func startAuthServer(t *testing.T, clientAuth tls.ClientAuthType, grants AuthorizerConfig) *authFixture {
	t.Helper()
	ca := newTestCA(t, "test CA")
	fx := &authFixture{ca: ca, server: ca.issue(t, pkix.Name{CommonName: "coordinatord"}, true)}
	core, logs := observer.New(zap.InfoLevel)
	fx.logs = logs
	logger := zap.New(core)
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{fx.server}, ClientAuth: clientAuth, ClientCAs: ca.pool})
	srv := NewServer(logger, NewStateServer([]Partition{stubPartition{}}, StateOptions{}), NewConfigServer(stubConfigs{}, ConfigOptions{}),
		ServerOptions{Credentials: creds, Authorize: NewAuthorizer(logger, grants).Unary()})
	srv.SetServing(true)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fx.addr = lis.Addr().String()
	done := make(chan error, 1)
	go func() { done <- srv.GRPC.Serve(lis) }()
	t.Cleanup(func() {
		srv.GRPC.Stop()
		<-done
	})
	return fx
}

// dial connects with a client certificate for subject (none when subject is nil).
func (fx *authFixture) dial(t *testing.T, subject *pkix.Name) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{RootCAs: fx.ca.pool, ServerName: "localhost"}
	if subject != nil {
		cfg.Certificates = []tls.Certificate{fx.ca.issue(t, *subject, false)}
	}
	conn, err := grpc.NewClient(fx.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// rpcCalls makes one call of every method on conn, by method name.
func rpcCalls(ctx context.Context, conn *grpc.ClientConn) map[string]func() error {
	st, cfg, h := pb.NewShareCoordinatorServiceClient(conn), pb.NewConfigServiceClient(conn), healthpb.NewHealthClient(conn)
	return map[string]func() error{
		"Initialize": func() error { _, err := st.InitializeShareGroupState(ctx, initReq("g", topicA, 0, 1, 0)); return err },
		"Read":       func() error { _, err := st.ReadShareGroupState(ctx, readReq("g", topicA, 0, 1)); return err },
		"Write":      func() error { _, err := st.WriteShareGroupState(ctx, writeReq("g", topicA, 0, 1, 1, 0)); return err },
		"Delete": func() error {
			_, err := st.DeleteShareGroupState(ctx, &pb.DeleteShareGroupStateRequest{GroupId: "g",
				Topics: []*pb.DeleteStateTopic{{TopicId: topicA, Partitions: []*pb.DeleteStatePartition{{Partition: 0}}}}})
			return err
		},
		"Summary": func() error {
			_, err := st.ReadShareGroupStateSummary(ctx, &pb.ReadShareGroupStateSummaryRequest{GroupId: "g",
				Topics: []*pb.ReadStateSummaryTopic{{TopicId: topicA, Partitions: []*pb.ReadStateSummaryPartition{{Partition: 0}}}}})
			return err
		},
		"FindCoordinator": func() error {
			_, err := st.FindCoordinator(ctx, &pb.FindCoordinatorRequest{Keys: []string{"g:" + topicA + ":0"}})
			return err
		},
		"Alter": func() error {
			_, err := cfg.IncrementalAlterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{Resources: []*pb.AlterConfigsResource{
				alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "g", pb.ConfigOperation_CONFIG_OPERATION_DELETE, snapshotOverride, nil)}})
			return err
		},
		"Describe": func() error {
			_, err := cfg.DescribeConfigs(ctx, &pb.DescribeConfigsRequest{Resources: []*pb.DescribeConfigsResource{
				{ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: "g"}}})
			return err
		},
		"Health": func() error { _, err := h.Check(ctx, &healthpb.HealthCheckRequest{}); return err },
	}
}

// stateMethods names the ShareCoordinatorService calls of rpcCalls.
func stateMethods() []string {
	return []string{"Initialize", "Read", "Write", "Delete", "Summary", "FindCoordinator"}
}

// TestAuthorizationPerRPC checks every method for clients holding different permissions, a client
// without a certificate (client auth "requested") and the log lines of refusals.
func TestAuthorizationPerRPC(t *testing.T) {
	broker := pkix.Name{CommonName: "broker-1", Organization: []string{"Acme"}}
	admin := pkix.Name{CommonName: "admin", Organization: []string{"Acme"}}
	other := pkix.Name{CommonName: "someone", Organization: []string{"Elsewhere"}}
	fx := startAuthServer(t, tls.VerifyClientCertIfGiven, AuthorizerConfig{
		ClusterAction:   []string{"User:CN=broker-1,O=Acme"},
		AlterConfigs:    []string{"User:CN=admin,O=Acme"},
		DescribeConfigs: []string{principal.Any},
	})
	ok, denied, unauth := codes.OK, codes.PermissionDenied, codes.Unauthenticated
	want := func(state, alter, describe codes.Code) map[string]codes.Code {
		m := map[string]codes.Code{"Alter": alter, "Describe": describe, "Health": codes.OK}
		for _, s := range stateMethods() {
			m[s] = state
		}
		return m
	}
	clients := []struct {
		name    string
		subject *pkix.Name
		want    map[string]codes.Code
	}{
		{"broker", &broker, want(ok, denied, ok)},
		{"admin", &admin, want(denied, ok, ok)},
		{"other", &other, want(denied, denied, ok)},
		{"no certificate", nil, want(unauth, unauth, unauth)},
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			calls := rpcCalls(ctxT(t), fx.dial(t, c.subject))
			for method, call := range calls {
				if got := status.Code(call()); got != c.want[method] {
					t.Errorf("%s: %v, want %v", method, got, c.want[method])
				}
			}
		})
	}
	denials := fx.logs.FilterMessage("call denied").All()
	if len(denials) == 0 {
		t.Fatal("no denial was logged")
	}
	found := false
	for _, e := range denials {
		f := e.ContextMap()
		if f["principal"] == "User:CN=admin,O=Acme" && f["permission"] == "cluster_action" &&
			f["method"] == "/sharecoord.v1.ShareCoordinatorService/WriteShareGroupState" && f["peer"] != "" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no denial log line for admin's Write naming principal, permission, method and peer: %v", denials)
	}
	if n := fx.logs.FilterMessage("call refused: client not authenticated").Len(); n != 8 {
		t.Fatalf("%d unauthenticated refusals logged, want 8", n)
	}
}

// TestRequiredClientCertificate: with client auth required, a client without a certificate, or
// with one from another CA, cannot even connect; a plaintext client neither.
func TestRequiredClientCertificate(t *testing.T) {
	fx := startAuthServer(t, tls.RequireAndVerifyClientCert, AuthorizerConfig{ClusterAction: []string{principal.Any}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stranger := newTestCA(t, "other CA").issue(t, pkix.Name{CommonName: "broker-1"}, false)
	for name, creds := range map[string]credentials.TransportCredentials{
		"no certificate":   credentials.NewTLS(&tls.Config{RootCAs: fx.ca.pool, ServerName: "localhost"}),
		"foreign CA":       credentials.NewTLS(&tls.Config{RootCAs: fx.ca.pool, ServerName: "localhost", Certificates: []tls.Certificate{stranger}}),
		"plaintext":        insecure.NewCredentials(),
		"untrusted server": credentials.NewTLS(&tls.Config{RootCAs: newTestCA(t, "x").pool, ServerName: "localhost"}),
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := grpc.NewClient(fx.addr, grpc.WithTransportCredentials(creds))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, err = pb.NewShareCoordinatorServiceClient(conn).FindCoordinator(ctx, &pb.FindCoordinatorRequest{Keys: []string{"g:" + topicA + ":0"}})
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("call = %v, want Unavailable (no connection)", err)
			}
		})
	}
	good := fx.dial(t, &pkix.Name{CommonName: "anyone"})
	if _, err := pb.NewShareCoordinatorServiceClient(good).FindCoordinator(ctx, &pb.FindCoordinatorRequest{Keys: []string{"g:" + topicA + ":0"}}); err != nil {
		t.Fatalf("with a certificate of the CA: %v", err)
	}
}

func TestRequiredPermission(t *testing.T) {
	a := NewAuthorizer(nil, AuthorizerConfig{})
	for _, m := range pb.ShareCoordinatorService_ServiceDesc.Methods {
		if p, ok := a.methods["/sharecoord.v1.ShareCoordinatorService/"+m.MethodName]; !ok || p != PermissionClusterAction {
			t.Errorf("%s: %v %v", m.MethodName, p, ok)
		}
	}
	for _, m := range pb.ConfigService_ServiceDesc.Methods {
		p, ok := a.methods["/sharecoord.v1.ConfigService/"+m.MethodName]
		if !ok || (p != PermissionAlterConfigs && p != PermissionDescribeConfigs) {
			t.Errorf("%s: %v %v", m.MethodName, p, ok)
		}
	}
	want := map[string]Permission{"ListNodes": PermissionDescribeConfigs, "TransferLeader": PermissionAlterCluster,
		"AddNode": PermissionAlterCluster, "RemoveNode": PermissionAlterCluster, "ImportRecords": PermissionAlterCluster}
	for _, m := range pb.ClusterService_ServiceDesc.Methods {
		if p, ok := a.methods["/sharecoord.v1.ClusterService/"+m.MethodName]; !ok || p != want[m.MethodName] {
			t.Errorf("%s: %v %v, want %v", m.MethodName, p, ok, want[m.MethodName])
		}
	}
	if _, ok := a.methods["/grpc.health.v1.Health/Check"]; ok {
		t.Error("health needs a permission")
	}
	// A method the authorizer does not know is refused, even for a principal holding everything.
	a = NewAuthorizer(nil, AuthorizerConfig{ClusterAction: []string{principal.Any}, AlterConfigs: []string{principal.Any}, DescribeConfigs: []string{principal.Any}})
	unknown := "/sharecoord.v1.ShareCoordinatorService/Unknown"
	if err := a.authorize(context.Background(), unknown); status.Code(err) != codes.Unauthenticated {
		t.Errorf("unknown method without a principal: %v", err)
	}
	leaf := newTestCA(t, "ca").issue(t, pkix.Name{CommonName: "c"}, false).Leaf
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{}, AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{
		PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}}})
	if err := a.authorize(ctx, unknown); status.Code(err) != codes.PermissionDenied {
		t.Errorf("unknown method with a principal: %v", err)
	}
	if err := a.authorize(ctx, "/sharecoord.v1.ConfigService/DescribeConfigs"); err != nil {
		t.Errorf("known method with a principal: %v", err)
	}
}

// ctxStream is a grpc.ServerStream that only has a context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }

// TestStreamAuthorization: health watches and server reflection are open to every client; any
// other stream is refused, as an unknown unary method is.
func TestStreamAuthorization(t *testing.T) {
	a := NewAuthorizer(nil, AuthorizerConfig{ClusterAction: []string{principal.Any}, AlterConfigs: []string{principal.Any}, DescribeConfigs: []string{principal.Any}})
	leaf := newTestCA(t, "ca").issue(t, pkix.Name{CommonName: "c"}, false).Leaf
	withPrincipal := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{}, AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{
		PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}}})
	for _, tc := range []struct {
		method string
		ctx    context.Context
		want   codes.Code
	}{
		{"/grpc.health.v1.Health/Watch", context.Background(), codes.OK},
		{"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", context.Background(), codes.OK},
		{"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", context.Background(), codes.OK},
		{"/sharecoord.v1.ShareCoordinatorService/SomeStream", context.Background(), codes.Unauthenticated},
		{"/sharecoord.v1.ShareCoordinatorService/SomeStream", withPrincipal, codes.PermissionDenied},
	} {
		called := false
		err := a.Stream()(nil, ctxStream{ctx: tc.ctx}, &grpc.StreamServerInfo{FullMethod: tc.method},
			func(any, grpc.ServerStream) error { called = true; return nil })
		if status.Code(err) != tc.want || called != (tc.want == codes.OK) {
			t.Errorf("%s: %v (handler called %v), want %v", tc.method, err, called, tc.want)
		}
	}
}

// A subject with a semicolon can be granted: its principal escapes it ("\;", RFC 2253), and the
// list keeps an escaped semicolon inside the entry.
func TestGrantSubjectWithSemicolon(t *testing.T) {
	list, err := principal.ParseList(`User:CN=a\;b,O=Acme; User:CN=c`)
	if err != nil {
		t.Fatal(err)
	}
	a := NewAuthorizer(nil, AuthorizerConfig{ClusterAction: list})
	ca := newTestCA(t, "ca")
	for _, tc := range []struct {
		subject pkix.Name
		allowed bool
	}{
		{pkix.Name{CommonName: "a;b", Organization: []string{"Acme"}}, true},
		{pkix.Name{CommonName: "c"}, true},
		{pkix.Name{CommonName: "a"}, false},
		{pkix.Name{CommonName: "b", Organization: []string{"Acme"}}, false},
	} {
		leaf := ca.issue(t, tc.subject, false).Leaf
		ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{}, AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{
			PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}}})
		err := a.authorize(ctx, "/sharecoord.v1.ShareCoordinatorService/WriteShareGroupState")
		if (err == nil) != tc.allowed {
			p, _ := principal.FromContext(ctx)
			t.Errorf("principal %q with grants %q: %v; want allowed=%v", p, list, err, tc.allowed)
		}
	}
}

// Kafka's wildcard principal User:* grants like *: every authenticated client, nobody without a
// principal.
func TestKafkaWildcardPrincipal(t *testing.T) {
	list, err := principal.ParseList("User:*")
	if err != nil {
		t.Fatal(err)
	}
	a := NewAuthorizer(nil, AuthorizerConfig{ClusterAction: list})
	leaf := newTestCA(t, "ca").issue(t, pkix.Name{CommonName: "anyone", Organization: []string{"Acme"}}, false).Leaf
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{}, AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{
		PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}}})
	const method = "/sharecoord.v1.ShareCoordinatorService/ReadShareGroupState"
	if err := a.authorize(ctx, method); err != nil {
		t.Errorf("User:* with a principal: %v", err)
	}
	if err := a.authorize(context.Background(), method); status.Code(err) != codes.Unauthenticated {
		t.Errorf("User:* without a principal: %v, want UNAUTHENTICATED", err)
	}
}

// TestRefusalLogIsSampled: a client that repeats a refused call cannot flood the log: the
// authorizer's warnings are sampled like the call log (every one of the first 100 a second, then
// one in 100).
func TestRefusalLogIsSampled(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	unary := NewAuthorizer(zap.New(core), AuthorizerConfig{}).Unary()
	info := &grpc.UnaryServerInfo{FullMethod: "/sharecoord.v1.ShareCoordinatorService/WriteShareGroupState"}
	for range 10000 {
		if _, err := unary(context.Background(), nil, info, nil); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("unauthenticated call: %v", err)
		}
	}
	if n := logs.FilterMessage("call refused: client not authenticated").Len(); n < 100 || n > 300 {
		t.Fatalf("10000 refused calls logged %d lines, want 100 and then one in 100", n)
	}
}
