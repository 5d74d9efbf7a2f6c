//go:build linux

package diskprobe

import (
	"os"

	"golang.org/x/sys/unix"
)

// dataSync is a bare fdatasync(2), retried on EINTR, as the state log's sync is.
func dataSync(f *os.File) error {
	return onFile(f, "fdatasync", func(fd int) error { return unix.Fdatasync(fd) })
}

// allocate reserves the first n bytes of f with fallocate(2) in its default mode, which also
// sets the file's size; the file's offset stays at 0, so writes land inside the allocation.
func allocate(f *os.File, n int64) error {
	return onFile(f, "fallocate", func(fd int) error { return unix.Fallocate(fd, 0, 0, n) })
}

// onFile runs the system call call on f's descriptor, again while a signal interrupts it, and
// names f and op in its error.
func onFile(f *os.File, op string, call func(fd int) error) error {
	for {
		err := call(int(f.Fd()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: op, Path: f.Name(), Err: err}
		}
		return nil
	}
}
