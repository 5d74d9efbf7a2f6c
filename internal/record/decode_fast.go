package record

import "encoding/binary"

// decodeFast decodes the record shapes replay meets almost always, with few branches and no
// per-field error bookkeeping: key and value lengths of one or two varint bytes, a snapshot or
// update key, value version 0, state batches without tagged fields, and a value tagged-field section
// that is empty or holds only DeliveryCompleteCount. Any other input, malformed or merely unusual,
// gets false with d untouched, and the caller decodes it with decodeSlow, which stays the
// authority on errors. When decodeFast returns true, d and the batches (decoded into scratch, as
// decodeSlow does) are exactly what decodeSlow produces for b.
func decodeFast(b []byte, d *Decoded, scratch []StateBatch) ([]StateBatch, bool) {
	keyLen, n := shortVarint(b)
	if n == 0 || keyLen < 2+keyFixedSize || keyLen > len(b)-n {
		return scratch, false
	}
	key := b[n : n+keyLen]
	rest := b[n+keyLen:]
	typ := Type(int16(binary.BigEndian.Uint16(key)))
	if typ != TypeSnapshot && typ != TypeUpdate {
		return scratch, false
	}
	if groupLen := int(int16(binary.BigEndian.Uint16(key[2:]))); groupLen < 0 || 2+keyFixedSize+groupLen != keyLen {
		return scratch, false
	}
	valLen, n := shortVarint(rest)
	if n == 0 {
		return scratch, false
	}
	v := rest[n:]
	if valLen == -1 {
		if typ != TypeSnapshot || len(v) != 0 {
			return scratch, false
		}
		d.Type, d.Key, d.Tombstone = typ, key[2:], true
		return scratch, true
	}
	if valLen != len(v) || len(v) < 2 || binary.BigEndian.Uint16(v) != valueVersion {
		return scratch, false
	}
	v = v[2:]

	// Validate the whole value before writing d; then fill d in place.
	fixed := snapshotFixedSize - 2
	if typ == TypeUpdate {
		fixed = updateFixedSize - 2
	}
	if len(v) < fixed {
		return scratch, false
	}
	batches, tail, ok := fastBatches(v[fixed:], scratch)
	if !ok {
		return batches, false
	}
	dcc, ok := fastTagged(tail)
	if !ok {
		return batches, false
	}
	d.Type, d.Key, d.Tombstone = typ, key[2:], false
	if typ == TypeUpdate {
		u := &d.Update
		u.SnapshotEpoch = int32(binary.BigEndian.Uint32(v))
		u.LeaderEpoch = int32(binary.BigEndian.Uint32(v[4:]))
		u.StartOffset = int64(binary.BigEndian.Uint64(v[8:]))
		u.StateBatches, u.DeliveryCompleteCount = batches, dcc
		return batches, true
	}
	s := &d.Snapshot
	s.SnapshotEpoch = int32(binary.BigEndian.Uint32(v))
	s.StateEpoch = int32(binary.BigEndian.Uint32(v[4:]))
	s.LeaderEpoch = int32(binary.BigEndian.Uint32(v[8:]))
	s.StartOffset = int64(binary.BigEndian.Uint64(v[12:]))
	s.CreateTimestamp = int64(binary.BigEndian.Uint64(v[20:]))
	s.WriteTimestamp = int64(binary.BigEndian.Uint64(v[28:]))
	s.StateBatches, s.DeliveryCompleteCount = batches, dcc
	return batches, true
}

// shortVarint reads a zigzag varint of one or two bytes; n is 0 if it is longer or truncated.
func shortVarint(b []byte) (v, n int) {
	u, n := shortUvarint(b)
	return int(unzigzag(u)), n
}

// shortUvarint reads an unsigned varint of one or two bytes; n is 0 if it is longer or truncated.
func shortUvarint(b []byte) (v uint32, n int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint32(b[0]), 1
	}
	if len(b) > 1 && b[1] < 0x80 {
		return uint32(b[0]&0x7f) | uint32(b[1])<<7, 2
	}
	return 0, 0
}

// fastBatches reads a non-null compact array of state batches without tagged fields into dst[:0]
// and returns the bytes after it; ok is false for any other encoding.
func fastBatches(v []byte, dst []StateBatch) (batches []StateBatch, tail []byte, ok bool) {
	c, n := shortUvarint(v)
	if n == 0 || c == 0 {
		return dst, v, false
	}
	v = v[n:]
	count := int(c - 1)
	if count > len(v)/batchWireSize {
		return dst, v, false
	}
	if cap(dst) < count {
		dst = make([]StateBatch, 0, count)
	}
	dst = dst[:count]
	for i := range dst {
		p := v[:batchWireSize]
		if p[batchWireSize-1] != 0 {
			return dst[:0], v, false
		}
		dst[i] = batchAt(p)
		v = v[batchWireSize:]
	}
	return dst, v, true
}

// fastTagged reads a value's tagged-field section that is all of v: empty (DeliveryCompleteCount
// -1) or holding only DeliveryCompleteCount; ok is false for any other content.
func fastTagged(v []byte) (dcc int32, ok bool) {
	switch {
	case len(v) == 1 && v[0] == 0:
		return -1, true
	case len(v) == 7 && v[0] == 1 && v[1] == dccTag && v[2] == 4:
		return int32(binary.BigEndian.Uint32(v[3:])), true
	}
	return 0, false
}
