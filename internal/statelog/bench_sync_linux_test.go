//go:build linux

package statelog

import (
	"os"

	"golang.org/x/sys/unix"
)

// rawDataSync is the physical floor's sync: a bare fdatasync(2).
func rawDataSync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
