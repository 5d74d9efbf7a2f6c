// Package datadir owns the layout of the data directory (--data-dir): every path under it is
// named here, and here is decided whether a directory is fit for a server to start on.
//
// # Layout
//
//	<data-dir>/
//	|-- LOCK                             flock held while a server runs on the directory
//	|-- config/
//	|   |-- store                        the config store (format: package groupcfg)
//	|   `-- store.tmp                    an update of the store in progress
//	|-- __share_group_state-0/           state partition 0's log (format: package statelog)
//	|   |-- 00000000000000000000-0000000000000001.seg
//	|   |-- start-offset
//	|   |-- clean-end
//	|   `-- LOCK
//	|-- __share_group_state-1/
//	|   ...
//	`-- __share_group_state-<N-1>/       N = share.coordinator.state.topic.num.partitions
//
// A state partition's directory is PartitionPrefix followed by the partition number in decimal,
// Kafka's topic-partition directory layout for __share_group_state. The names are part of the
// format: operators back up, restore, inspect (dump-log) and repair (repair-log) partitions by
// them, and a server finds its state by them.
package datadir
