// Package diskprobe measures the physical floors the benchmarks compare coordinatord against, on
// the disk that holds a data directory: the latency of one small appending write followed by
// fdatasync (the cost every durable commit pays at least once), and the sequential read
// bandwidth of existing files (the floor of a restart that must read every log byte).
//
// Both measurements use plain system calls, without coordinatord's log code, so that they are
// floors and not copies of what they are compared with.
package diskprobe
