package shard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// RecordType is the int16 record type that prefixes every record key.
type RecordType int16

// The record types of the share-group state log.
const (
	// RecordTypeSnapshot is ShareSnapshot: the whole state of a key; with no value, a tombstone.
	RecordTypeSnapshot RecordType = 0
	// RecordTypeUpdate is ShareUpdate: a delta applied on top of the latest snapshot.
	RecordTypeUpdate RecordType = 1
)

// String returns "snapshot", "update" or "type(n)".
func (t RecordType) String() string {
	switch t {
	case RecordTypeSnapshot:
		return "snapshot"
	case RecordTypeUpdate:
		return "update"
	}
	return fmt.Sprintf("type(%d)", int16(t))
}

// SnapshotValue is ShareSnapshotValue v0.
type SnapshotValue struct {
	SnapshotEpoch         int32
	StateEpoch            int32
	LeaderEpoch           int32
	StartOffset           int64
	CreateTimestamp       int64
	WriteTimestamp        int64
	StateBatches          []StateBatch
	DeliveryCompleteCount int32 // tagged field 0; -1 (unknown) is not written
}

// UpdateValue is ShareUpdateValue v0. LeaderEpoch and StartOffset -1 mean "keep".
type UpdateValue struct {
	SnapshotEpoch         int32
	LeaderEpoch           int32
	StartOffset           int64
	StateBatches          []StateBatch
	DeliveryCompleteCount int32 // tagged field 0; -1 (unknown) is not written
}

// Record is one decoded record of the state log. Exactly one of Snapshot, Update or Tombstone is
// set for a known Type.
type Record struct {
	Type      RecordType
	Key       Key
	Snapshot  *SnapshotValue
	Update    *UpdateValue
	Tombstone bool
}

// Decoding errors. DecodeRecord wraps them with details; test with errors.Is.
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

// DecodeRecord decodes one state-log record:
//
//	zigzag-varint keyLength | key | zigzag-varint valueLength (-1 = null: tombstone) | value
//
// with key = int16 type + key message v0 and value = int16 version + flexible value v0. A type
// other than snapshot/update returns a Record carrying only that Type and an error wrapping
// ErrUnknownRecordType (skippable). A value version other than 0 returns an error wrapping
// ErrUnknownValueVersion. Any other deviation (short input, null non-nullable field, trailing
// bytes, an update or unknown type without value) wraps ErrMalformedRecord. The returned Record
// does not alias b.
func DecodeRecord(b []byte) (Record, error) {
	var d decodedRecord
	batches, err := decodeRecordInto(b, &d, nil)
	if err != nil {
		return Record{Type: d.typ}, err
	}
	rec := Record{Type: d.typ, Key: keyFromMapKey(string(d.mapKey)), Tombstone: d.tombstone}
	owned := cloneBatches(batches)
	switch {
	case d.tombstone:
	case d.typ == RecordTypeSnapshot:
		v := d.snap
		v.StateBatches = owned
		rec.Snapshot = &v
	default:
		v := d.upd
		v.StateBatches = owned
		rec.Update = &v
	}
	return rec, nil
}

// EncodeRecord encodes r in the layout DecodeRecord reads. It fails if the group id is longer
// than 32767 bytes, if Type is unknown, or if the value pointer matching Type is nil for a
// non-tombstone (a tombstone must have Type snapshot).
func EncodeRecord(r Record) ([]byte, error) {
	mk, err := encodeMapKey(r.Key)
	if err != nil {
		return nil, err
	}
	switch {
	case r.Tombstone && r.Type == RecordTypeSnapshot:
		return appendTombstoneRecord(nil, mk), nil
	case r.Tombstone:
		return nil, fmt.Errorf("encode record: a tombstone must have type snapshot, got %s", r.Type)
	case r.Type == RecordTypeSnapshot && r.Snapshot != nil:
		return appendSnapshotRecord(nil, mk, r.Snapshot), nil
	case r.Type == RecordTypeUpdate && r.Update != nil:
		return appendUpdateRecord(nil, mk, r.Update), nil
	}
	return nil, fmt.Errorf("encode record: type %s without a matching value", r.Type)
}

// A map key is the key message v0 (int16 group length, group bytes, topic id, int32 partition):
// a canonical, compact byte string of a Key that needs no allocation to look up from a record.

