package statelog

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by operations on a closed Log.
	ErrClosed = errors.New("statelog: log closed")
	// ErrFailed is wrapped by every write-side operation after a write, sync or roll error:
	// the state of the files is unknown until the log is closed and reopened.
	ErrFailed = errors.New("statelog: log failed; close and reopen it")
	// ErrRecordTooLarge is returned by Append, before any I/O, for a record larger than
	// Options.MaxRecordBytes. It does not fail the log.
	ErrRecordTooLarge = errors.New("statelog: record too large")
	// ErrBatchTooLarge is returned by Append, before any I/O, for a batch whose encoded payload
	// exceeds MaxBatchBytes. It does not fail the log.
	ErrBatchTooLarge = errors.New("statelog: batch too large")
	// ErrOutOfRange is returned for an offset outside [StartOffset(), EndOffset()].
	ErrOutOfRange = errors.New("statelog: offset out of range")
	// ErrSyncFailed is wrapped by every error of a SyncGroup after one of its file-system
	// syncs failed, and so by every write-side error of the logs in it. The failure is
	// permanent for the process: the kernel reports a write-back error once, and data that
	// any log of the file system wrote before it may be lost, so no later sync can vouch for
	// it. Reopening the logs does not help; the process must be restarted.
	ErrSyncFailed = errors.New("statelog: file-system sync failed; the process must be restarted")
	// ErrNotDurable is wrapped by the error of an Open whose sync of what it found (the newest
	// segment, a torn tail's cut, the log's directory) failed, when the log holds records and
	// Options.TruncateAfter is not set. What the log holds past its last synced append may then not
	// be on disk, and cannot be told: the kernel reports a failed write-back once, and keeps the
	// pages readable. Opening again in this or another process would find and trust those bytes;
	// the page cache must be dropped first (or the machine restarted).
	ErrNotDurable = errors.New("statelog: the log could not be made durable; drop the page cache (or restart the machine) before opening it again")
	// ErrNoLog is returned by Repair and Scan for a directory that holds no file of a state log (no
	// segment file, well-named or not, and no log-start offset file). Open creates a log in such a
	// directory; the operator's tools must not take one for an empty log, or repair one into it.
	ErrNoLog = errors.New("statelog: the directory holds no state log")
	// ErrUnsupportedFormat is wrapped by the error of Open, Load, Scan and Repair for a file of
	// the log whose checksum holds but whose format version or flags this release does not know
	// (a segment header, the log-start offset file): a newer release wrote it, and the binary
	// reading it is older (a downgrade). It is not damage, so Repair refuses to cut it rather
	// than drop records that a release knowing the format reads.
	ErrUnsupportedFormat = errors.New("statelog: written in a format this release does not read (by a newer coordinatord?); " +
		"run the release that wrote it, or a later one: this is not damage, and repair-log leaves it alone")
)

// unsupportedFormat is the error for the file at path, which a newer release wrote.
func unsupportedFormat(path, reason string) error {
	return fmt.Errorf("statelog: %s: %s: %w", path, reason, ErrUnsupportedFormat)
}

// CorruptionError says where the log is damaged. Segment is the path of the damaged file (a
// segment, or the log-start offset file) and Offset the byte offset in it where the damage
// starts: the first byte that Repair would drop.
type CorruptionError struct {
	Segment string // segment file path
	Offset  int64  // byte offset in that file
	Reason  string
	Err     error

	// kind tells Repair how to cut the damage out; for damageStart, fixStart is the offset
	// to reset the log-start offset to (-1: remove it, no segment remains).
	kind     damageKind
	fixStart int64
}

// damageKind classifies corruption for Repair.
type damageKind int

const (
	// damageSegment: drop Segment from Offset on (the whole file if Offset is inside its
	// header) and every later segment.
	damageSegment damageKind = iota
	// damageStray: Segment is a file that cannot be placed in the log; remove it alone.
	damageStray
	// damageStart: the log-start offset is unreadable or outside the data; rewrite it.
	damageStart
	// damageClean: the log disagrees with the end offset its clean-end file recorded when it was
	// last closed; the file goes, and the log is judged as after a crash.
	damageClean
)

// Error returns a one-line description naming the file and byte offset.
func (e *CorruptionError) Error() string {
	msg := fmt.Sprintf("statelog: corruption in %s at byte %d: %s", e.Segment, e.Offset, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying error, if any.
func (e *CorruptionError) Unwrap() error { return e.Err }
