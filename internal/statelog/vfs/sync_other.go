//go:build !linux

package vfs

import "os"

// dataSync falls back to a full fsync (on Darwin, os.File.Sync issues F_FULLFSYNC).
func dataSync(f *os.File) error { return f.Sync() }
