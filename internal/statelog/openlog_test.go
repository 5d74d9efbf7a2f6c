package statelog

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestOpenLogLevel: a log that opens as it was closed logs "opened state log" at DEBUG, one
// whose recovery repaired something (a torn tail) at INFO, next to the WARN saying what was done.
func TestOpenLogLevel(t *testing.T) {
	dir := t.TempDir()
	open := func() *observer.ObservedLogs {
		t.Helper()
		core, logs := observer.New(zapcore.DebugLevel)
		l, err := Open(zap.New(core), dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, fixedBatch(1, 3, 100))
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return logs
	}
	level := func(logs *observer.ObservedLogs) zapcore.Level {
		t.Helper()
		opened := logs.FilterMessage("opened state log").All()
		if len(opened) != 1 {
			t.Fatalf("%d \"opened state log\" lines, want 1", len(opened))
		}
		return opened[0].Level
	}
	if lv := level(open()); lv != zapcore.DebugLevel {
		t.Fatalf("a new log opened at %s", lv)
	}
	if lv := level(open()); lv != zapcore.DebugLevel {
		t.Fatalf("a cleanly closed log opened at %s", lv)
	}
	// A crash (no clean-end file) that left half an append behind.
	if err := os.Remove(filepath.Join(dir, cleanFileName)); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0, 0, 1}); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	logs := open()
	if lv := level(logs); lv != zapcore.InfoLevel || logs.FilterMessageSnippet("truncated torn tail").Len() != 1 {
		t.Fatalf("a log with a torn tail opened at %s:\n%v", lv, logs.All())
	}
}
