// Package vfs is the filesystem seam of the state log: the few file and directory operations
// the log performs, as interfaces, plus the operating system's implementation.
//
// The log never touches the os package directly, so tests can substitute a filesystem that
// injects errors or simulates a power cut (see package faultfs). The seam is deliberately small;
// every method maps to one system call, which keeps fault injection precise.
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
	// the returned Closer is closed. It fails at once if another holder has the lock.
	Lock(name string) (io.Closer, error)
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
