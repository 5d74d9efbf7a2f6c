package diskprobe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSyncLatency(t *testing.T) {
	for _, p := range []SyncProbe{
		{Samples: 20, Bytes: 128},
		{Samples: 21, Bytes: 100, Files: 5},
		{Samples: 20, Bytes: 128, Files: 3, Preallocate: true},
	} {
		t.Run(fmt.Sprintf("files=%d/preallocate=%v", p.Files, p.Preallocate), func(t *testing.T) {
			dir := t.TempDir()
			res, err := SyncLatency(context.Background(), dir, p)
			if p.Preallocate && errors.Is(err, errors.ErrUnsupported) {
				t.Skipf("no fallocate here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Samples != p.Samples || res.Sync.Count != int64(p.Samples) || res.WriteSync.Count != int64(p.Samples) || res.Created {
				t.Fatalf("want %d samples of each in the existing directory, got %+v", p.Samples, res)
			}
			if res.Files != max(p.Files, 1) {
				t.Fatalf("result names %d files, want %d", res.Files, max(p.Files, 1))
			}
			if res.Sync.P50 <= 0 || res.WriteSync.P50 < res.Sync.P50 {
				t.Fatalf("want 0 < sync p50 <= write+sync p50, got %v and %v", res.Sync.P50, res.WriteSync.P50)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 0 {
				t.Fatalf("scratch files were left behind: %v", entries)
			}
		})
	}
}

// An interrupted probe stops before its next sample, returns the context's error and removes
// its scratch files (the command runs in the server's data directory).
func TestSyncLatencyStopsWhenInterrupted(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	// Without the interruption this takes 100 000 × 1 ms: minutes.
	_, err := SyncLatency(ctx, dir, SyncProbe{Samples: 100_000, Bytes: 128, Idle: time.Millisecond, Files: 3})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the context's error, got %v", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("the probe took %v to notice the interruption", took)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("scratch files were left behind: %v", entries)
	}
}

// A missing directory (whose parent exists) is created for the probe, reported, and removed; one
// whose parent is missing too is refused.
func TestSyncLatencyMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "probe")
	res, err := SyncLatency(context.Background(), dir, SyncProbe{Samples: 5, Bytes: 128})
	if err != nil || !res.Created {
		t.Fatalf("SyncLatency in a missing directory: %+v, %v; want a result that says it created it", res, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the directory created for the probe is still there (%v)", err)
	}
	if _, err := SyncLatency(context.Background(), filepath.Join(t.TempDir(), "not", "there"), SyncProbe{Samples: 5, Bytes: 128}); err == nil {
		t.Fatal("SyncLatency under a missing parent succeeded")
	}
}

func TestSyncLatencyRejectsBadInput(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		dir     string
		n, size int
		idle    time.Duration
	}{
		{name: "no samples", dir: t.TempDir(), n: 0, size: 10},
		{name: "no bytes", dir: t.TempDir(), n: 1, size: 0},
		{name: "a file, not a directory", dir: file, n: 1, size: 10},
		{name: "negative idle", dir: t.TempDir(), n: 1, size: 10, idle: -time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := SyncLatency(context.Background(), tc.dir, SyncProbe{Samples: tc.n, Bytes: tc.size, Idle: tc.idle}); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestReadBandwidth(t *testing.T) {
	dir := t.TempDir()
	sizes := []int{0, 1, 4096, 100_000}
	var paths []string
	total := 0
	for i, n := range sizes {
		p := filepath.Join(dir, string(rune('a'+i)))
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		total += n
	}
	res, err := ReadBandwidth(paths, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != int64(total) || res.Files != len(sizes) {
		t.Fatalf("read %d bytes of %d files, want %d of %d", res.Bytes, res.Files, total, len(sizes))
	}
	if res.Took <= 0 {
		t.Fatalf("took %v, want > 0: no bandwidth", res.Took)
	}
	if _, err := ReadBandwidth(append(paths, filepath.Join(dir, "absent")), 1000); err == nil {
		t.Fatal("a missing file: want an error")
	}
	if _, err := ReadBandwidth(paths, 0); err == nil {
		t.Fatal("no buffer: want an error")
	}
}
