// Package faultfs provides file systems for testing code written against package vfs under
// failure:
//
//   - FS wraps any vfs.FS and consults an Injector before every operation, so a test can fail
//     "operation #i" (OnIndex) for every i of a workload, or fail every operation matching a
//     predicate (Match with OnKinds, OnPath) with a chosen error such as syscall.EIO or
//     syscall.ENOSPC. The injector can be replaced or removed at run time (SetInjector). An
//     error wrapped in AfterEffect fails a write or sync after it took effect, as when data
//     reached the disk although the call reported an error.
//   - CrashFS is an in-memory filesystem that remembers what has been made durable: file
//     bytes only after File.Sync, directory entries (creations, renames, removals) only after
//     SyncDir of their directory. CrashClone returns the state a power cut would leave,
//     optionally letting a random part of the unsynced state survive.
//
// Both are safe for concurrent use.
package faultfs
