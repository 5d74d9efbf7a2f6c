package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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
