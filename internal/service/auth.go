package service

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"

	"github.com/coordinatord/coordinatord/internal/principal"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// Permission is an operation a principal may be allowed to perform. The names are Kafka's ACL
// operations for the corresponding Kafka requests.
type Permission string

// The permissions the API requires.
const (
	// PermissionClusterAction is required by every ShareCoordinatorService method (Kafka checks
	// CLUSTER_ACTION on the cluster for the share-state RPCs and for FindCoordinator of share keys).
	PermissionClusterAction Permission = "cluster_action"
	// PermissionAlterConfigs is required by ConfigService.IncrementalAlterConfigs.
	PermissionAlterConfigs Permission = "alter_configs"
	// PermissionDescribeConfigs is required by ConfigService.DescribeConfigs.
	PermissionDescribeConfigs Permission = "describe_configs"
	// PermissionAlterCluster is required by ClusterService.TransferLeader, AddNode, RemoveNode and
	// ImportRecords (a node started with --join calls AddNode itself), as Kafka requires alter on
	// the cluster to move partitions' replicas and leaders.
	PermissionAlterCluster Permission = "alter_cluster"
)

// AuthorizerConfig lists, per permission, the principals holding it: principal names as
// principal.FromCertificate forms them ("User:CN=..."), or principal.Any or principal.AnyUser for
// every authenticated client. An empty list grants the permission to nobody.
type AuthorizerConfig struct {
	ClusterAction   []string
	AlterConfigs    []string
	DescribeConfigs []string
	AlterCluster    []string
}

// Authorizer decides, per unary call, whether the client may make it. The principal is the
// client's verified certificate (principal.FromContext). A call without a principal is refused
// with codes.Unauthenticated, a principal without the method's permission with
// codes.PermissionDenied; both are logged. The health service needs no permission, so that
// probes keep working. Methods the Authorizer does not know are refused. It is immutable and safe
// for concurrent use.
type Authorizer struct {
	logger  *zap.Logger
	grants  map[Permission]grant
	methods map[string]Permission // full method name → required permission
	open    map[string]bool       // services callable without a principal
}

// grant is the set of principals holding one permission.
type grant struct {
	anyone bool
	names  map[string]struct{}
}

func newGrant(principals []string) grant {
	g := grant{names: make(map[string]struct{}, len(principals))}
	for _, p := range principals {
		if p == principal.Any || p == principal.AnyUser {
			g.anyone = true
			continue
		}
		g.names[p] = struct{}{}
	}
	return g
}

func (g grant) allows(name string) bool {
	if g.anyone {
		return true
	}
	_, ok := g.names[name]
	return ok
}

// NewAuthorizer returns an Authorizer granting the permissions of cfg. Its refusals are logged at
// warn, sampled per message (every one of the first 100 a second, then one in 100), so that a
// client repeating a refused call cannot flood the log.
func NewAuthorizer(logger *zap.Logger, cfg AuthorizerConfig) *Authorizer {
	if logger == nil {
		logger = zap.NewNop()
	}
	a := &Authorizer{
		logger: logger.WithOptions(zap.WrapCore(func(core zapcore.Core) zapcore.Core {
			return zapcore.NewSamplerWithOptions(core, time.Second, 100, 100)
		})),
		grants: map[Permission]grant{
			PermissionClusterAction:   newGrant(cfg.ClusterAction),
			PermissionAlterConfigs:    newGrant(cfg.AlterConfigs),
			PermissionDescribeConfigs: newGrant(cfg.DescribeConfigs),
			PermissionAlterCluster:    newGrant(cfg.AlterCluster),
		},
		methods: make(map[string]Permission),
		open: map[string]bool{
			healthpb.Health_ServiceDesc.ServiceName:                    true,
			reflectionv1.ServerReflection_ServiceDesc.ServiceName:      true,
			reflectionv1alpha.ServerReflection_ServiceDesc.ServiceName: true,
		},
	}
	for _, m := range pb.ShareCoordinatorService_ServiceDesc.Methods {
		a.methods[fullMethod(pb.ShareCoordinatorService_ServiceDesc.ServiceName, m.MethodName)] = PermissionClusterAction
	}
	cfgSvc := pb.ConfigService_ServiceDesc.ServiceName
	a.methods[fullMethod(cfgSvc, "IncrementalAlterConfigs")] = PermissionAlterConfigs
	a.methods[fullMethod(cfgSvc, "DescribeConfigs")] = PermissionDescribeConfigs
	clusterSvc := pb.ClusterService_ServiceDesc.ServiceName
	a.methods[fullMethod(clusterSvc, "ListNodes")] = PermissionDescribeConfigs
	for _, m := range []string{"TransferLeader", "AddNode", "RemoveNode", "ImportRecords"} {
		a.methods[fullMethod(clusterSvc, m)] = PermissionAlterCluster
	}
	return a
}

func fullMethod(service, method string) string { return "/" + service + "/" + method }

// Unary returns the interceptor to install as ServerOptions.Authorize.
func (a *Authorizer) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := a.authorize(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream returns the interceptor to install as ServerOptions.AuthorizeStream. The streaming
// methods served today (health Watch, server reflection) need no permission; any other stream
// is refused like an unknown unary method, so that a streaming RPC added later is not open to
// every client.
func (a *Authorizer) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := a.authorize(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// authorize returns nil when the client of ctx may call method, else the status error to answer.
func (a *Authorizer) authorize(ctx context.Context, method string) error {
	if service, _ := splitFullMethod(method); a.open[service] {
		return nil
	}
	name, authenticated := principal.FromContext(ctx)
	perm, known := a.methods[method]
	switch {
	case !authenticated:
		a.logger.Warn("call refused: client not authenticated",
			zap.String("method", method), zap.String("peer", peerAddr(ctx)))
		return status.Errorf(codes.Unauthenticated,
			"%s needs an authenticated client: connect with TLS and present a client certificate signed by the server's client CA", method)
	case !known:
		a.logger.Warn("call denied: no permission is defined for the method",
			zap.String("principal", name), zap.String("method", method), zap.String("peer", peerAddr(ctx)))
		return status.Errorf(codes.PermissionDenied, "%s is not allowed for any principal", method)
	case !a.grants[perm].allows(name):
		a.logger.Warn("call denied",
			zap.String("principal", name), zap.String("method", method),
			zap.String("permission", string(perm)), zap.String("peer", peerAddr(ctx)))
		return status.Errorf(codes.PermissionDenied, "principal %s lacks the %s permission that %s requires", name, perm, method)
	}
	return nil
}

// peerAddr returns the address of the client of the call in ctx, or "" when it is not known.
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// String describes the grants, one permission per clause, for the start-up log.
func (c AuthorizerConfig) String() string {
	return fmt.Sprintf("cluster_action=%s alter_configs=%s describe_configs=%s alter_cluster=%s",
		strings.Join(c.ClusterAction, ";"), strings.Join(c.AlterConfigs, ";"), strings.Join(c.DescribeConfigs, ";"),
		strings.Join(c.AlterCluster, ";"))
}
