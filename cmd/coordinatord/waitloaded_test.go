package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// "state partitions loaded" reports the time since the shards started loading, not since
// waitLoaded was called (after the listeners were set up, by which time small partitions have
// loaded): its took is never less than a partition's own.
func TestWaitLoadedTookCountsFromShardStart(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	start := time.Now().Add(-time.Minute)
	waitLoaded(context.Background(), zap.New(core), nil, start)
	entries := logs.FilterMessage("state partitions loaded").All()
	if len(entries) != 1 {
		t.Fatalf("logged %d summaries, want 1", len(entries))
	}
	took, ok := entries[0].ContextMap()["took"].(time.Duration)
	if !ok || took < time.Minute {
		t.Fatalf("took = %v, want at least the minute since the shards started", entries[0].ContextMap()["took"])
	}
}

// TestStartupLogSummary: at start the partitions' loads are summed up in one INFO line (counts,
// records replayed, keys held, the slowest partition), not logged at INFO one or two lines per
// partition; a partition whose log needed a repair still gets lines of its own.
func TestStartupLogSummary(t *testing.T) {
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	dir := t.TempDir()
	summary := func(p *proc) map[string]any {
		t.Helper()
		line, ok := p.waitLine(func(l string) bool { return strings.Contains(l, `"msg":"state partitions loaded"`) })
		if !ok {
			t.Fatalf("no summary line\n%s", p.log())
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(p.log(), "\n") {
			if strings.Contains(l, `"msg":"opened state log"`) || strings.Contains(l, `"msg":"state partition loaded"`) {
				if !strings.Contains(l, `"state_partition":7`) {
					t.Errorf("a partition's load is logged at INFO: %s", l)
				}
			}
		}
		return e
	}
	want := func(e map[string]any, field string, v float64) {
		t.Helper()
		if e[field] != v {
			t.Errorf("%s = %v, want %v in %v", field, e[field], v, e)
		}
	}

	p := startProc(t, dir)
	e := summary(p)
	for field, v := range map[string]float64{"partitions": 50, "loaded": 50, "failed": 0, "records": 0, "keys": 0} {
		want(e, field, v)
	}
	if sp, ok := e["slowest_partition"].(float64); !ok || sp < 0 || sp >= 50 || e["slowest_took"] == nil {
		t.Errorf("no slowest partition in %v", e)
	}
	ctx := ctxT(t)
	for g := range 3 {
		if _, err := p.state.InitializeShareGroupState(ctx, initReq(fmt.Sprintf("summary-%d", g), topicA, 0, 1, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d", code)
	}

	// Three records and keys after a restart; a partition whose log has a torn tail is named.
	seg := newestSegment(t, filepath.Join(dir, "__share_group_state-7"))
	if err := os.Remove(filepath.Join(dir, "__share_group_state-7", "clean-end")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte{1, 2, 3})
	_ = f.Close()
	p = startProc(t, dir)
	e = summary(p)
	want(e, "loaded", 50)
	want(e, "records", 3)
	want(e, "keys", 3)
	waitForLog(t, p, regexp.MustCompile(`"level":"info".*"msg":"opened state log".*"state_partition":7`))
}

// newestSegment returns the path of the newest segment file in a state log directory.
func newestSegment(t *testing.T, dir string) string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no segment in %s: %v", dir, err)
	}
	return names[len(names)-1]
}
