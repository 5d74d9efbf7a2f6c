package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/restart"
	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/workload"
)

// cancelOnWrite is a stdout that ends a context at its first write.
type cancelOnWrite struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	b      strings.Builder
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cancel()
	return w.b.Write(p)
}

// TestDumpLogStopsWhenInterrupted: main turns SIGINT and SIGTERM into the end of the command's
// context instead of ending the process, so dump-log must stop by itself when it ends; it used
// to print the whole log, however large, whatever the operator pressed.
func TestDumpLogStopsWhenInterrupted(t *testing.T) {
	dir := t.TempDir()
	spec := restart.Spec{Partitions: 1, Bytes: 1 << 20, Limit: 500,
		Shape: workload.Shape{GroupID: "g", SharePartitions: 50, StateBatches: 10, BatchesPerWrite: 2}}
	gctx, gcancel := context.WithTimeout(context.Background(), time.Minute)
	defer gcancel()
	if _, err := restart.Generate(gctx, nil, dir, spec, 8, nil); err != nil {
		t.Fatal(err)
	}
	var whole strings.Builder
	if code := run(gctx, []string{"dump-log", dir}, env{stdout: &whole, stderr: &strings.Builder{}}); code != exitOK {
		t.Fatalf("dump-log of the generated log: exit %d", code)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelOnWrite{cancel: cancel}
	var stderr strings.Builder
	code := run(ctx, []string{"dump-log", dir}, env{stdout: out, stderr: &stderr})
	if code != exitFailure || !strings.Contains(stderr.String(), "context canceled") {
		t.Fatalf("interrupted dump-log: exit %d, stderr %q; want %d and the interruption", code, stderr.String(), exitFailure)
	}
	if got, all := out.b.Len(), whole.Len(); got >= all/2 {
		t.Fatalf("interrupted at its first output, dump-log still printed %d of the log's %d bytes", got, all)
	}
}
