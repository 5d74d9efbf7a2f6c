package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/validator"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// ServerOptions configures the gRPC server. Zero values mean gRPC's defaults, except for
// KeepaliveMinTime.
type ServerOptions struct {
	// Registerer receives the gRPC server metrics (grpc_server_handled_total, ...); nil → none.
	Registerer prometheus.Registerer
	// MaxRecvMsgBytes bounds one request message.
	MaxRecvMsgBytes int
	// MaxConcurrentStreams bounds the calls in flight on one client connection.
	MaxConcurrentStreams uint32
	// KeepaliveMinTime is the shortest ping interval a client may use; faster clients are
	// disconnected (keepalive enforcement). Zero permits any interval (not gRPC's default).
	KeepaliveMinTime time.Duration
	// KeepaliveTime and KeepaliveTimeout: the server pings an idle connection after
	// KeepaliveTime and closes it if no answer comes within KeepaliveTimeout.
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration
	// HandshakeTimeout bounds how long a new connection may take to complete its TLS handshake
	// and HTTP/2 preface (0: gRPC's 120 s); a client that sends nothing holds its connection no
	// longer.
	HandshakeTimeout time.Duration
	// MaxConnectionIdle closes, with a GOAWAY, a connection that has had no call in flight for
	// this long (0: never).
	MaxConnectionIdle time.Duration
	// Credentials secure the transport; nil serves plaintext.
	Credentials credentials.TransportCredentials
	// Authorize, when set, runs after logging and before validation on every unary call; it
	// returns a gRPC status error to refuse the call. AuthorizeStream does the same for streams.
	Authorize       grpc.UnaryServerInterceptor
	AuthorizeStream grpc.StreamServerInterceptor
}

// Server is the gRPC server of coordinatord with its health service.
type Server struct {
	GRPC   *grpc.Server
	health *health.Server
	calls  unaryCalls
}

// unaryCalls counts the calls being handled that are not streams, so that a drain can tell when
// only streams (health watches, which never end by themselves) are left. A call counts from the
// moment its headers arrive (a stats handler's Begin) to its end, including while its request
// message is still being received, which no interceptor sees; a streaming call stops counting
// once the stream interceptors run it.
type unaryCalls struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil until someone waits
	// counted is a test hook: nil, or signalled without blocking after each change of n.
	counted chan<- struct{}
}

func (u *unaryCalls) add(d int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n += d; u.n == 0 && u.idle != nil {
		close(u.idle)
		u.idle = nil
	}
	if u.counted != nil {
		select {
		case u.counted <- struct{}{}:
		default:
		}
	}
}

// HandleRPC counts every call from its start to its end (stats.Handler).
func (u *unaryCalls) HandleRPC(_ context.Context, s stats.RPCStats) {
	switch s.(type) {
	case *stats.Begin:
		u.add(1)
	case *stats.End:
		u.add(-1)
	}
}

func (u *unaryCalls) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (u *unaryCalls) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (u *unaryCalls) HandleConn(context.Context, stats.ConnStats)                       {}

// stream takes a streaming call out of the count while it runs.
func (u *unaryCalls) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	u.add(-1)
	defer u.add(1)
	return handler(srv, ss)
}

// done returns a channel closed once no unary call is being handled.
func (u *unaryCalls) done() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	ch := make(chan struct{})
	if u.n == 0 {
		close(ch)
	} else {
		u.idle = ch
	}
	return ch
}

// Health service names reported by Server: the overall status ("") and one per API service.
var healthServices = []string{"", pb.ShareCoordinatorService_ServiceDesc.ServiceName, pb.ConfigService_ServiceDesc.ServiceName}

// streamWorkers is the number of goroutines kept to run calls. Without them gRPC starts a
// goroutine per call, whose stack then grows to what a call needs, copied at every step: 6 % of
// the server's CPU at 64 writes in flight (docs/benchmarks.md, section 5). A call that finds
// every worker busy gets a goroutine of its own, as without them. Idle workers keep their
// stacks, a few KiB each. grpc-go marks the option experimental; the service tests, which check
// for leaked goroutines, cover its start and stop.
const streamWorkers = 256

