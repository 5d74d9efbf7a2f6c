//go:build !linux

package diskprobe

import (
	"errors"
	"os"
)

// dataSync falls back to fsync where fdatasync does not exist.
func dataSync(f *os.File) error { return f.Sync() }

// allocate is Linux only.
func allocate(f *os.File, _ int64) error {
	return &os.PathError{Op: "fallocate", Path: f.Name(), Err: errors.ErrUnsupported}
}
