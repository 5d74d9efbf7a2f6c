package record

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Type is the int16 record type that prefixes every record key.
type Type int16

// The record types of the share-group state log.
const (
	// TypeSnapshot is ShareSnapshot: the whole state of a key; with no value, a tombstone.
	TypeSnapshot Type = 0
	// TypeUpdate is ShareUpdate: a delta applied on top of the latest snapshot.
	TypeUpdate Type = 1
)

// String returns "snapshot", "update" or "type(n)".
func (t Type) String() string {
	switch t {
	case TypeSnapshot:
		return "snapshot"
	case TypeUpdate:
		return "update"
	}
	return fmt.Sprintf("type(%d)", int16(t))
}

// StateBatch is one range of offsets with its delivery information, as a value stores it.
// LastOffset is inclusive. DeliveryState is Kafka's byte: 0 available, 1 acquired, 2 acknowledged,
// 4 archived.
type StateBatch struct {
	FirstOffset   int64 `json:"first_offset"`
	LastOffset    int64 `json:"last_offset"`
	DeliveryState int8  `json:"delivery_state"`
	DeliveryCount int16 `json:"delivery_count"`
}

// Batches is the StateBatches field of a value. It is a []StateBatch that shows as a JSON array
// even when nil, so that a value without batches prints "state_batches":[].
type Batches []StateBatch

// MarshalJSON encodes b as a JSON array, [] when b is nil.
func (b Batches) MarshalJSON() ([]byte, error) {
	if b == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]StateBatch(b))
}

// SnapshotValue is ShareSnapshotValue v0. DeliveryCompleteCount is tagged field 0, written after
// the batches and only when it is not -1 (unknown); it is listed before StateBatches so that the
// JSON form shows the scalar fields first.
type SnapshotValue struct {
	SnapshotEpoch         int32   `json:"snapshot_epoch"`
	StateEpoch            int32   `json:"state_epoch"`
	LeaderEpoch           int32   `json:"leader_epoch"`
	StartOffset           int64   `json:"start_offset"`
	CreateTimestamp       int64   `json:"create_timestamp"`
	WriteTimestamp        int64   `json:"write_timestamp"`
	DeliveryCompleteCount int32   `json:"delivery_complete_count"`
	StateBatches          Batches `json:"state_batches"`
}

// UpdateValue is ShareUpdateValue v0. LeaderEpoch and StartOffset -1 mean "keep".
// DeliveryCompleteCount is tagged field 0, as in SnapshotValue.
type UpdateValue struct {
	SnapshotEpoch         int32   `json:"snapshot_epoch"`
	LeaderEpoch           int32   `json:"leader_epoch"`
	StartOffset           int64   `json:"start_offset"`
	DeliveryCompleteCount int32   `json:"delivery_complete_count"`
	StateBatches          Batches `json:"state_batches"`
}

// Record is one decoded record of the state log. Exactly one of Snapshot, Update or Tombstone is
// set for a known Type.
type Record struct {
	Type      Type
	Key       Key
	Snapshot  *SnapshotValue
	Update    *UpdateValue
	Tombstone bool
}

// Value returns the record's value: the *SnapshotValue or *UpdateValue its Type selects, or nil
// (an untyped nil) for a tombstone or a record without one.
func (r Record) Value() any {
	switch {
	case r.Tombstone:
	case r.Snapshot != nil:
		return r.Snapshot
	case r.Update != nil:
		return r.Update
	}
	return nil
}

// Decoding errors. Decode wraps them with details; test with errors.Is.
var (
	// ErrUnknownRecordType marks a record whose type is neither snapshot nor update. Replay skips
	// such records with a warning, as Kafka's loader does.
	ErrUnknownRecordType = errors.New("unknown record type")
	// ErrUnknownValueVersion marks a value version this package cannot read; it fails a load.
	ErrUnknownValueVersion = errors.New("unknown record value version")
	// ErrMalformedRecord marks bytes that do not follow the record layout.
	ErrMalformedRecord = errors.New("malformed record")
)

