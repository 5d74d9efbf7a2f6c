package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestReadyzWhileStopping: once the server is draining its calls before exit, both readiness
// probes answer 503, as the gRPC health service turns NOT_SERVING.
func TestReadyzWhileStopping(t *testing.T) {
	var stopping atomic.Bool
	mux := newAdminMux(prometheus.NewRegistry(), nil, false, &stopping)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(body)
	}
	for _, path := range []string{"/readyz", "/readyz?exclude=failed"} {
		if code, body := get(path); code != http.StatusOK {
			t.Fatalf("%s before stopping = %d %q, want 200", path, code, body)
		}
	}
	stopping.Store(true)
	for _, path := range []string{"/readyz", "/readyz?exclude=failed"} {
		if code, body := get(path); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
			t.Fatalf("%s while stopping = %d %q, want 503 saying it is shutting down", path, code, body)
		}
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz while stopping = %d, want 200: the process is still alive", code)
	}
}

// TestDrainCalls: the drain ends when the calls do, at its timeout (logged), or at a second stop
// signal (logged), whichever comes first.
func TestDrainCalls(t *testing.T) {
	untilCancelled := func(ctx context.Context) bool { <-ctx.Done(); return false }
	for _, tc := range []struct {
		name     string
		shutdown func(context.Context) bool
		timeout  time.Duration
		signal   bool
		logged   string
	}{
		{"calls finish", func(context.Context) bool { return true }, time.Minute, false, ""},
		{"timeout", untilCancelled, 50 * time.Millisecond, false, "the drain ended before every call finished"},
		{"second signal", untilCancelled, time.Hour, true, "second stop signal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			again := make(chan os.Signal, 1)
			if tc.signal {
				again <- syscall.SIGTERM
			}
			done := make(chan struct{})
			go func() {
				drainCalls(zap.New(core), tc.shutdown, tc.timeout, again)
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("the drain did not end")
			}
			got := logs.FilterMessageSnippet(tc.logged).Len()
			if tc.logged == "" && logs.Len() != 0 || tc.logged != "" && got == 0 {
				t.Fatalf("log %v, want %q", logs.All(), tc.logged)
			}
		})
	}
}

func TestRunsServer(t *testing.T) {
	for args, want := range map[string]bool{
		"": true, "serve --data-dir d": true, "--data-dir d": true, "--help": true,
		"dump-log d": false, "bench load": false, "check-config --config f": false, "repair-log d": false,
	} {
		if got := runsServer(strings.Fields(args)); got != want {
			t.Errorf("runsServer(%q) = %v, want %v", args, got, want)
		}
	}
}

func TestVersionFlag(t *testing.T) {
	out, stderr, code := runTool(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "coordinatord version ") || !strings.Contains(out, "go1.") {
		t.Fatalf("--version: exit %d, %q %q", code, out, stderr)
	}
}
