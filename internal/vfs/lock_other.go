//go:build !unix

package vfs

import (
	"errors"
	"os"
)

// lockFile reports that locking is unavailable: a caller that needs the lock refuses to go on
// rather than risk two writers on platforms without flock.
func lockFile(*os.File) error {
	return errors.New("file locking is not supported on this platform")
}
