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
// first start, the dynamic broker values and every group's overrides. It is text, so that an
// operator can read it:
//
//	+--------------------------------------------------------------+
//	| coordinatord-config <version> <length> <crc32c>\n            |  header line
//	+--------------------------------------------------------------+
//	| {                                                            |
//	|   "num_partitions": 50,                                      |  <length> bytes of JSON,
//	|   "generation": 7,                                           |  keys sorted
//	|   "broker": {"share.coordinator.snapshot...": "800"},        |
//	|   "groups": {"g1": {"share.delivery.count.limit": "8"}}      |
//	| }\n                                                          |
//	+--------------------------------------------------------------+
//
// <version> is 1 (decimal), <length> the decimal byte length of the JSON body (including its final
// newline) and <crc32c> the CRC-32C (Castagnoli) of the body as 8 lower-case hex digits. Values are
// canonical text as validated when set; generation grows by one with every change. The magic
// word, the version and the field layout are part of the format; a reader refuses any other
// version (a later one with a *StoreError whose Newer is set: the file is not damaged, a newer
// release wrote it).
//
// An update writes the whole new state to the store's path with .tmp appended (store.tmp), fsyncs
// it, renames it over the store and fsyncs the directory; only then is the change acknowledged
// and made visible. The first one also fsyncs the directory's parent, where Open created the
// directory. A crash at any point leaves either the old or the new file (a leftover store.tmp is
// an update that was never acknowledged, and is removed on open). A store file that fails any check (header, length,
// checksum, contents) stops start-up with a *StoreError naming the file and the damage. Once an
// fsync fails, what is on disk is uncertain and the store refuses further changes until a
// restart reloads it.
package groupcfg
