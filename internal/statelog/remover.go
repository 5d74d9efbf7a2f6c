package statelog

import (
	"errors"
	"io/fs"
	"slices"
	"sync"

	"go.uber.org/zap"
)

// segmentRemover deletes the files of segments below the log-start offset on a goroutine of
// its own, so that the owner does not wait while the filesystem frees them: unlinking a full
// segment of the default 100 MiB takes 20–26 ms on ext4, as long as a dozen appends. A
// crash before a file is gone, or before the directory sync that follows its deletion, leaves
// a segment wholly below the persisted log-start offset, which the next Open deletes. A file
// whose deletion failed is tried again with the next removal: the log may not be opened again
// before the process restarts, and Size no longer counts the file.
//
// Concurrency: remove and wait are called from the log's owner goroutine.
type segmentRemover struct {
	logger *zap.Logger
	fs     FS
	dir    string // the log's directory, synced after deletions

	mu      sync.Mutex
	queue   []string // files to delete, oldest first
	failed  []string // files whose deletion failed, oldest first: queued again by remove
	running bool     // a goroutine is draining queue
	pins    int      // open snapshots that may read queued files: no deletion while > 0
	closed  bool     // the log is closed: what is queued is left to the next Open
	wg      sync.WaitGroup
}

// remove queues paths for deletion, after the files whose deletion failed before.
func (r *segmentRemover) remove(paths []string) {
	if len(paths) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queue = slices.Concat(r.failed, r.queue, paths)
	r.failed = nil
	r.startLocked()
}

// startLocked starts a goroutine draining the queue unless one runs, a snapshot pins the
// files, the log is closed or nothing is queued. r.mu is held.
func (r *segmentRemover) startLocked() {
	if !r.running && r.pins == 0 && !r.closed && len(r.queue) > 0 {
		r.running = true
		r.wg.Go(r.drain)
	}
}

// pin holds back deletions until unpin: a snapshot reads segments the log may drop meanwhile.
func (r *segmentRemover) pin() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pins++
}

// unpin releases a pin; the last one lets the queued deletions go ahead. It may be called from
// any goroutine, also after the log is closed.
func (r *segmentRemover) unpin() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pins--
	r.startLocked()
}

// close returns once the queued deletions have been tried and stops deleting (the log is
// closing). Files that a snapshot still pins are left: they lie below the durable log-start
// offset, and the next Open deletes them. Nothing is deleted after close returns, since a new
// log may then be created in the directory, with file names that the queue holds.
func (r *segmentRemover) close() {
	r.wait()
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wait() // a drain that an unpin started meanwhile stops after its batch
}

// drain deletes queued files until the queue is empty. A failed deletion is logged and tried
// again with the next removal (or by the next Open); it does not fail the log, whose records no
// longer need the file.
func (r *segmentRemover) drain() {
	for {
		r.mu.Lock()
		paths := r.queue
		r.queue = nil
		if r.pins > 0 || r.closed {
			r.queue = paths
			paths = nil
		}
		if len(paths) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		deleted := false
		for _, p := range paths {
			if err := r.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				r.logger.Error("could not delete a segment below the log-start offset; the state log tries again at the next prune, and when next opened",
					zap.String("segment", p), zap.Error(err))
				r.mu.Lock()
				r.failed = append(r.failed, p)
				r.mu.Unlock()
				continue
			}
			deleted = true
			r.logger.Debug("deleted segment below the log-start offset", zap.String("segment", p))
		}
		if deleted {
			if err := r.fs.SyncDir(r.dir); err != nil {
				r.logger.Error("could not sync the directory after deleting segments below the log-start offset; should they come back after a crash, the state log deletes them when next opened",
					zap.String("dir", r.dir), zap.Error(err))
			}
		}
	}
}

// wait returns once every queued deletion has been tried.
func (r *segmentRemover) wait() { r.wg.Wait() }
