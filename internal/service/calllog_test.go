package service

import (
	"context"
	"net"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

func TestUnaryCallLogger(t *testing.T) {
	info := &grpc.UnaryServerInfo{FullMethod: "/sharecoord.v1.ShareCoordinatorService/WriteShareGroupState"}
	tests := []struct {
		name      string
		level     zapcore.Level
		err       error
		wantLevel zapcore.Level
		wantLog   bool
	}{
		{name: "success under info is not built", level: zapcore.InfoLevel, err: nil, wantLog: false},
		{name: "success under debug", level: zapcore.DebugLevel, err: nil, wantLog: true, wantLevel: zapcore.DebugLevel},
		{name: "client fault", level: zapcore.InfoLevel, err: status.Error(codes.InvalidArgument, "bad"), wantLog: true, wantLevel: zapcore.InfoLevel},
		{name: "server fault", level: zapcore.WarnLevel, err: status.Error(codes.Internal, "boom"), wantLog: true, wantLevel: zapcore.ErrorLevel},
		{name: "unavailable under error is not built", level: zapcore.ErrorLevel, err: status.Error(codes.Unavailable, "x"), wantLog: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(tc.level)
			ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}})
			resp, err := unaryCallLogger(zap.New(core))(ctx, "req", info, func(context.Context, any) (any, error) {
				return "resp", tc.err
			})
			if resp != "resp" || err != tc.err {
				t.Fatalf("the call's result was changed: %v, %v", resp, err)
			}
			entries := logs.All()
			if !tc.wantLog {
				if len(entries) != 0 {
					t.Fatalf("want no entry, got %v", entries)
				}
				return
			}
			if len(entries) != 1 {
				t.Fatalf("want one entry, got %d", len(entries))
			}
			e := entries[0]
			if e.Message != "finished call" || e.Level != tc.wantLevel {
				t.Fatalf("got %q at %v, want \"finished call\" at %v", e.Message, e.Level, tc.wantLevel)
			}
			f := e.ContextMap()
			want := map[string]string{
				"grpc.service": "sharecoord.v1.ShareCoordinatorService", "grpc.method": "WriteShareGroupState",
				"grpc.code": status.Code(tc.err).String(), "peer.address": "127.0.0.1:4242", "grpc.method_type": "unary",
			}
			for k, v := range want {
				if f[k] != v {
					t.Errorf("field %s = %v, want %q", k, f[k], v)
				}
			}
			if _, ok := f["grpc.time_ms"]; !ok {
				t.Error("no grpc.time_ms field")
			}
			if _, ok := f["grpc.error"]; ok != (tc.err != nil) {
				t.Errorf("grpc.error present %v, want %v", ok, tc.err != nil)
			}
		})
	}
}

func TestSplitFullMethod(t *testing.T) {
	tests := []struct{ in, service, method string }{
		{"/a.B/C", "a.B", "C"},
		{"/grpc.health.v1.Health/Check", "grpc.health.v1.Health", "Check"},
		{"nonsense", "unknown", "unknown"},
	}
	for _, tc := range tests {
		if s, m := splitFullMethod(tc.in); s != tc.service || m != tc.method {
			t.Errorf("splitFullMethod(%q) = %q, %q; want %q, %q", tc.in, s, m, tc.service, tc.method)
		}
	}
}
