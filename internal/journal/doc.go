// Package journal keeps a node's write-ahead journal of its state logs: one file that every
// state partition's appends go to, made durable with one write and one fdatasync per round for
// all of them, where each log syncing its own segment would cost an fdatasync per partition
// and commit (statelog.Options.Journal).
//
// # Rounds
//
// A log keeps its frame in its tail, which it writes out to its segment (not synced) later, 64 KiB
// at a time, then writes it to the journal (Log.Write), and its append is acknowledged once a
// round made the journal record durable. One caller at a time
// runs a round: it writes everything queued since the last one with one write and one
// fdatasync; callers that queue meanwhile wait for the next round, which one of them then runs.
// Before it takes what is queued, that caller yields the processor, and again as long as frames
// keep coming (a few times at most): the shards that one request's keys woke, and those the last
// round answered, are runnable, and a round started at once would carry the first of them only.
// A failed write or sync poisons the journal: every later write fails (statelog.ErrFailed
// follows in each log) until the process restarts and recovers from what is on disk.
//
// # Checkpoints
//
// Every CheckpointInterval (or CheckpointBytes of records) the journal starts a new segment,
// has every log write its tail out and sync its active segment (statelog.Log.Checkpoint) and
// records, in the checkpoint file, each log's end at that moment with the new segment's id, then
// deletes the older segments: every frame they hold is below the recorded ends, because a log
// holds a frame in its tail or segment before it journals it. A log never moves its log-start offset past its last recorded
// end (statelog.Journal.Checkpointed). A log that failed (a write, sync or cut of its own) cannot
// vouch for its frames, whatever a later sync says: the checkpoint fails instead, which fails
// the journal and keeps its copy for the restart to append again.
//
// # Reused files
//
// An fdatasync of data written over blocks a file already has needs no metadata change, and is
// cheaper than one of an append. So Open writes the first segment's first PreallocateBytes as
// zeros (unless a file is kept for reuse), and a checkpoint keeps the newest segment it no longer
// needs as the prepared file (unless the prepared file there is larger), which the next new
// segment is renamed from. After each checkpoint
// (and once after Open) the checkpoint goroutine makes the prepared file as large as the next
// segment will need, writing and syncing zeros past what it holds: what the segment just closed
// was written at per CheckpointInterval, and a quarter more (PreallocateBytes before any
// checkpoint, at most a quarter more than CheckpointBytes). A round that reaches its segment's
// extent (the blocks its file had) while a prepared file is ready asks for a checkpoint, which
// moves to that file: rounds append only until the checkpoint goroutine has run. A segment that
// is left is truncated to its records first, and each record's checksum covers its segment's id,
// so that what a reused file held before is never read as a record: it ends the journal like a
// torn record, which only the last segment may have.
//
// # Recovery
//
// Before the logs open, Recover cuts each log back to its recorded end (what followed may be
// lost or torn anywhere after a crash, since the log did not sync it) and appends again the
// frames the journal holds from the checkpoint's segment on; frames below a log's end are ones
// it held already. Then it records a new checkpoint and deletes the segments, and Open starts an
// empty one. After a clean Close (its checkpoint says so) a log the journal holds nothing more of
// is not opened at all: it was closed, and so synced, at its recorded end.
//
// # Format
//
// DIR/checkpoint is JSON: {"version": 1, "segment": first segment to read, "ends": {log id:
// end offset}, "held": {log id: first segment of its frames}, for logs recovery could not open},
// replaced atomically. DIR/NNNNNNNNNNNNNNNNNNNN.journal (the id in 20 digits)
// starts with a 16-byte header ("cdjrnl", version uint16 1, id uint64) followed by records:
// frame length uint32, log id uint32, CRC-32C of the segment's id (uint64), the log id's four
// bytes and the frame uint32, then the frame exactly as statelog wrote it (its own header and
// checksum included). DIR/prepared is a file kept for reuse, not read. Integers are
// little-endian. A record cut short or failing its checksum ends the journal, in the last
// segment only.
package journal
