// Package loadgen is an end-to-end gRPC load generator for a running coordinatord.
//
// A run is a sequence of phases against one server. Each phase keeps Concurrency calls in flight
// over Connections client connections for Warmup (not recorded) and then Duration (recorded):
// every call's latency goes into an HDR histogram, failures are counted by cause. The two phase
// kinds are:
//
//   - write: durable WriteShareGroupState calls, one share partition per call, round-robin over
//     Keys share partitions of one group (initialized before the phase), each carrying
//     BatchesPerWrite state batches and moving the partition's start offset forward, as a
//     share-partition leader does;
//   - health: grpc.health.v1.Health/Check calls, the baseline: a unary RPC through the same
//     server, connections and interceptors, doing no durable work.
//
// Running both in one invocation gives ratios measured on the same machine, server and network
// path, which is what the benchmark targets compare.
package loadgen
