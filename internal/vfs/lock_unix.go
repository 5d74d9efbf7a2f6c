//go:build unix

package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes a non-blocking exclusive flock on f. flock locks belong to the open file
// description, so a second Lock of the same file conflicts even within one process.
func lockFile(f *os.File) error {
	return retryEINTR(f, func(fd int) error { return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) })
}
