//go:build linux

package vfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// osSyncer syncs the file system of a directory with syncfs(2) on a descriptor of it. The
// descriptor stays open: syncfs reports a write-back error only to descriptors opened before
// it happened.
type osSyncer struct {
	d   *os.File
	dev uint64
}

// openSyncer opens dir for syncfs(2), once the kernel is known to report write-back errors
// through it.
func openSyncer(dir string) (Syncer, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return nil, fmt.Errorf("uname: %w", err)
	}
	if err := checkSyncfsKernel(unix.ByteSliceToString(u.Release[:])); err != nil {
		return nil, err
	}
	dev, err := device(dir)
	if err != nil {
		return nil, err
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return &osSyncer{d: d, dev: dev}, nil
}

// checkSyncfsKernel refuses kernels before 5.8, whose syncfs(2) returns success even when
// write-back failed (errors are reported since Linux 5.8, commit 735e4ae5ba28).
func checkSyncfsKernel(release string) error {
	major, minor, ok := parseKernelRelease(release)
	if !ok {
		return fmt.Errorf("cannot tell whether kernel %q reports write-back errors through syncfs(2) (Linux 5.8 or later does)", release)
	}
	if major < 5 || (major == 5 && minor < 8) {
		return fmt.Errorf("kernel %s: syncfs(2) reports write-back errors only from Linux 5.8; sync each file instead", release)
	}
	return nil
}

// parseKernelRelease reads major.minor from a uname release such as "6.1.0-18-amd64".
func parseKernelRelease(release string) (major, minor int, ok bool) {
	fields := strings.SplitN(release, ".", 3)
	if len(fields) < 2 {
		return 0, 0, false
	}
	major, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0, 0, false
	}
	digits := fields[1]
	if i := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		digits = digits[:i]
	}
	minor, err = strconv.Atoi(digits)
	if err != nil {
		return 0, 0, false
	}
	return major, minor, true
}

func device(dir string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	return uint64(st.Dev), nil // st.Dev is narrower than uint64 on some architectures
}

func (s *osSyncer) Sync() error {
	if err := retryEINTR(s.d, unix.Syncfs); err != nil {
		return &os.PathError{Op: "syncfs", Path: s.d.Name(), Err: err}
	}
	return nil
}

func (s *osSyncer) Holds(dir string) (bool, error) {
	dev, err := device(dir)
	if err != nil {
		return false, err
	}
	return dev == s.dev, nil
}

func (s *osSyncer) Close() error { return s.d.Close() }
