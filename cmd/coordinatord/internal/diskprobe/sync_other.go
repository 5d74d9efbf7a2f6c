//go:build !linux

package diskprobe

import "os"

// dataSync falls back to fsync where fdatasync does not exist.
func dataSync(f *os.File) error { return f.Sync() }
