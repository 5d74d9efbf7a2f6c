//go:build unix

package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes a non-blocking exclusive flock on f. flock locks belong to the open file
// description, so a second Lock of the same file conflicts even within one process.
func lockFile(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var lerr error
	err = rc.Control(func(fd uintptr) {
		for {
			lerr = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB)
			if lerr != unix.EINTR {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return lerr
}
