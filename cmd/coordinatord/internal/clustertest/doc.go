// Package clustertest holds the fault-injection tests of cluster mode: real coordinatord
// processes, three or five of them, under a concurrent workload of the Go client, while the
// tests kill, stop, restart, starve of disk space or cut off their nodes. Every test records the
// history of the workload's calls and checks it for linearizability with porcupine, then reads
// every key back and checks that no acknowledged write was lost.
//
// The package has no code outside its tests. The tests that need root (a tmpfs mount, network
// namespaces and iptables) skip with a message saying so elsewhere; docs/reliability.md lists
// each test, what it checks and how to run them.
package clustertest
