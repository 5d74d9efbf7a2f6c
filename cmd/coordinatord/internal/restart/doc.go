// Package restart measures how long coordinatord takes to restart: to replay every state
// partition's log until all are ACTIVE, as the server does at start (all partitions open at
// once and load concurrently), against the physical floor of reading the same bytes
// sequentially from the same disk.
//
// Generate builds a reproducible data directory: the server's layout
// (DATA_DIR/__share_group_state-<p>/), written through real shards with the options the server
// gives them for its default settings (shardconfig.FromBroker; only the write timeout is longer),
// by a deterministic workload (share partitions of one group routed to state partitions with the
// server's hash, each written round-robin) until the logs hold the requested bytes. Measure then
// reads every segment file sequentially to obtain the floor and times the restart, dropping the
// page cache before each of the two when asked to, so that both read the disk.
package restart
