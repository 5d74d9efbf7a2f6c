package record

import (
	"encoding/binary"
	"fmt"
)

// Key is the key message v0 of both record types: the share partition a record is about, named
// by its share group, the user topic's id and its partition.
type Key struct {
	GroupID   string
	TopicID   TopicID
	Partition int32
}

// EncodeKey returns k's key message (int16 group length, group bytes, topic id, int32 partition)
// as a string: a canonical, compact form of k that the Append functions take, and that a map keyed
// by it can look up from a Decoded record without allocating. It fails if the group id is longer
// than the 32767 bytes a record key can hold.
func EncodeKey(k Key) (string, error) {
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

// DecodeKey is the inverse of EncodeKey. msg must be well formed: returned by EncodeKey, or the
// Key of a record DecodeInto accepted.
func DecodeKey(msg string) Key {
	n := int(binary.BigEndian.Uint16([]byte(msg[:2])))
	var k Key
	k.GroupID = msg[2 : 2+n]
	copy(k.TopicID[:], msg[2+n:2+n+16])
	k.Partition = int32(binary.BigEndian.Uint32([]byte(msg[2+n+16:])))
	return k
}

// GroupOf returns the group id inside the well-formed key message msg without allocating.
func GroupOf(msg string) string {
	n := int(msg[0])<<8 | int(msg[1])
	return msg[2 : 2+n]
}
