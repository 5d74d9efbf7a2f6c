//go:build unix

package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// retryEINTR calls op with f's descriptor, again for as long as a signal interrupts it (EINTR).
func retryEINTR(f *os.File, op func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	err = rc.Control(func(fd uintptr) {
		for {
			if opErr = op(int(fd)); opErr != unix.EINTR {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return opErr
}
