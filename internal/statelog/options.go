package statelog

import (
	"fmt"

	"github.com/coordinatord/coordinatord/internal/vfs"
)

// DefaultSegmentBytes is the default segment size (Kafka's
// share.coordinator.state.topic.segment.bytes default).
const DefaultSegmentBytes int64 = 100 << 20

// DefaultMaxRecordBytes is the default bound on one record.
const DefaultMaxRecordBytes = 8 << 20

// DefaultReadBufferBytes is the default replay read buffer.
const DefaultReadBufferBytes = 1 << 20

// minReadBufferBytes keeps tiny configured buffers workable; frames larger than the buffer
// grow it anyway.
const minReadBufferBytes = 64

// MaxReadBufferBytes caps Options.ReadBufferBytes: the buffer is the unit of one read, and a
// read larger than a core's cache evicts its first bytes before the records in them are
// decoded. Restarting 50 logs holding 1 GiB took 6 % less time with 1 MiB reads than with
// 5 MiB ones (docs/benchmarks.md, one-pass load). Kernel readahead, not the read size, keeps the
// disk streaming.
const MaxReadBufferBytes = 1 << 20

// FS is the filesystem seam of the log; see package vfs. Tests substitute the filesystems of
// package faultfs to inject errors and simulate power cuts.
type FS = vfs.FS

// File is an open file of an FS.
type File = vfs.File

// Options configures a Log. Zero values mean the defaults.
type Options struct {
	SegmentBytes    int64    // roll when the active segment would exceed this
	MaxRecordBytes  int      // bound on one record, checked on append and before allocating on read
	ReadBufferBytes int      // replay and load read buffer, at most MaxReadBufferBytes (soft; maps to share.coordinator.load.buffer.size)
	FS              FS       // nil → the operating system's filesystem
	Metrics         *Metrics // nil → nothing recorded
	Name            string   // value of the `partition` label on per-log metrics, e.g. "7"

	// TruncateAfter, when not nil, is an end offset that recovery (Open, Load) truncates the
	// log to: every record at an offset ≥ *TruncateAfter is removed from disk before the log
	// is used, without being read. A caller reopening a log after a failed Append passes the
	// durable end the failed log had (its EndOffset: the end after the last successful sync),
	// so that a batch whose write or sync failed is never found again, even if its bytes are
	// still in the page cache. Frames below it must all verify (they were synced): damage
	// there, or a log that ends before it, is a *CorruptionError. It must lie at a frame
	// boundary and at or above the log-start offset; Repair and Scan ignore it.
	TruncateAfter *int64
	// SyncGroup, when set, makes Append durable with the group's shared file-system sync
	// instead of an fdatasync of the segment (see SyncGroup). Every log of a group must live
	// on the group's file system; Open and Load refuse a log elsewhere, and a log whose group
	// has failed.
	SyncGroup *SyncGroup
	// DeferSync makes Append return once its frame is written, without syncing it: Sync makes
	// every append before it durable, and Close syncs before it records the clean end. It is for
	// a log that is a copy of records held durably elsewhere (a replica of a state partition,
	// whose Raft log holds them until the replica syncs): after a crash, what followed the last
	// Sync may be lost or torn anywhere past it, so the owner reopens the log with TruncateAfter
	// set to the end of its last Sync. A sealed segment is synced when the log rolls past it.
	// It cannot be combined with SyncGroup.
	DeferSync bool
	// Journal, when set, makes Append durable by writing its frame to a journal the node's logs
	// share (one write and one fdatasync per round for all of them) instead of by syncing the
	// segment; the journal syncs the log itself now and then (Checkpoint) and, after a crash,
	// appends again what the log lost. The log then keeps its frames in a tail, written out to
	// the segment in one write per 64 KiB of them, at a roll, Sync, Close, Replay or Snapshot,
	// and by Checkpoint: a write per append is not needed for frames the journal holds. It
	// excludes SyncGroup and DeferSync.
	Journal Journal
	// OwnerFiles names files in the log's directory that belong to the log's owner (such as a
	// replica's record of what it applied): Open leaves them alone without reporting them.
	OwnerFiles []string
}

// resolve fills in defaults and rejects values the log cannot honour.
func (o Options) resolve() (Options, error) {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.MaxRecordBytes == 0 {
		o.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if o.ReadBufferBytes == 0 {
		o.ReadBufferBytes = DefaultReadBufferBytes
	}
	switch {
	case o.SegmentBytes < 0:
		return o, fmt.Errorf("statelog: SegmentBytes %d is negative", o.SegmentBytes)
	case o.MaxRecordBytes < 0 || o.MaxRecordBytes > MaxBatchBytes-recordPrefixSize:
		return o, fmt.Errorf("statelog: MaxRecordBytes %d outside [1, %d]", o.MaxRecordBytes, MaxBatchBytes-recordPrefixSize)
	case o.ReadBufferBytes < 0:
		return o, fmt.Errorf("statelog: ReadBufferBytes %d is negative", o.ReadBufferBytes)
	case o.DeferSync && o.SyncGroup != nil:
		return o, fmt.Errorf("statelog: DeferSync and SyncGroup exclude each other")
	case o.Journal != nil && (o.DeferSync || o.SyncGroup != nil):
		return o, fmt.Errorf("statelog: a Journal excludes DeferSync and SyncGroup")
	}
	o.ReadBufferBytes = min(max(o.ReadBufferBytes, minReadBufferBytes), MaxReadBufferBytes)
	if o.FS == nil {
		o.FS = vfs.OS()
	}
	return o, nil
}
