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
