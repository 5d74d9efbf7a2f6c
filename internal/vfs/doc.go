// Package vfs is the file-system seam of coordinatord's storage: the few file and directory
// operations that durable state needs, as interfaces, plus the operating system's implementation
// and an overlay that keeps every change in memory (for dry runs). ReadFile reads a small file
// whole through any of them.
//
// Storage code reaches the disk only through an FS, so tests can substitute a file system that
// injects errors or simulates a power cut (package faultfs). The seam is deliberately small;
// every method is one file-system operation (a create, a write, a sync, ...), which keeps fault
// injection precise.
//
// vfs imports no other package of coordinatord: everything that stores data may depend on it.
package vfs
