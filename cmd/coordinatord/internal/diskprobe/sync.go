package diskprobe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/latency"
)

// SyncResult is the outcome of SyncLatency: the distribution of the fdatasync calls alone and of
// each write+fdatasync pair.
type SyncResult struct {
	Dir       string
	Samples   int
	Bytes     int // bytes written before each sync
	Sync      latency.Summary
	WriteSync latency.Summary
}

// SyncLatency creates a scratch file in dir, then n times appends size bytes and calls
// fdatasync(2) (fsync where fdatasync does not exist), timing the sync alone and the pair. The
// file grows like a log's active segment, so each sync also persists the new file size, as a
// log append's does. The scratch file is removed afterwards.
func SyncLatency(dir string, n, size int) (SyncResult, error) {
	if n <= 0 || size <= 0 {
		return SyncResult{}, fmt.Errorf("sync probe: want samples > 0 and bytes > 0, got %d and %d", n, size)
	}
	f, err := os.CreateTemp(dir, ".fsync-probe-*")
	if err != nil {
		return SyncResult{}, fmt.Errorf("sync probe: create scratch file in %s: %w", dir, err)
	}
	path := f.Name()
	defer func() {
		_ = f.Close()
		_ = os.Remove(path)
	}()
	// Persist the new directory entry first, so the samples measure appends only.
	if err := dataSync(f); err != nil {
		return SyncResult{}, fmt.Errorf("sync probe: sync %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return SyncResult{}, err
	}
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	syncH, pairH := latency.New(), latency.New()
	for i := 0; i < n; i++ {
		began := time.Now()
		if _, err := f.Write(buf); err != nil {
			return SyncResult{}, fmt.Errorf("sync probe: write %s: %w", path, err)
		}
		written := time.Now()
		if err := dataSync(f); err != nil {
			return SyncResult{}, fmt.Errorf("sync probe: sync %s: %w", path, err)
		}
		done := time.Now()
		syncH.Record(done.Sub(written))
		pairH.Record(done.Sub(began))
	}
	return SyncResult{Dir: dir, Samples: n, Bytes: size, Sync: syncH.Summary(), WriteSync: pairH.Summary()}, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync probe: open directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync probe: sync directory %s: %w", dir, err)
	}
	return nil
}
