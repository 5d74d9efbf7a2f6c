// Package shardconfig maps the broker settings to the options of a state partition's shard, once,
// for the server and for the benchmarks that must run shards exactly as the server does.
//
// FromBroker sets every field of shard.Options that a broker setting decides. The rest are the
// caller's: the metrics and the file-system sync group it shares between its shards, and the
// fields no setting reaches (left at their defaults by the server).
package shardconfig