// encodeMapKey returns k's key message as a string.
func encodeMapKey(k Key) (string, error) {
	if len(k.GroupID) > maxGroupIDBytes {
		return "", fmt.Errorf("group id of %d bytes is longer than the %d bytes a record key can hold", len(k.GroupID), maxGroupIDBytes)
	}
	b := make([]byte, 0, len(k.GroupID)+keyFixedSize)
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.GroupID)))
	b = append(b, k.GroupID...)
	b = append(b, k.TopicID[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(k.Partition))
	return string(b), nil
}

// keyFromMapKey is the inverse of encodeMapKey; mk must be well formed.
func keyFromMapKey(mk string) Key {
	n := int(binary.BigEndian.Uint16([]byte(mk[:2])))
	var k Key
	k.GroupID = mk[2 : 2+n]
	copy(k.TopicID[:], mk[2+n:2+n+16])
	k.Partition = int32(binary.BigEndian.Uint32([]byte(mk[2+n+16:])))
	return k
}

// groupOfMapKey returns the group id inside mk without allocating.
func groupOfMapKey(mk string) string {
	n := int(mk[0])<<8 | int(mk[1])
	return mk[2 : 2+n]
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

func appendRecordKey(b []byte, t RecordType, mk string) []byte {
	b = appendVarint(b, int32(2+len(mk)))
	b = binary.BigEndian.AppendUint16(b, uint16(t))
	return append(b, mk...)
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

func appendSnapshotRecord(b []byte, mk string, v *SnapshotValue) []byte {
	b = appendRecordKey(b, RecordTypeSnapshot, mk)
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

func appendUpdateRecord(b []byte, mk string, v *UpdateValue) []byte {
	b = appendRecordKey(b, RecordTypeUpdate, mk)
	b = appendVarint(b, int32(updateFixedSize+batchesSize(len(v.StateBatches))+taggedSize(v.DeliveryCompleteCount)))
	b = binary.BigEndian.AppendUint16(b, valueVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(v.SnapshotEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(v.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(v.StartOffset))
	b = appendBatches(b, v.StateBatches)
	return appendTagged(b, v.DeliveryCompleteCount)
}

func appendTombstoneRecord(b []byte, mk string) []byte {
	b = appendRecordKey(b, RecordTypeSnapshot, mk)
	return appendVarint(b, -1)
}

// snapshotRecordSize is the encoded size of a snapshot record with n batches for map key mk.
func snapshotRecordSize(mk string, n int, dcc int32) int {
	keyLen := 2 + len(mk)
	valLen := snapshotFixedSize + batchesSize(n) + taggedSize(dcc)
	return uvarintLen(zigzag(int32(keyLen))) + keyLen + uvarintLen(zigzag(int32(valLen))) + valLen
}

// zigzag maps a signed varint's value to the unsigned one that is written; unzigzag reverses it.
func zigzag(v int32) uint32 { return uint32(v<<1) ^ uint32(v>>31) }

func unzigzag(u uint32) int32 { return int32(u>>1) ^ -int32(u&1) }

// ---- decoding ----

// decodedRecord is the allocation-free form of a record used by replay: mapKey aliases the input
// and the value's StateBatches alias the scratch slice passed to decodeRecordInto.
type decodedRecord struct {
	typ       RecordType
	mapKey    []byte
	tombstone bool
	snap      SnapshotValue
	upd       UpdateValue
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

// decodeRecordInto decodes b into d. Batches are decoded into scratch (reused, grown as needed)
// and the grown scratch is returned. See DecodeRecord for the errors.
func decodeRecordInto(b []byte, d *decodedRecord, scratch []StateBatch) ([]StateBatch, error) {
	scratch, ok := decodeFast(b, d, scratch)
	if ok {
		return scratch, nil
	}
	return decodeSlow(b, d, scratch)
}

// decodeSlow is decodeRecordInto for every input: it checks each field on its own and reports
// the first deviation. decodeFast must agree with it wherever decodeFast succeeds.
func decodeSlow(b []byte, d *decodedRecord, scratch []StateBatch) ([]StateBatch, error) {
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
	d.typ = RecordType(int16(kr.u16("record type")))
	if kr.err != nil {
		return scratch, kr.err
	}
	if d.typ != RecordTypeSnapshot && d.typ != RecordTypeUpdate {
		return scratch, fmt.Errorf("%w %d", ErrUnknownRecordType, int16(d.typ))
	}
	mk := kr.b
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
	d.mapKey = mk

	d.tombstone = valLen == -1
	if d.tombstone {
		if d.typ != RecordTypeSnapshot {
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
		return scratch, fmt.Errorf("%w %d for record type %d", ErrUnknownValueVersion, version, int16(d.typ))
	}
	if d.typ == RecordTypeSnapshot {
		s := &d.snap
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
		u := &d.upd
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
