package vfs

import "io"

// FS is a filesystem. Names are slash- or OS-separated paths as accepted by path/filepath.
// Implementations must be safe for concurrent use. Errors for a missing file satisfy
// errors.Is(err, fs.ErrNotExist) and for an existing one errors.Is(err, fs.ErrExist).
type FS interface {
	// Create creates a new, empty file open for reading and writing. It fails if name exists.
	// The new directory entry is durable only after SyncDir of its directory.
	Create(name string) (File, error)
	// Open opens an existing file read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing.
	OpenReadWrite(name string) (File, error)
	// Remove removes a file. The removal is durable only after SyncDir of its directory.
	Remove(name string) error
	// Rename atomically replaces newname with oldname. It is durable only after SyncDir of the
	// directory (both names must be in the same directory).
	Rename(oldname, newname string) error
	// ReadDir returns the names of the entries of dir, sorted.
	ReadDir(dir string) ([]string, error)
	// MkdirAll creates dir and any missing parents. New entries are durable only after SyncDir
	// of their parent.
	MkdirAll(dir string) error
	// SyncDir makes the entries of dir (creations, renames, removals) durable.
	SyncDir(dir string) error
	// Lock takes an exclusive advisory lock on the file name (created if missing), held until
	// the returned Closer is closed. It fails at once, with an error wrapping syscall.EWOULDBLOCK,
	// if another holder has the lock.
	Lock(name string) (io.Closer, error)
	// OpenSyncer opens the file system that holds the directory dir for whole-file-system
	// syncs. It fails where such a sync would not report write-back errors reliably.
	OpenSyncer(dir string) (Syncer, error)
}

// Syncer syncs one whole file system: syncfs(2) on a descriptor kept open for its lifetime.
type Syncer interface {
	// Sync makes durable every write made, through any file, to the file system before the
	// call, with the metadata needed to read it back. It reports a write-back error that
	// happened on the file system since the Syncer was opened, once: a later Sync may succeed
	// although the data of the failed write-back is lost, so callers must treat the first
	// error as permanent.
	Sync() error
	// Holds reports whether the directory dir lives on this file system.
	Holds(dir string) (bool, error)
	io.Closer
}

// File is an open file. Reads and writes are positional; a File keeps no cursor.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync makes the file's written data durable, together with the metadata needed to read it
	// back (its size): fdatasync(2) where available. A failed Sync leaves the durability of
	// every unsynced write unknown; callers must not retry it.
	Sync() error
	// Truncate changes the size of the file. The change is durable only after Sync.
	Truncate(size int64) error
	// Size returns the current size of the file in bytes.
	Size() (int64, error)
}
