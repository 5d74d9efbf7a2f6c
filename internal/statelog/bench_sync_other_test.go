//go:build !linux

package statelog

import "os"

// rawDataSync is the physical floor's sync where fdatasync(2) is unavailable, as in package vfs.
func rawDataSync(f *os.File) error { return f.Sync() }
