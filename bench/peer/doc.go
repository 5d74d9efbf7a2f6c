// Command bench-peer measures coordinatord's durable writes against etcd's on the same machine,
// in the same run, with the same client loop.
//
// It finds etcd on PATH (or installs Debian's etcd-server with apt-get when it runs as root),
// and starts, one configuration at a time, etcd with one member, coordinatord with one node (the
// single-node path: no --initial-cluster), etcd with three members and coordinatord with three
// nodes (cluster mode: every state partition a Raft group on the three nodes), each on loopback
// addresses of its own (127.0.0.11-13 for etcd, 127.0.0.21-23 for coordinatord) with its data in
// a fresh directory. Each configuration is driven by the same loop: -inflight calls in flight
// over -conns clients, round-robin over -keys share partitions of one group; for coordinatord a
// WriteShareGroupState of one share partition (the shape of `coordinatord bench load`: two state
// batches, the start offset moving forward) sent with the client package, which routes it to
// the leader of its state partition and coalesces concurrent writes to one node as its
// defaults say (-client-in-flight measures other bounds, or none, side by side); for etcd a Put of the same share partition's key whose
// value is that very request, marshalled (so the payload has the same encoded size). Both are
// answered only once durable: etcd after its WAL fsync, coordinatord after its log's.
//
// Each configuration runs a warm-up, then -duration at -inflight calls in flight, then -duration
// at one call in flight over one client. Before each configuration it waits until the 1-minute
// load average is below -max-load, so that measurements do not overlap other work; -rounds
// repeats the whole sequence, configurations alternating, and the summary gives the median and
// the spread (min–max) over the rounds. Every ratio divides coordinatord by etcd of the same node
// count in the same round.
//
// With -failover it measures instead, on a three-node coordinatord, the time from kill -9 of a
// state partition's leader to the first acknowledged write of that partition on its successor,
// -failovers times (the killed node is restarted, and the next kill waits until it is ready and
// the leaderships have been rebalanced), and the time the restarted node takes to catch up
// (/readyz 200 again).
//
// Usage, from the repository root (make bench-peer and make bench-failover do this):
//
//	make build && (cd bench/peer && go build -o ../../bin/bench-peer .)
//	bin/bench-peer -coordinatord bin/coordinatord -rounds 3
//	bin/bench-peer -coordinatord bin/coordinatord -failover -failovers 20
package main
