//go:build linux

package diskprobe

import (
	"os"

	"golang.org/x/sys/unix"
)

// dataSync is a bare fdatasync(2), retried on EINTR, as the state log's sync is.
func dataSync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

// allocate reserves the first n bytes of f with fallocate(2) in its default mode, which also
// sets the file's size; the file's offset stays at 0, so writes land inside the allocation.
func allocate(f *os.File, n int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, 0, n)
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
