package service

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// unaryCallLogger logs every finished unary call with the message and fields of
// go-grpc-middleware's logging interceptor ("finished call"; protocol, grpc.component,
// grpc.service, grpc.method, grpc.method_type, peer.address, grpc.start_time,
// grpc.request.deadline, grpc.code, grpc.error, grpc.time_ms) at codeToLevel of the call's code.
// Unlike that interceptor it asks the logger first and builds the entry only when it will be
// written: successful calls log at debug, so under the default level a call costs one level check
// instead of about a dozen fields built and thrown away (a tenth of the server's CPU on the write
// path, docs/benchmarks.md).
func unaryCallLogger(l *zap.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		code := status.Code(err)
		ce := l.Check(zapLevel(codeToLevel(code)), "finished call")
		if ce == nil {
			return resp, err
		}
		service, method := splitFullMethod(info.FullMethod)
		fields := make([]zap.Field, 0, 12)
		fields = append(fields,
			zap.String("protocol", "grpc"),
			zap.String("grpc.component", "server"),
			zap.String("grpc.service", service),
			zap.String("grpc.method", method),
			zap.String("grpc.method_type", "unary"))
		if addr := peerAddr(ctx); addr != "" {
			fields = append(fields, zap.String("peer.address", addr))
		}
		fields = append(fields, zap.String("grpc.start_time", start.Format(time.RFC3339)))
		if d, ok := ctx.Deadline(); ok {
			fields = append(fields, zap.String("grpc.request.deadline", d.Format(time.RFC3339)))
		}
		fields = append(fields, zap.String("grpc.code", code.String()))
		if err != nil {
			fields = append(fields, zap.String("grpc.error", err.Error()))
		}
		ms := float32(time.Since(start).Microseconds()) / 1000
		fields = append(fields, zap.String("grpc.time_ms", strconv.FormatFloat(float64(ms), 'f', -1, 32)))
		ce.Write(fields...)
		return resp, err
	}
}

// splitFullMethod splits "/package.Service/Method" into its service and method names.
func splitFullMethod(full string) (string, string) {
	full = strings.TrimPrefix(full, "/")
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[:i], full[i+1:]
	}
	return "unknown", "unknown"
}

// zapLevel maps a go-grpc-middleware level to zap's.
func zapLevel(l logging.Level) zapcore.Level {
	switch l {
	case logging.LevelDebug:
		return zapcore.DebugLevel
	case logging.LevelInfo:
		return zapcore.InfoLevel
	case logging.LevelWarn:
		return zapcore.WarnLevel
	default:
		return zapcore.ErrorLevel
	}
}
