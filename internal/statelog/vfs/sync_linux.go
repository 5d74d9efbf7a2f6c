//go:build linux

package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// dataSync flushes f's data and the metadata needed to read it back (fdatasync), skipping
// timestamps, which halves the journal work of a full fsync on an append-only file.
func dataSync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		for {
			serr = unix.Fdatasync(int(fd))
			if serr != unix.EINTR {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
