// Package groupcfg owns every configuration coordinatord reads: the definition of each key, the
// static broker configuration, the dynamic broker values and per-group overrides kept durable in
// the data directory, validation when they change and clamping when they are evaluated.
//
// # Keys
//
// Definitions() is the one table of keys (name, type, default, validator, importance,
// documentation, scope, dynamic or not, synonym and bounds). Everything else reads it: LoadStatic,
// IncrementalAlterConfigs, DescribeConfigs, the Provider getter and the README's config table (a
// test checks it against the table). Broker keys come, in decreasing precedence, from --override KEY=VALUE, the
// environment (COORDINATORD_ + the key upper-cased, dots as underscores) and a Java properties
// file; the rest take their defaults. Group keys are set per share group with
// IncrementalAlterConfigs on a GROUP resource; an unset group key inherits its broker synonym's
// value in force (e.g. share.delivery.count.limit inherits group.share.delivery.count.limit).
//
// # Validate on update, clamp on evaluate (KIP-1240)
//
// A group value is checked, when it is set, against the bounds in force: the group.share.min.*
// and group.share.max.* broker values for the KIP-932/KIP-1240 keys, and [200, the broker value of
// share.coordinator.snapshot.update.records.per.snapshot] for share.snapshot.update.records.per.snapshot.
// Changing the bounds later (a restart with other static values, or altering the snapshot
// ceiling on the BROKER resource) never re-validates stored overrides and never stops start-up:
// the stored value is kept, and its effective value is clamped to the bounds in force when it
// is evaluated, with one WARN log per change of outcome and the gauge
// sharecoord_group_config_clamped{config} counting the overrides clamped now. DescribeConfigs
// shows both the stored and the effective value.
//
// The share coordinator itself reads only the snapshot limit; the other group configs are kept
// and served for the share-partition leaders (front ends) that enforce them, as Kafka's
// GroupConfigManager does.
//
// # On-disk format
//
// The store is one file, at the path Open is given (the server's is <data-dir>/config/store, see
// package datadir), holding the whole durable state: the number of state partitions recorded on
// first start, the dynamic broker values and every group's overrides. It is a snapshot of the
// state followed by the changes made since, one change record each. It is text, so that an
// operator can read it:
//
//	+--------------------------------------------------------------+
//	| coordinatord-config <version> <length> <crc32c>\n            |  header line
//	+--------------------------------------------------------------+
//	| {                                                            |
//	|   "num_partitions": 50,                                      |  snapshot: <length> bytes
//	|   "generation": 7,                                           |  of JSON, keys sorted
//	|   "broker": {"share.coordinator.snapshot...": "800"},        |
//	|   "groups": {"g1": {"share.delivery.count.limit": "8"}}      |
//	| }\n                                                          |
//	+--------------------------------------------------------------+
//	| change <length> <crc32c>\n                                   |  change record: header
//	| {"generation":8,"groups":{"g2":{"share.isolation...":"..."}}}\n |  line, <length> bytes of
//	+--------------------------------------------------------------+  JSON on one line
//	| change <length> <crc32c>\n                                   |
//	| {"generation":9,"groups":{"g1":{}},"broker":{},"broker_set":true}\n |
//	+--------------------------------------------------------------+
//	| ...                                                          |  zero or more records
//	+--------------------------------------------------------------+
//
// <version> is 2 (decimal), <length> the decimal byte length of the JSON that follows its header
// line (including its final newline) and <crc32c> the CRC-32C (Castagnoli) of that JSON as 8
// lower-case hex digits. Values are canonical text as validated when set; generation grows by one
// with every change. A change record holds the generation it makes (one more than the state
// before it) and what it changes: the complete new overrides of each group it touches (an empty
// object: the group has none left) and, when broker_set is true, the complete new set of dynamic
// broker values. The magic words, the version and the field layout are part of the format; a
// reader refuses any other version (a later one with a *StoreError whose Newer is set: the file
// is not damaged, a newer release wrote it). Version 1, written by earlier releases, is a snapshot
// without records; Open reads it and rewrites the store in version 2 before it serves.
//
// A change appends its record at the end of the file and fsyncs it; only then is it acknowledged
// and made visible. When the records would take more bytes than the snapshot (and at least
// 1 MiB), the change instead rewrites the store: it writes the whole new state as a snapshot
// without records to the store's path with .tmp appended (store.tmp), fsyncs it, renames it over
// the store and fsyncs the directory. A new store is written that way too, and also fsyncs the
// directory's parent, where Open created the directory. So a change costs what it changes, the
// occasional rewrite costs what the store holds, and reading the store back costs at most about
// twice its snapshot.
//
// A crash leaves either the old or the new file of a rewrite (a leftover store.tmp is a rewrite
// that was never acknowledged, and is removed on open), and at most one unfinished record at the
// end of the file: one whose header line or JSON is cut short, one of zero bytes, or a last
// record whose checksum fails. Open drops it (with a WARN; it was never acknowledged), and the
// next change rewrites the file. Anything else that fails a check (the header or the snapshot's
// length, checksum or contents; a record that others follow and whose checksum fails, a bad record
// header, contents or generation, bytes that cannot start a record) stops start-up with a
// *StoreError naming the file, the damage and its byte offset. After an append that failed the
// next change rewrites the file; once an fsync fails, what is on disk is uncertain and the store
// refuses further changes until a restart reloads it.
package groupcfg
