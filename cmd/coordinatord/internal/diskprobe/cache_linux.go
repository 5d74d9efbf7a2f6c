//go:build linux

package diskprobe

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// DropCaches writes every dirty page back, then asks the kernel to drop the page cache, dentries
// and inodes (echo 3 > /proc/sys/vm/drop_caches), so that the next reads come from the disk. It
// needs root (CAP_SYS_ADMIN); the error says so otherwise.
func DropCaches() error {
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		return fmt.Errorf("drop the page cache (needs root): %w", err)
	}
	return nil
}