// Sizes fixed by the format.
const (
	valueVersion      = 0
	batchWireSize     = 8 + 8 + 1 + 2 + 1 // first, last, state, count, empty tagged-field section
	keyFixedSize      = 2 + 16 + 4        // group length, topic id, partition (after the group bytes)
	maxGroupIDBytes   = math.MaxInt16     // an int16-prefixed string
	dccTag            = 0                 // DeliveryCompleteCount's tag
	snapshotFixedSize = 2 + 4 + 4 + 4 + 8 + 8 + 8
	updateFixedSize   = 2 + 4 + 4 + 8
)

// Decode decodes one state-log record:
//
//	zigzag-varint keyLength | key | zigzag-varint valueLength (-1 = null: tombstone) | value
//
// with key = int16 type + key message v0 and value = int16 version + flexible value v0. A type
// other than snapshot/update returns a Record carrying only that Type and an error wrapping
// ErrUnknownRecordType (skippable). A value version other than 0 returns an error wrapping
// ErrUnknownValueVersion. Any other deviation (short input, null non-nullable field, trailing
// bytes, an update or unknown type without value) wraps ErrMalformedRecord. The returned Record
// does not alias b.
func Decode(b []byte) (Record, error) {
	var d Decoded
	batches, err := DecodeInto(b, &d, nil)
	if err != nil {
		return Record{Type: d.Type}, err
	}
	rec := Record{Type: d.Type, Key: DecodeKey(string(d.Key)), Tombstone: d.Tombstone}
	var owned []StateBatch
	if len(batches) > 0 {
		owned = slices.Clone(batches)
	}
	switch {
	case d.Tombstone:
	case d.Type == TypeSnapshot:
		v := d.Snapshot
		v.StateBatches = owned
		rec.Snapshot = &v
	default:
		v := d.Update
		v.StateBatches = owned
		rec.Update = &v
	}
	return rec, nil
}

// Encode encodes r in the layout Decode reads. It fails if the group id is longer than 32767
// bytes, if Type is unknown, or if the value pointer matching Type is nil for a non-tombstone (a
// tombstone must have Type snapshot).
func Encode(r Record) ([]byte, error) {
	key, err := EncodeKey(r.Key)
	if err != nil {
		return nil, err
	}
	switch {
	case r.Tombstone && r.Type == TypeSnapshot:
		return AppendTombstone(nil, key), nil
	case r.Tombstone:
		return nil, fmt.Errorf("encode record: a tombstone must have type snapshot, got %s", r.Type)
	case r.Type == TypeSnapshot && r.Snapshot != nil:
		return AppendSnapshot(nil, key, r.Snapshot), nil
	case r.Type == TypeUpdate && r.Update != nil:
		return AppendUpdate(nil, key, r.Update), nil
	}
	return nil, fmt.Errorf("encode record: type %s without a matching value", r.Type)
}

// ---- encoding ----

func appendVarint(b []byte, v int32) []byte {
	return appendUvarint(b, zigzag(v))
}

