// Package record is the codec of Kafka's share-group state records (the records of
// __share_group_state): their types, key and values, and the one byte layout that Encode writes
// and Decode reads, in which every statelog record of a state partition is stored.
//
// Two decoders read that layout. Decode returns a Record that owns its memory, for tools and tests.
// DecodeInto is replay's: it fills a Decoded that aliases its input and a scratch slice, taking the
// usual shapes in one straight pass and falling back to a field-by-field reader, which stays the
// authority on errors, for anything else. Both return the same errors: ErrUnknownRecordType (a
// record to skip), ErrUnknownValueVersion (a record this release cannot read) and
// ErrMalformedRecord. The encoders append to a caller's buffer (AppendSnapshot, AppendUpdate,
// AppendTombstone) given the key message EncodeKey returns, which is also a compact map key.
//
// The value types carry JSON tags: their JSON form is what coordinatord dump-log prints. A new
// record type is added here alone: its Type, its value type, Record's field and Value, and the
// encoder and decoders.
//
// # Record format
//
// One statelog record holds one Kafka coordinator record of __share_group_state:
//
//	+-------------------------+-----+---------------------------------+-------+
//	| keyLength zigzag varint | key | valueLength zigzag varint (-1 = | value |
//	|                         |     | null: tombstone, no value bytes)|       |
//	+-------------------------+-----+---------------------------------+-------+
//	key   = int16 record type (0 ShareSnapshot, 1 ShareUpdate)
//	        + key message v0: int16 length + group id bytes | topic id (16 bytes) | int32 partition
//	value = int16 value version (0)
//	        + ShareSnapshotValue v0: int32 SnapshotEpoch | int32 StateEpoch | int32 LeaderEpoch |
//	          int64 StartOffset | int64 CreateTimestamp | int64 WriteTimestamp | StateBatches |
//	          tagged fields
//	        | ShareUpdateValue v0: int32 SnapshotEpoch | int32 LeaderEpoch | int64 StartOffset |
//	          StateBatches | tagged fields
//	StateBatches  = unsigned varint (count+1) × (int64 FirstOffset | int64 LastOffset |
//	                int8 DeliveryState | int16 DeliveryCount | tagged fields)
//	tagged fields = unsigned varint count × (unsigned varint tag | unsigned varint size | bytes);
//	                tag 0 of a value is the int32 DeliveryCompleteCount, written only when ≠ -1
//
// Integers are big-endian, as in Kafka. A tombstone is a ShareSnapshot key with a null value. These
// layouts are Kafka's (4.2+), and they and the constants of this package that describe them
// (record types, value version, tags, field sizes) are part of the on-disk format: changing them
// makes existing logs unreadable.
package record