// NewServer builds the gRPC server: interceptors outermost first are Prometheus metrics, logging
// (health checks skipped), authorization (if configured), request validation, and panic recovery
// (which logs the stack and answers codes.Internal without leaking it). Requests are decoded so
// that a string field that is not valid UTF-8 reaches validation and is refused with
// INVALID_ARGUMENT naming the field (see codec). It registers state, cfg, the health service
// (NOT_SERVING until SetServing(true)) and server reflection.
func NewServer(logger *zap.Logger, state pb.ShareCoordinatorServiceServer, cfg pb.ConfigServiceServer, opts ServerOptions) *Server {
	if logger == nil {
		logger = zap.NewNop()
	}
	srvMetrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets(prometheus.ExponentialBuckets(0.0001, 2, 16)),
	))
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(srvMetrics)
	}

	callLogger := sampledBelowWarn(logger.Named("grpc"))
	rpcLogger := interceptorLogger(callLogger)
	logOpts := []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithLevels(codeToLevel),
	}
	notHealth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return c.Service != healthpb.Health_ServiceDesc.ServiceName
	})
	recoveryOpt := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		logger.Error("panic while handling a call", zap.String("panic", fmt.Sprint(p)), zap.Stack("stack"))
		return status.Error(codes.Internal, "internal error")
	})

	s := &Server{health: health.NewServer()}
	unary := []grpc.UnaryServerInterceptor{
		srvMetrics.UnaryServerInterceptor(),
		selector.UnaryServerInterceptor(unaryCallLogger(callLogger), notHealth),
	}
	if opts.Authorize != nil {
		unary = append(unary, opts.Authorize)
	}
	unary = append(unary, limitElements, validator.UnaryServerInterceptor(), recovery.UnaryServerInterceptor(recoveryOpt))
	stream := []grpc.StreamServerInterceptor{
		s.calls.stream,
		srvMetrics.StreamServerInterceptor(),
		selector.StreamServerInterceptor(logging.StreamServerInterceptor(rpcLogger, logOpts...), notHealth),
	}
	if opts.AuthorizeStream != nil {
		stream = append(stream, opts.AuthorizeStream)
	}
	stream = append(stream, recovery.StreamServerInterceptor(recoveryOpt))

	serverOpts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(newCodec()), // invalid UTF-8 → INVALID_ARGUMENT naming the field (codec.go)
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.StatsHandler(&s.calls),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime(opts.KeepaliveMinTime), PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: opts.KeepaliveTime, Timeout: opts.KeepaliveTimeout, MaxConnectionIdle: opts.MaxConnectionIdle}),
		grpc.NumStreamWorkers(streamWorkers),
		grpc.MaxHeaderListSize(MaxHeaderListBytes),
	}
	if opts.MaxRecvMsgBytes > 0 {
		serverOpts = append(serverOpts, grpc.MaxRecvMsgSize(opts.MaxRecvMsgBytes))
	}
	if opts.MaxConcurrentStreams > 0 {
		serverOpts = append(serverOpts, grpc.MaxConcurrentStreams(opts.MaxConcurrentStreams))
	}
	if opts.Credentials != nil {
		serverOpts = append(serverOpts, grpc.Creds(opts.Credentials))
	}
	if opts.HandshakeTimeout > 0 {
		serverOpts = append(serverOpts, grpc.ConnectionTimeout(opts.HandshakeTimeout))
	}

	s.GRPC = grpc.NewServer(serverOpts...)
	s.GRPC.RegisterService(stateServiceDesc(state), state)
	pb.RegisterConfigServiceServer(s.GRPC, cfg)
	healthpb.RegisterHealthServer(s.GRPC, s.health)
	reflection.Register(s.GRPC)
	srvMetrics.InitializeMetrics(s.GRPC)
	s.SetServing(false)
	return s
}

// SetServing sets the health of every reported service to SERVING or NOT_SERVING.
func (s *Server) SetServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, name := range healthServices {
		s.health.SetServingStatus(name, st)
	}
}

