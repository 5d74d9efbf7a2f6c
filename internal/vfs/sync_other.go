//go:build !linux

package vfs

import (
	"errors"
	"os"
)

// dataSync falls back to a full fsync (on Darwin, os.File.Sync issues F_FULLFSYNC).
func dataSync(f *os.File) error { return f.Sync() }

// openSyncer refuses: only Linux's syncfs(2), since 5.8, both syncs a whole file system and
// reports write-back errors.
func openSyncer(string) (Syncer, error) {
	return nil, errors.New("a whole-file-system sync needs Linux 5.8 or later (syncfs(2)); sync each file instead")
}
