//go:build linux

package main

import (
	"fmt"
	"syscall"
)

// childAttr makes a server die with the benchmark, should the benchmark itself be killed.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// fsType names the file system of dir: a data directory on tmpfs would make every fsync free.
func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "file system unknown: " + err.Error()
	}
	names := map[int64]string{0xef53: "ext4", 0x01021994: "tmpfs: fsync costs nothing here", 0x58465342: "xfs", 0x9123683e: "btrfs", 0x794c7630: "overlayfs"}
	if n, ok := names[int64(st.Type)]; ok {
		return n
	}
	return fmt.Sprintf("file system type %#x", st.Type)
}
