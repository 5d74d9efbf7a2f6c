//go:build linux

package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// dataSync flushes f's data and the metadata needed to read it back (fdatasync), skipping
// timestamps, which halves the journal work of a full fsync on an append-only file.
func dataSync(f *os.File) error {
	if err := retryEINTR(f, unix.Fdatasync); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}
