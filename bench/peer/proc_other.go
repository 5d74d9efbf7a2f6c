//go:build !linux

package main

import "syscall"

// childAttr: only Linux can tie a child's life to its parent's.
func childAttr() *syscall.SysProcAttr { return nil }

// fsType is not known off Linux.
func fsType(string) string { return "file system unknown" }
