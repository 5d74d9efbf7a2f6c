package datadir

import (
	"io"

	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs"
)

// Lock takes the lock of the data directory dataDir, the file LOCK in it, and holds it until the
// returned Closer is closed: two servers on one data directory would overwrite each other's
// config store and fight over the state logs, so the second is refused before it reads anything.
// The directory and its missing parents are created and made durable first. Lock fails at once,
// saying that the directory is in use (an error wrapping syscall.EWOULDBLOCK), while another
// process holds the lock. It is the lock a state log takes on its own directory
// (statelog.LockDir).
func Lock(fsys vfs.FS, dataDir string) (io.Closer, error) {
	return statelog.LockDir(fsys, dataDir)
}
