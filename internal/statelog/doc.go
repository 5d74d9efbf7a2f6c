// Package statelog is a segmented, checksummed, fsynced, append-only log of opaque records
// with dense logical offsets (like Kafka offsets) and a movable log-start offset. One Log
// holds the durable state of one state partition.
//
// # Guarantees
//
//   - Append writes a batch of records as one frame with one write call and returns after an
//     fdatasync (or, for a log in a SyncGroup, after a file-system sync that started after the
//     write; for a journaled log, once the journal holds the frame durably, the log writing it
//     out to its segment later, 64 KiB of frames at a time or at the journal's checkpoint): an
//     acknowledged batch survives any crash. A batch is atomic: recovery finds all
//     of it or none of it.
//   - Open verifies every checksum of the live log. A torn tail of the newest segment (what an
//     interrupted append leaves) is truncated and reported; any other damage fails Open with a
//     *CorruptionError naming the file and byte offset. Nothing acknowledged is dropped
//     silently. Open then syncs the newest segment and the log's directory, and LockDir the
//     ancestor directories: an append that a killed process wrote but never synced is intact in
//     the page cache, and is made durable before the log serves it or builds on it (should
//     that sync fail for a log that holds records, and without a truncation offset, Open fails
//     with ErrNotDurable). Repair, for operators, cuts the log at a corruption point and reports
//     what it dropped.
//   - Close records the end offset of a log that has not failed in its clean-end file. The next
//     Open holds the log to it: after a clean close no append was interrupted, so damage at the
//     tail, or a log that ends before or goes past that offset, is corruption rather than a torn
//     tail. Open removes the file (and syncs the directory) before the log can change. A Close
//     that cannot write it (a full disk) returns the error, removes the clean-end.tmp it
//     started if it can, and leaves the log to be opened as after a crash; Open removes a
//     clean-end.tmp left behind like the clean-end file, with a warning.
//   - Load is Open and a replay from the log-start offset in one pass: each frame is verified
//     as it is read, and its records are handed over before the next frame is read, so a
//     restart reads and checksums every byte once. Recovery is Open's; a load that fails
//     returns no log and may have handed over records before the damage, which the caller
//     discards.
//   - Every creation, rename and removal of a segment or log-start offset file, and the
//     creation of the log's directory, is followed by an fsync of the directory that holds
//     it (for segments below the durable log-start offset, deleted in the background, after
//     the deletion; Open deletes them again should a crash bring them back). A failed write or
//     sync is never retried: the log fails (ErrFailed) until reopened, because after a failed
//     fsync the kernel may already have dropped the dirty pages. The batch of a failed
//     append may still be readable from the page cache and be lost later (its pages were
//     never written back), so the failed append truncates it off the segment at once and
//     syncs the cut, before it returns. Should that cut fail too, reopening with
//     Options.TruncateAfter set to the failed log's EndOffset, its durable end, removes it. A
//     failed sync of a SyncGroup fails every log of the group until the process restarts
//     (ErrSyncFailed); each log's cut uses the segment's own fdatasync, not the group's.
//
// # Directory
//
//	<dir>/00000000000000000000-0000000000000001.seg   segment: base offset 0, segment id 1
//	<dir>/00000000000000051200-0000000000000002.seg   segment: base offset 51200, id 2 (active)
//	<dir>/start-offset                                log-start offset (absent until first set)
//	<dir>/clean-end                                   end offset at the last clean Close (absent while open)
//	<dir>/LOCK                                        flock held while the log is open
//
// Segment names are the base offset in 20 decimal digits and a segment id in 16 hex digits,
// so lexical order is offset order. Ids are unique and increase; the name must agree with the
// segment header, and each segment must start at the offset where the previous one ends. A
// new segment is started (rolled) when the next batch would take the active one past
// Options.SegmentBytes; a batch larger than that goes whole into an otherwise empty segment.
//
// # Segment file
//
//	segment  +--------+---------+-------+------------+-------------+----------+--------+
//	header   | magic  | version | flags | segment id | base offset | reserved | crc32c |
//	32 bytes | "CDSG" |   u16   |  u16  |    u64     |     u64     |   u32    |  u32   |
//	         +--------+---------+-------+------------+-------------+----------+--------+
//	         | frame: batch 1                                                          |
//	         +-------------------------------------------------------------------------+
//	         | frame: batch 2                                                          |
//	         +-------------------------------------------------------------------------+
//	         | ...                                                                     |
//
//	frame    +--------+-------+--------+-------------+-------------+------------+
//	header   | magic  | count | length | base offset | payload crc | header crc |
//	28 bytes | "CDBF" |  u32  |  u32   |     u64     |     u32     |    u32     |
//	         +--------+-------+--------+-------------+-------------+------------+
//	payload  | len u32 | record bytes | len u32 | record bytes | ...  (count records)
//	         +---------+--------------+---------+--------------+------
//
// All integers are little-endian; checksums are CRC-32C (Castagnoli). The segment header's
// crc32c covers its first 28 bytes, the frame's header crc its first 24 bytes and the payload
// crc the payload's length bytes. Flags and reserved fields are zero. A frame's base offset
// is the offset of its first record, and consecutive frames are contiguous. A record holds at
// most Options.MaxRecordBytes bytes and a payload at most MaxBatchBytes; both bounds are
// checked against the header before any buffer is sized for the payload.
//
// The log-start offset file is 20 bytes: magic "CDSO" u32, version u16, flags u16, offset
// u64, crc32c u32; the clean-end file is the same with magic "CDCE", written as
// clean-end.tmp, synced and renamed. SetStartOffset replaces it atomically (write start-offset.tmp, fsync,
// rename, fsync the directory) and only then drops segments wholly below the new offset,
// whose files a goroutine of the log deletes in the background (Close waits for it), so a
// crash in between leaves segments that the next Open deletes. The active segment is never
// deleted.
//
// The magic numbers, sizes, field layouts, file names and MaxBatchBytes are part of the format:
// changing any of them makes existing logs unreadable. A segment header or log-start offset file
// whose checksum holds but whose version, flags or reserved field this release does not know was
// written by a newer release: Open, Load, Scan and Repair refuse it with ErrUnsupportedFormat,
// which is not a *CorruptionError, so Repair never cuts it (a clean-end file of an unknown
// version is ignored, as an unreadable one is).
//
// # Torn tail or corruption
//
// The log writes only at the end of the newest segment, one frame at a time, and syncs each
// frame before writing the next; a roll syncs the new segment's header and the directory
// before the first frame goes in. So a crash can damage only the last frame of the newest
// segment, and nothing valid can follow that damage. Recovery uses exactly this:
//
//   - A frame of the newest segment that is incomplete or fails a checksum is a torn tail if
//     no intact frame exists after it in that segment: the segment is truncated there,
//     fsynced, logged and counted (sharecoord_state_log_torn_tail_truncations_total). The rest
//     of the file is scanned from the bad frame's end when its header is intact, so that
//     frame-like bytes in its records are not taken for a frame; else from the byte after its
//     start, where only a frame that continues the offsets counts: its base offset past the bad
//     frame's first record, and no further than the bad frame's bytes can hold records. A
//     client can still put a frame with such offsets in a record; then a crash that loses that
//     append's header stops the partition as corrupt, for repair-log, without losing data.
//   - If an intact frame follows the bad one, acknowledged data lies after the damage: that is
//     corruption.
//   - Bad frames in any older segment are always corruption, as are frames whose checksums
//     hold but whose content is impossible (wrong base offset, empty, malformed records),
//     header/name disagreements and gaps between segments.
//   - A newest segment whose header is incomplete or fails its checksum and which holds no
//     intact frame is what an interrupted roll leaves: it is deleted, and the segment before
//     it must then be entirely valid.
//   - A log-start offset below the first segment or beyond the end offset is corruption.
//   - With a clean-end file (the log was closed, not killed), its offset is the end the log must
//     have: a bad frame anywhere is corruption, and so is a log that ends before it or holds
//     bytes past it (a newest segment that starts there and holds only its header, as a roll
//     whose append was cut off leaves, is no such bytes). Repair removes the file for such
//     damage and judges the log as after a crash from there. A clean-end file that cannot be
//     read, or lies below the log-start offset, is ignored (logged) and the log judged as after
//     a crash.
//   - With a truncation offset (Options.TruncateAfter, the durable end of a log whose append
//     failed), everything below it was synced: a bad frame there is corruption, and so is a
//     log that ends before it. Segments wholly at or past it are deleted unread (the directory
//     synced), then the segment holding it is truncated at the frame that starts there and
//     synced; this is logged and counted (sharecoord_state_log_durable_end_truncations_total).
package statelog
