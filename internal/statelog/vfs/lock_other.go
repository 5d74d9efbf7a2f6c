//go:build !unix

package vfs

import (
	"errors"
	"os"
)

// lockFile reports that locking is unavailable: the log refuses to open rather than risk two
// writers on platforms without flock.
func lockFile(*os.File) error {
	return errors.New("file locking is not supported on this platform")
}
