package diskprobe

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/latency"
)

// SyncResult is the outcome of SyncLatency: the distribution of the fdatasync calls alone and of
// each write+fdatasync pair.
type SyncResult struct {
	Dir       string
	Created   bool // Dir did not exist: it was created for the probe and removed after
	Samples   int
	Bytes     int           // bytes written before each sync
	Idle      time.Duration // sleep before each sample
	Sync      latency.Summary
	WriteSync latency.Summary
}

// SyncLatency creates a scratch file in dir, then n times appends size bytes and calls
// fdatasync(2) (fsync where fdatasync does not exist), timing the sync alone and the pair. The
// file grows like a log's active segment, so each sync also persists the new file size, as a
// log append's does. With idle > 0 it sleeps that long before each sample, so that the machine
// goes idle between syncs as it does between the calls of a server with one call in flight;
// with 0 the syncs run back to back. The scratch file is removed afterwards. A missing dir is
// created for the probe (its parent must exist) and removed after it, and the result says so:
// a mistyped path measures whatever disk holds its parent.
func SyncLatency(dir string, n, size int, idle time.Duration) (SyncResult, error) {
	if n <= 0 || size <= 0 || idle < 0 {
		return SyncResult{}, fmt.Errorf("sync probe: want samples > 0, bytes > 0 and idle >= 0, got %d, %d and %v", n, size, idle)
	}
	created := false
	if err := os.Mkdir(dir, 0o755); err == nil {
		created = true
		defer func() { _ = os.Remove(dir) }()
	} else if !errors.Is(err, fs.ErrExist) {
		return SyncResult{}, fmt.Errorf("sync probe: create %s: %w", dir, err)
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
		if idle > 0 {
			time.Sleep(idle)
		}
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
	return SyncResult{Dir: dir, Created: created, Samples: n, Bytes: size, Idle: idle, Sync: syncH.Summary(), WriteSync: pairH.Summary()}, nil
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
