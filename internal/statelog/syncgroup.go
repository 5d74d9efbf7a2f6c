package statelog

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/vfs"
)

// SyncGroup makes the appends of many logs durable together with one file-system sync
// (syncfs(2)) per round instead of one fdatasync per log, for logs that all live on one file
// system (the state partitions of one data directory). A log joins it through
// Options.SyncGroup.
//
// Group commit across logs: an Append writes its frame, then waits in the group for a sync
// that started after its write returned. One goroutine at a time runs the sync; every caller
// that arrives while it runs waits for the next round, which one of them then runs for all of
// them. A round costs about as much as one fdatasync, however many logs it covers.
//
// Failure is permanent. A sync reports a write-back error of the file system once, and data
// that any log wrote before it may be lost while a later sync succeeds; so after the first
// failed sync every Sync (running, waiting or future) returns an error wrapping ErrSyncFailed,
// every log of the group fails, and no log can join it: only a restart of the process, which
// rereads the logs from disk, recovers. A sync also writes back every other dirty file of the
// file system, which a dedicated volume keeps cheap.
//
// Directory syncs (segment creation, renames, removals) and the syncs of recovery stay per
// file. The sync is the FS's Syncer (syncfs(2) on the operating system's filesystem). A
// SyncGroup is safe for concurrent use.
type SyncGroup struct {
	logger  *zap.Logger
	dir     string
	sys     vfs.Syncer
	metrics *Metrics
	syncs   atomic.Int64

	mu       sync.Mutex
	cond     *sync.Cond
	started  uint64        // rounds started
	finished uint64        // rounds finished
	running  bool          // a round is running
	waiting  int           // callers waiting for a round to finish
	failed   error         // the first failed sync; the group is poisoned
	failedAt uint64        // the round that failed
	failedC  chan struct{} // closed when failed is set
	closed   bool
	// waited is a test hook: nil, or signalled without blocking each time a caller starts to wait
	// for a round (the test receives from it).
	waited chan struct{}
}

// SyncGroupOptions configures a SyncGroup. Zero values mean the defaults.
type SyncGroupOptions struct {
	FS      FS       // nil → the operating system's filesystem
	Metrics *Metrics // records each sync in sharecoord_fsync_duration_seconds; nil → nothing recorded
}

// NewSyncGroup returns a group for logs under dir, which must exist; they must all live on the
// file system that holds dir. It fails where a file-system sync cannot be trusted to report
// write-back errors (other systems than Linux, and Linux before 5.8), so that the caller can
// keep per-file syncs. Close releases the group once its logs are closed.
func NewSyncGroup(logger *zap.Logger, dir string, opts SyncGroupOptions) (*SyncGroup, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	if opts.FS == nil {
		opts.FS = vfs.OS()
	}
	sys, err := opts.FS.OpenSyncer(dir)
	if err != nil {
		return nil, fmt.Errorf("statelog: sync group for %s: %w", dir, err)
	}
	g := &SyncGroup{logger: logger.With(zap.String("dir", dir)), dir: dir, sys: sys, metrics: opts.Metrics, failedC: make(chan struct{})}
	g.cond = sync.NewCond(&g.mu)
	return g, nil
}

// Sync returns once every write made before the call is durable: after a file-system sync
// that started after the call began. Concurrent callers share syncs. After a failed sync it
// returns an error wrapping ErrSyncFailed and the sync's error, for good; after Close one
// wrapping ErrClosed.
func (g *SyncGroup) Sync() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	// The round that starts after this call: the next one to start.
	target := g.started + 1
	for {
		switch {
		case g.failed != nil && target >= g.failedAt:
			return g.failure()
		case g.finished >= target:
			return nil
		case g.closed:
			return g.closedError()
		case g.running:
			g.waiting++
			if g.waited != nil {
				select {
				case g.waited <- struct{}{}:
				default:
				}
			}
			g.cond.Wait()
			g.waiting--
		default:
			g.runRoundLocked()
		}
	}
}

// runRoundLocked runs one round with g.mu held on entry and exit (released during the sync).
func (g *SyncGroup) runRoundLocked() {
	g.running = true
	g.started++
	round := g.started
	g.mu.Unlock()
	began := time.Now()
	err := g.sys.Sync()
	took := time.Since(began)
	g.syncs.Add(1)
	g.metrics.observeSync(took.Seconds())
	g.mu.Lock()
	g.running = false
	g.finished = round
	if err != nil && g.failed == nil {
		g.failed, g.failedAt = err, round
		close(g.failedC)
		g.logger.Error("file-system sync of the state logs failed: every state partition refuses writes "+
			"until the process is restarted (data written before the failure may be lost; drop the page cache, then restart the process to reread what is on disk)",
			zap.Error(err))
	}
	g.cond.Broadcast()
}

func (g *SyncGroup) failure() error { return fmt.Errorf("%w: %w", ErrSyncFailed, g.failed) }

func (g *SyncGroup) closedError() error { return fmt.Errorf("%w: sync group %s", ErrClosed, g.dir) }

// Err returns the error every later Sync returns (wrapping ErrSyncFailed or ErrClosed), or nil
// while the group works.
func (g *SyncGroup) Err() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.failed != nil:
		return g.failure()
	case g.closed:
		return g.closedError()
	}
	return nil
}

// Failed returns a channel that is closed when a sync fails, so that a log's owner can stop
// without waiting for its next append. A nil group's channel is nil (never ready).
func (g *SyncGroup) Failed() <-chan struct{} {
	if g == nil {
		return nil
	}
	return g.failedC
}

// Syncs returns how many file-system syncs the group has made.
func (g *SyncGroup) Syncs() int64 { return g.syncs.Load() }

// join admits the log in dir: it must live on the group's file system, and the group must
// work. A nil group admits every log.
func (g *SyncGroup) join(dir string) error {
	if g == nil {
		return nil
	}
	if err := g.Err(); err != nil {
		return err
	}
	same, err := g.sys.Holds(dir)
	if err != nil {
		return fmt.Errorf("statelog: join sync group: %w", err)
	}
	if !same {
		return fmt.Errorf("statelog: %s is on another file system than %s: a sync group syncs one file system", dir, g.dir)
	}
	return nil
}

// Close waits for a running sync, then releases the group; every later Sync fails. Close the
// logs of the group first. It is idempotent.
func (g *SyncGroup) Close() error {
	g.mu.Lock()
	for g.running {
		g.cond.Wait()
	}
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.cond.Broadcast()
	g.mu.Unlock()
	if err := g.sys.Close(); err != nil {
		return fmt.Errorf("statelog: close sync group %s: %w", g.dir, err)
	}
	return nil
}
