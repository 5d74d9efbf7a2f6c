package statelog

import (
	"fmt"

	"github.com/coordinatord/coordinatord/internal/vfs"
)

// SetStartOffset durably moves the log-start offset forward to off (atomic replace + directory
// fsync) and drops every segment whose records are all below off (the active segment is never
// dropped): Size and the segment count leave them out at once, and their files are deleted in
// the background (Close waits for that). off ≤ StartOffset() → no-op; off > EndOffset() →
// ErrOutOfRange. An I/O error persisting the offset is sticky, as for Append; a failed
// deletion is logged and tried again when segments are next dropped. A crash before the files
// are gone leaves segments below the start offset, which Open deletes. A log in a Journal moves
// its start no further than the end of its last checkpoint (Journal.Checkpointed): recovery
// cuts the log back to that end.
func (l *Log) SetStartOffset(off int64) error {
	if err := l.usable(); err != nil {
		return err
	}
	if j := l.opts.Journal; j != nil {
		off = min(off, j.Checkpointed())
	}
	if off <= l.start.Load() {
		return nil
	}
	if end := l.end.Load(); off > end {
		return fmt.Errorf("%w: start offset %d beyond end offset %d", ErrOutOfRange, off, end)
	}
	if err := writeStartFile(l.fs, l.dir, off); err != nil {
		return l.fail(err)
	}
	l.start.Store(off)
	var drop []string
	for len(l.segments) > 1 && l.segments[1].base <= off {
		drop = append(drop, l.segments[0].path)
		l.size.Add(-l.segments[0].size)
		l.segments = l.segments[1:]
	}
	l.remover.remove(drop)
	l.publish()
	return nil
}

// writeStartFile persists off as the log-start offset of the log in dir.
func writeStartFile(fsys FS, dir string, off int64) error {
	return writeOffsetFile(fsys, dir, startFileName, startTmpName, startMagic, off)
}

// writeOffsetFile atomically replaces the offset file name in dir with one holding off: write
// the temporary file tmpName, sync it, rename it over name, sync the directory.
func writeOffsetFile(fsys FS, dir, name, tmpName string, magic uint32, off int64) error {
	var b [startFileSize]byte
	encodeOffsetFile(b[:], magic, off)
	if err := vfs.ReplaceFile(fsys, dir, tmpName, name, b[:]); err != nil {
		return fmt.Errorf("statelog: %w", err)
	}
	return nil
}
