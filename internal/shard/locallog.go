package shard

import (
	"errors"
	"fmt"
	"syscall"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/statelog"
)

// LocalLog is the log of a state partition on a single node: a statelog in one directory, each
// append synced (by itself, or with the other logs of its SyncGroup). It owns the recovery after
// a failed append: the batch of such an append may still be readable from the page cache
// without being on disk, so the next Open truncates the log to the end it had before that
// append, and so does Close if the shard stops before it loads the log again. It says what each
// statelog error means for the shard (see Action).
type LocalLog struct {
	logger *zap.Logger
	dir    string
	opts   statelog.Options
	// durableEnd, when not nil, is the end of a log whose append failed: the end after its last
	// successful append. Opens truncate the log to it until one succeeds.
	durableEnd *int64
	// held is the failure of a journaled log that could not write out appends it acknowledged
	// (statelog.ErrHeldInJournal): the log on disk lacks them until the journal's recovery at the
	// next start appends them, so it is not opened again in this process.
	held error
}

// NewLocalLog returns the opener of the statelog in dir. opts.TruncateAfter is the LocalLog's
// to set.
func NewLocalLog(logger *zap.Logger, dir string, opts statelog.Options) *LocalLog {
	if logger == nil {
		logger = zap.NewNop()
	}
	if opts.MaxRecordBytes == 0 {
		opts.MaxRecordBytes = statelog.DefaultMaxRecordBytes
	}
	return &LocalLog{logger: logger, dir: dir, opts: opts}
}

// Open loads the log (statelog.Load), truncated to the durable end of a failed append if one
// came before.
func (ll *LocalLog) Open(fn func(offset int64, record []byte) error) (Log, error) {
	if ll.held != nil {
		return nil, classify(fmt.Errorf("load state log %s: %w", ll.dir, ll.held))
	}
	o := ll.opts
	o.TruncateAfter = ll.durableEnd
	l, err := statelog.Load(ll.logger, ll.dir, o, fn)
	if err != nil {
		return nil, classify(fmt.Errorf("load state log %s: %w", ll.dir, err))
	}
	if cut := ll.durableEnd; cut != nil {
		ll.logger.Warn("state partition reloaded after a failed append, its log truncated to the last durable offset",
			zap.Int64("durable_end", *cut))
	}
	ll.durableEnd = nil
	return &localLog{ll: ll, l: l}, nil
}

// MaxRecordBytes bounds one record of the log.
func (ll *LocalLog) MaxRecordBytes() int { return ll.opts.MaxRecordBytes }

// Failed is closed once the log's SyncGroup failed (nil without a group).
func (ll *LocalLog) Failed() <-chan struct{} { return ll.opts.SyncGroup.Failed() }

// Err is the failure of the log's SyncGroup (nil if none).
func (ll *LocalLog) Err() error { return classify(ll.opts.SyncGroup.Err()) }

// Close cuts the log back to the durable end of a failed append that no Open followed, reading
// its records without keeping them, so that the unacknowledged batch (written, perhaps only to the
// page cache) is not found by whoever opens the log next.
func (ll *LocalLog) Close() error {
	end := ll.durableEnd
	if end == nil || ll.held != nil {
		return nil
	}
	o := ll.opts
	o.TruncateAfter = end
	l, err := statelog.Open(ll.logger, ll.dir, o)
	if err != nil {
		ll.logger.Error("closing after a failed commit: could not cut the state log back to its durable end; "+
			"the unacknowledged batch may be found when the log is next opened", zap.Int64("durable_end", *end), zap.Error(err))
		return err
	}
	ll.durableEnd = nil
	ll.logger.Warn("closing after a failed commit: cut the state log back to its durable end", zap.Int64("durable_end", *end))
	return l.Close()
}

// localLog is one opened LocalLog.
type localLog struct {
	ll *LocalLog
	l  *statelog.Log
}

func (l *localLog) Append(records [][]byte) (int64, error) {
	end := l.l.EndOffset()
	first, err := l.l.Append(records)
	if err != nil {
		l.ll.durableEnd = &end
		return 0, l.classify(err)
	}
	return first, nil
}

func (l *localLog) SetStartOffset(off int64) (int64, error) {
	if err := l.l.SetStartOffset(off); err != nil {
		return l.l.StartOffset(), l.classify(err)
	}
	return l.l.StartOffset(), nil
}

// classify is classify(err), which also keeps the opener from opening the log again after a
// failure to write out acknowledged appends.
func (l *localLog) classify(err error) error {
	if errors.Is(err, statelog.ErrHeldInJournal) && l.ll.held == nil {
		l.ll.held = err
	}
	return classify(err)
}

func (l *localLog) StartOffset() int64 { return l.l.StartOffset() }
func (l *localLog) EndOffset() int64   { return l.l.EndOffset() }
func (l *localLog) Size() int64        { return l.l.Size() }
func (l *localLog) Close() error       { return l.classify(l.l.Close()) }

// StatelogError wraps an error of package statelog (or one that wraps it) in the LogError that
// says what a shard does about it, for a log built on a statelog; nil stays nil.
func StatelogError(err error) error { return classify(err) }

// classify wraps a statelog error in the LogError that says what the shard does about it (nil
// stays nil).
func classify(err error) error {
	if err == nil {
		return nil
	}
	cause := ""
	if errno := syscall.Errno(0); errors.As(err, &errno) {
		cause = " (" + errno.Error() + ")"
	}
	var ce *statelog.CorruptionError
	switch {
	case errors.As(err, &ce):
		return &LogError{Action: ActionRepair, Err: err, Client: "its state log is damaged and waits for an operator"}
	case errors.Is(err, statelog.ErrUnsupportedFormat):
		return &LogError{Action: ActionUpgrade, Err: err,
			Client: "its state log holds data in a format this release does not read (written by a newer coordinatord)",
			Advice: "its log holds data in a format this release does not read, written by a newer coordinatord; " +
				"run that release or a later one (repair-log does not apply)"}
	case errors.Is(err, statelog.ErrSyncFailed):
		// The kernel reported a lost write-back once; nothing in this process can tell which
		// writes of which partition it took.
		return &LogError{Action: ActionRestart, Err: err,
			Client: "a file-system sync of the data directory failed" + cause + "; the server must be restarted",
			Advice: "a file-system sync of the data directory failed; drop the page cache (or restart the machine), " +
				"then restart the process to reload every state partition from disk"}
	case errors.Is(err, statelog.ErrHeldInJournal):
		// Reloading would serve the log without the acknowledged appends it could not write out;
		// the journal holds them, and appends them again when the process starts.
		return &LogError{Action: ActionRestart, Err: err,
			Client: "its state log could not write out acknowledged writes" + cause + "; the server must be restarted",
			Advice: "its log could not write out acknowledged writes, which the journal holds; fix the disk (or free space), " +
				"then restart the process: its journal appends them to the log again"}
	case errors.Is(err, statelog.ErrNotDurable):
		// A retry would read the bytes whose sync failed from the page cache and trust them;
		// only dropping that cache tells what is on disk.
		return &LogError{Action: ActionRestart, Err: err,
			Client: "its state log could not be made durable when it was loaded" + cause + "; it waits for an operator",
			Advice: "its log could not be synced when it was loaded; drop the page cache (or restart the machine) " +
				"before restarting the process"}
	}
	return err
}