// Shutdown marks the server NOT_SERVING for good, stops accepting calls and waits for the unary
// calls in flight to finish; streams still open then (health watches, which never end by
// themselves) are closed. When ctx ends first, every remaining call is cancelled. It reports
// whether the unary calls all finished by themselves.
func (s *Server) Shutdown(ctx context.Context) (drained bool) {
	s.health.Shutdown()
	done := make(chan struct{})
	go func() {
		s.GRPC.GracefulStop()
		close(done)
	}()
	idle := s.calls.done()
	for {
		select {
		case <-done:
			return true
		case <-ctx.Done():
			s.GRPC.Stop()
			<-done
			return false
		case <-idle:
			// No unary call is running. A call whose request is still arriving gets a moment to
			// start; if none did, what is left are streams.
			select {
			case <-done:
				return true
			case <-time.After(idleGrace):
			}
			if idle = s.calls.done(); isClosed(idle) {
				s.GRPC.Stop()
				<-done
				return true
			}
		}
	}
}

// idleGrace is how long a drain waits, once no unary call runs, for a call still being received
// before it closes the remaining streams.
const idleGrace = 200 * time.Millisecond

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// codeToLevel logs successful calls at debug, client faults at info and server faults at warn
// or error, so busy servers log what matters.
func codeToLevel(c codes.Code) logging.Level {
	switch c {
	case codes.OK:
		return logging.LevelDebug
	case codes.Canceled, codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.Unauthenticated, codes.FailedPrecondition, codes.OutOfRange:
		return logging.LevelInfo
	case codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Unavailable:
		return logging.LevelWarn
	default:
		return logging.LevelError
	}
}

// sampledBelowWarn samples entries below WARN (per-call noise under load) and never samples
// warnings and errors.
func sampledBelowWarn(l *zap.Logger) *zap.Logger {
	return l.WithOptions(zap.WrapCore(func(core zapcore.Core) zapcore.Core {
		low := levelFilter{core, func(l zapcore.Level) bool { return l < zapcore.WarnLevel }}
		high := levelFilter{core, func(l zapcore.Level) bool { return l >= zapcore.WarnLevel }}
		return zapcore.NewTee(zapcore.NewSamplerWithOptions(low, time.Second, 100, 100), high)
	}))
}

// levelFilter passes only the entries whose level keep accepts to its core.
type levelFilter struct {
	zapcore.Core
	keep func(zapcore.Level) bool
}

func (c levelFilter) Enabled(l zapcore.Level) bool { return c.keep(l) && c.Core.Enabled(l) }
func (c levelFilter) With(f []zapcore.Field) zapcore.Core {
	return levelFilter{c.Core.With(f), c.keep}
}
func (c levelFilter) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.Enabled(e.Level) {
		return ce
	}
	return c.Core.Check(e, ce)
}

// interceptorLogger adapts zap to the go-grpc-middleware logging interface.
func interceptorLogger(l *zap.Logger) logging.Logger {
	return logging.LoggerFunc(func(_ context.Context, lvl logging.Level, msg string, fields ...any) {
		zf := make([]zap.Field, 0, len(fields)/2)
		for i := 0; i+1 < len(fields); i += 2 {
			key, ok := fields[i].(string)
			if !ok {
				key = fmt.Sprint(fields[i])
			}
			zf = append(zf, zap.Any(key, fields[i+1]))
		}
		switch lvl {
		case logging.LevelDebug:
			l.Debug(msg, zf...)
		case logging.LevelInfo:
			l.Info(msg, zf...)
		case logging.LevelWarn:
			l.Warn(msg, zf...)
		default:
			l.Error(msg, zf...)
		}
	})
}

// MaxHeaderListBytes bounds the metadata (HTTP/2 header list) of one call. The server announces
// it: gRPC clients fail a call with more themselves, and a call that brings more anyway is reset
// (RST_STREAM), the headers past the bound not kept. Headers are not flow-controlled and a call
// holds its metadata while it runs, so gRPC's own bound (16 MiB) let one connection whose streams
// send headers and no message pin 16 MiB times grpc.max.concurrent.streams. Clients send a few
// hundred bytes (grpc-java accepts 8 KiB by default).
const MaxHeaderListBytes = 64 << 10

// keepaliveMinTime is the keepalive enforcement's minimum for d: gRPC reads a zero minimum as its
// default of five minutes, which would disconnect clients that ping more often than that, while
// grpc.keepalive.min.time.ms=0 means that any interval is allowed.
func keepaliveMinTime(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Nanosecond
	}
	return d
}
