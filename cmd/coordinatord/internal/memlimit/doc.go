// Package memlimit finds the memory limit of the process's cgroup (a container's memory limit),
// from which the server sets the Go runtime's soft memory limit when it is not told one: a
// process that lets its heap grow past its container's limit is killed by the kernel instead of
// collecting harder.
//
// It reads cgroup v2 (memory.max) and v1 (memory.limit_in_bytes) hierarchies, as the process sees
// them in /proc/self/cgroup and /proc/self/mountinfo, and takes the lowest limit along the
// cgroup's path up to the hierarchy's root, since a parent's limit bounds its children.
package memlimit
