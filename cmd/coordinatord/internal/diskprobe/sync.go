package diskprobe

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/latency"
)

// SyncProbe says what SyncLatency measures.
type SyncProbe struct {
	Samples int           // write+sync pairs
	Bytes   int           // bytes written before each sync
	Idle    time.Duration // sleep before each sample (0: back to back)
	// Files is the number of scratch files the samples go to in turn (0 or 1: one), as a server
	// spreads its writes over the logs of its state partitions.
	Files int
	// Preallocate allocates each file's blocks for all its samples first (fallocate(2)), so that
	// the samples write inside the file instead of growing it. Linux only.
	Preallocate bool
}

// SyncResult is the outcome of SyncLatency: the distribution of the fdatasync calls alone and of
// each write+fdatasync pair.
type SyncResult struct {
	SyncProbe
	Dir       string
	Created   bool // Dir did not exist: it was created for the probe and removed after
	Sync      latency.Summary
	WriteSync latency.Summary
}

// SyncLatency creates p.Files scratch files in dir, then p.Samples times writes p.Bytes to the
// next file in turn and calls fdatasync(2) on it (fsync where fdatasync does not exist), timing
// the sync alone and the pair. Each file grows like a log's active segment, so each sync also
// persists the new file size, as a log append's does; unless p.Preallocate, when the writes land
// in blocks allocated (and synced) before the samples. With p.Idle > 0 it sleeps that long before
// each sample, so that the machine goes idle between syncs as it does between the calls of a
// server with one call in flight; with 0 the syncs run back to back. The scratch files are
// removed afterwards. A missing dir is created for the probe (its parent must exist) and removed
// after it, and the result says so: a mistyped path measures whatever disk holds its parent.
// When ctx ends it stops before the next sample, removes its files and returns ctx's error.
func SyncLatency(ctx context.Context, dir string, p SyncProbe) (SyncResult, error) {
	p.Files = max(p.Files, 1)
	if p.Samples <= 0 || p.Bytes <= 0 || p.Idle < 0 {
		return SyncResult{}, fmt.Errorf("sync probe: want samples > 0, bytes > 0 and idle >= 0, got %d, %d and %v", p.Samples, p.Bytes, p.Idle)
	}
	created := false
	if err := os.Mkdir(dir, 0o755); err == nil {
		created = true
		defer func() { _ = os.Remove(dir) }()
	} else if !errors.Is(err, fs.ErrExist) {
		return SyncResult{}, fmt.Errorf("sync probe: create %s: %w", dir, err)
	}
	files := make([]*os.File, 0, p.Files)
	defer func() {
		for _, f := range files {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	perFile := int64(p.Bytes) * int64((p.Samples+p.Files-1)/p.Files)
	for range p.Files {
		f, err := os.CreateTemp(dir, ".fsync-probe-*")
		if err != nil {
			return SyncResult{}, fmt.Errorf("sync probe: create scratch file in %s: %w", dir, err)
		}
		files = append(files, f)
		if p.Preallocate {
			if err := allocate(f, perFile); err != nil {
				return SyncResult{}, fmt.Errorf("sync probe: allocate %d bytes of %s: %w", perFile, f.Name(), err)
			}
		}
		// Persist the new file (and its allocation) first, so the samples measure writes only.
		if err := dataSync(f); err != nil {
			return SyncResult{}, fmt.Errorf("sync probe: sync %s: %w", f.Name(), err)
		}
	}
	if err := syncDir(dir); err != nil {
		return SyncResult{}, err
	}
	buf := make([]byte, p.Bytes)
	for i := range buf {
		buf[i] = byte(i)
	}
	syncH, pairH := latency.New(), latency.New()
	for i := range p.Samples {
		if err := ctx.Err(); err != nil {
			return SyncResult{}, fmt.Errorf("sync probe: stopped after %d of %d samples: %w", i, p.Samples, err)
		}
		if p.Idle > 0 {
			time.Sleep(p.Idle)
		}
		f := files[i%len(files)]
		began := time.Now()
		if _, err := f.Write(buf); err != nil {
			return SyncResult{}, fmt.Errorf("sync probe: write %s: %w", f.Name(), err)
		}
		written := time.Now()
		if err := dataSync(f); err != nil {
			return SyncResult{}, fmt.Errorf("sync probe: sync %s: %w", f.Name(), err)
		}
		done := time.Now()
		syncH.Record(done.Sub(written))
		pairH.Record(done.Sub(began))
	}
	return SyncResult{SyncProbe: p, Dir: dir, Created: created, Sync: syncH.Summary(), WriteSync: pairH.Summary()}, nil
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