func appendUvarint(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func uvarintLen(v uint32) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func appendRecordKey(b []byte, t Type, key string) []byte {
	b = appendVarint(b, int32(2+len(key)))
	b = binary.BigEndian.AppendUint16(b, uint16(t))
	return append(b, key...)
}

func taggedSize(dcc int32) int {
	if dcc == -1 {
		return 1
	}
	return 1 + 1 + 1 + 4
}

func appendTagged(b []byte, dcc int32) []byte {
	if dcc == -1 {
		return append(b, 0)
	}
	b = append(b, 1, dccTag, 4)
	return binary.BigEndian.AppendUint32(b, uint32(dcc))
}

func appendBatches(b []byte, batches []StateBatch) []byte {
	b = appendUvarint(b, uint32(len(batches)+1))
	for _, s := range batches {
		b = binary.BigEndian.AppendUint64(b, uint64(s.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(s.LastOffset))
		b = append(b, byte(s.DeliveryState))
		b = binary.BigEndian.AppendUint16(b, uint16(s.DeliveryCount))
		b = append(b, 0)
	}
	return b
}

func batchesSize(n int) int { return uvarintLen(uint32(n+1)) + n*batchWireSize }

// AppendSnapshot appends to b a snapshot record of v for the key message key (from EncodeKey).
func AppendSnapshot(b []byte, key string, v *SnapshotValue) []byte {
	b = appendRecordKey(b, TypeSnapshot, key)
	b = appendVarint(b, int32(snapshotFixedSize+batchesSize(len(v.StateBatches))+taggedSize(v.DeliveryCompleteCount)))
	b = binary.BigEndian.AppendUint16(b, valueVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(v.SnapshotEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(v.StateEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(v.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(v.StartOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(v.CreateTimestamp))
	b = binary.BigEndian.AppendUint64(b, uint64(v.WriteTimestamp))
	b = appendBatches(b, v.StateBatches)
	return appendTagged(b, v.DeliveryCompleteCount)
}

// AppendUpdate appends to b an update record of v for the key message key (from EncodeKey).
func AppendUpdate(b []byte, key string, v *UpdateValue) []byte {
	b = appendRecordKey(b, TypeUpdate, key)
	b = appendVarint(b, int32(updateFixedSize+batchesSize(len(v.StateBatches))+taggedSize(v.DeliveryCompleteCount)))
	b = binary.BigEndian.AppendUint16(b, valueVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(v.SnapshotEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(v.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(v.StartOffset))
	b = appendBatches(b, v.StateBatches)
	return appendTagged(b, v.DeliveryCompleteCount)
}

// AppendTombstone appends to b the tombstone of the key message key (from EncodeKey): its
// snapshot key with a null value.
func AppendTombstone(b []byte, key string) []byte {
	b = appendRecordKey(b, TypeSnapshot, key)
	return appendVarint(b, -1)
}

// SnapshotSize is the size of the snapshot record AppendSnapshot appends for the key message key, n
// state batches and the delivery complete count dcc.
func SnapshotSize(key string, n int, dcc int32) int {
	keyLen := 2 + len(key)
	valLen := snapshotFixedSize + batchesSize(n) + taggedSize(dcc)
	return uvarintLen(zigzag(int32(keyLen))) + keyLen + uvarintLen(zigzag(int32(valLen))) + valLen
}

// SnapshotSizeBound is an upper bound on SnapshotSize(key, n, dcc), with its varints counted at
// their longest.
func SnapshotSizeBound(key string, n int, dcc int32) int {
	return 5 + 2 + len(key) + 5 + snapshotFixedSize + batchesSize(n) + taggedSize(dcc)
}

// zigzag maps a signed varint's value to the unsigned one that is written; unzigzag reverses it.
func zigzag(v int32) uint32 { return uint32(v<<1) ^ uint32(v>>31) }

func unzigzag(u uint32) int32 { return int32(u>>1) ^ -int32(u&1) }

// ---- decoding ----

// Decoded is the allocation-free form of a record that replay decodes with DecodeInto: Key (the key
// message, as EncodeKey returns it) aliases the input, and the StateBatches of the value alias the
// scratch slice passed to DecodeInto. Of Snapshot and Update, only the one Type selects is set, and
// neither for a tombstone.
type Decoded struct {
	Type      Type
	Key       []byte
	Tombstone bool
	Snapshot  SnapshotValue
	Update    UpdateValue
}

// reader is a bounds-checked big-endian cursor; the first failure sticks in err.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformedRecord}, args...)...)
	}
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.short(n, what)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// short records a read past the end (kept out of take so that take inlines).
//
//go:noinline
func (r *reader) short(n int, what string) {
	r.fail("%s: need %d bytes, have %d", what, n, len(r.b))
}

func (r *reader) u8(what string) uint8 {
	v := r.take(1, what)
	if v == nil {
		return 0
	}
	return v[0]
}

func (r *reader) u16(what string) uint16 {
	v := r.take(2, what)
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint16(v)
}

func (r *reader) u32(what string) uint32 {
	v := r.take(4, what)
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint32(v)
}

func (r *reader) u64(what string) uint64 {
	v := r.take(8, what)
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// uvarint reads Kafka's unsigned varint: at most 5 bytes, value < 2^32.
func (r *reader) uvarint(what string) uint32 {
	if r.err != nil {
		return 0
	}
	var v uint32
	for i := 0; i < 5; i++ {
		if i >= len(r.b) {
			r.fail("%s: truncated varint", what)
			return 0
		}
		c := r.b[i]
		if i == 4 && c > 0x0f {
			r.fail("%s: varint overflows 32 bits", what)
			return 0
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			r.b = r.b[i+1:]
			return v
		}
	}
	r.fail("%s: varint longer than 5 bytes", what)
	return 0
}

// varint reads Kafka's zigzag varint (int32).
func (r *reader) varint(what string) int32 {
	return unzigzag(r.uvarint(what))
}

// DecodeInto decodes b into d. Batches are decoded into scratch (reused, grown as needed) and the
// grown scratch is returned. The errors are Decode's; after ErrUnknownRecordType, d.Type is the
// type found.
func DecodeInto(b []byte, d *Decoded, scratch []StateBatch) ([]StateBatch, error) {
	scratch, ok := decodeFast(b, d, scratch)
	if ok {
		return scratch, nil
	}
	return decodeSlow(b, d, scratch)
}

// decodeSlow is DecodeInto for every input: it checks each field on its own and reports
// the first deviation. decodeFast must agree with it wherever decodeFast succeeds.
func decodeSlow(b []byte, d *Decoded, scratch []StateBatch) ([]StateBatch, error) {
	r := reader{b: b}
	keyLen := r.varint("key length")
	if r.err == nil && keyLen < 0 {
		r.fail("null or negative key length %d", keyLen)
	}
	key := r.take(int(keyLen), "key")
	valLen := r.varint("value length")
	if r.err != nil {
		return scratch, r.err
	}
	if valLen < -1 {
		return scratch, fmt.Errorf("%w: negative value length %d", ErrMalformedRecord, valLen)
	}
	var value []byte
	if valLen >= 0 {
		value = r.take(int(valLen), "value")
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes after the value", len(r.b))
	}
	if r.err != nil {
		return scratch, r.err
	}

	kr := reader{b: key}
	d.Type = Type(int16(kr.u16("record type")))
	if kr.err != nil {
		return scratch, kr.err
	}
	if d.Type != TypeSnapshot && d.Type != TypeUpdate {
		return scratch, fmt.Errorf("%w %d", ErrUnknownRecordType, int16(d.Type))
	}
	msg := kr.b
	groupLen := int16(kr.u16("group id length"))
	if kr.err == nil && groupLen < 0 {
		kr.fail("non-nullable field groupId was serialized as null")
	}
	kr.take(int(groupLen), "group id")
	kr.take(16, "topic id")
	kr.take(4, "partition")
	if kr.err == nil && len(kr.b) != 0 {
		kr.fail("%d trailing bytes after the key", len(kr.b))
	}
	if kr.err != nil {
		return scratch, kr.err
	}
	d.Key = msg

	d.Tombstone = valLen == -1
	if d.Tombstone {
		if d.Type != TypeSnapshot {
			return scratch, fmt.Errorf("%w: update record without a value", ErrMalformedRecord)
		}
		return scratch, nil
	}

	vr := reader{b: value}
	version := int16(vr.u16("value version"))
	if vr.err != nil {
		return scratch, vr.err
	}
	if version != valueVersion {
		return scratch, fmt.Errorf("%w %d for record type %d", ErrUnknownValueVersion, version, int16(d.Type))
	}
	if d.Type == TypeSnapshot {
		s := &d.Snapshot
		s.SnapshotEpoch = int32(vr.u32("snapshot epoch"))
		s.StateEpoch = int32(vr.u32("state epoch"))
		s.LeaderEpoch = int32(vr.u32("leader epoch"))
		s.StartOffset = int64(vr.u64("start offset"))
		s.CreateTimestamp = int64(vr.u64("create timestamp"))
		s.WriteTimestamp = int64(vr.u64("write timestamp"))
		scratch = vr.batches(scratch[:0])
		s.StateBatches = scratch
		s.DeliveryCompleteCount = vr.tagged()
	} else {
		u := &d.Update
		u.SnapshotEpoch = int32(vr.u32("snapshot epoch"))
		u.LeaderEpoch = int32(vr.u32("leader epoch"))
		u.StartOffset = int64(vr.u64("start offset"))
		scratch = vr.batches(scratch[:0])
		u.StateBatches = scratch
		u.DeliveryCompleteCount = vr.tagged()
	}
	if vr.err == nil && len(vr.b) != 0 {
		vr.fail("%d trailing bytes after the value message", len(vr.b))
	}
	return scratch, vr.err
}

// batches reads a compact array of StateBatch (length+1; 0 = null, rejected).
func (r *reader) batches(dst []StateBatch) []StateBatch {
	n := r.uvarint("state batch count")
	if r.err != nil {
		return dst
	}
	if n == 0 {
		r.fail("non-nullable field stateBatches was serialized as null")
		return dst
	}
	count := int(n - 1)
	if count > len(r.b)/batchWireSize {
		r.fail("%d state batches cannot fit in %d bytes", count, len(r.b))
		return dst
	}
	if cap(dst) < count {
		dst = make([]StateBatch, 0, count)
	}
	for i := 0; i < count && r.err == nil; i++ {
		var s StateBatch
		if len(r.b) >= batchWireSize && r.b[batchWireSize-1] == 0 {
			// Fast path: no tagged fields in this batch.
			s = batchAt(r.b)
			r.b = r.b[batchWireSize:]
		} else {
			s.FirstOffset = int64(r.u64("first offset"))
			s.LastOffset = int64(r.u64("last offset"))
			s.DeliveryState = int8(r.u8("delivery state"))
			s.DeliveryCount = int16(r.u16("delivery count"))
			r.skipTagged("state batch")
		}
		dst = append(dst, s)
	}
	return dst
}

// batchAt decodes the fixed fields of the state batch at the start of p (at least batchWireSize
// bytes long).
func batchAt(p []byte) StateBatch {
	return StateBatch{
		FirstOffset:   int64(binary.BigEndian.Uint64(p)),
		LastOffset:    int64(binary.BigEndian.Uint64(p[8:])),
		DeliveryState: int8(p[16]),
		DeliveryCount: int16(binary.BigEndian.Uint16(p[17:])),
	}
}

// skipTagged skips a tagged-field section whose fields are all unknown.
func (r *reader) skipTagged(what string) {
	n := r.uvarint(what + " tagged field count")
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.uvarint(what + " tag")
		size := r.uvarint(what + " tagged field size")
		if r.err == nil && uint64(size) > uint64(len(r.b)) {
			r.fail("%s tagged field of %d bytes exceeds the %d bytes left", what, size, len(r.b))
			return
		}
		r.take(int(size), what+" tagged field")
	}
}

// tagged reads the value's tagged-field section and returns DeliveryCompleteCount (-1 if absent).
// Unknown tags are skipped; tag 0 must be 4 bytes long.
func (r *reader) tagged() int32 {
	dcc := int32(-1)
	n := r.uvarint("tagged field count")
	for i := uint32(0); i < n && r.err == nil; i++ {
		tag := r.uvarint("tag")
		size := r.uvarint("tagged field size")
		if r.err != nil {
			break
		}
		if uint64(size) > uint64(len(r.b)) {
			r.fail("tagged field %d of %d bytes exceeds the %d bytes left", tag, size, len(r.b))
			break
		}
		if tag == dccTag {
			if size != 4 {
				r.fail("tagged field DeliveryCompleteCount has %d bytes, want 4", size)
				break
			}
			dcc = int32(r.u32("delivery complete count"))
			continue
		}
		r.take(int(size), "unknown tagged field")
	}
	return dcc
}
