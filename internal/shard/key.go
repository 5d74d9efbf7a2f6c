package shard

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/coordinatord/coordinatord/internal/record"
)

// Key identifies one share partition: the share group, the user topic's id and its partition. It
// is the key of its records (record.Key, to which it converts) with the coordinator-key form that
// routing hashes.
type Key record.Key

// CoordinatorKey returns "group:topicId:partition" (Kafka's SharePartitionKey.asCoordinatorKey,
// Kafka's SharePartitionKey), the string that routing hashes.
func (k Key) CoordinatorKey() string {
	return k.GroupID + ":" + k.TopicID.String() + ":" + strconv.FormatInt(int64(k.Partition), 10)
}

// String returns the coordinator key.
func (k Key) String() string { return k.CoordinatorKey() }

// ParseCoordinatorKey parses "group:topicId:partition" as Kafka's SharePartitionKey.getInstance
// does: from the right, so the group may contain ':'; trailing ':' characters are ignored (Java's
// String.split drops trailing empty tokens); the group must not be blank (Java's trim: nothing
// but characters ≤ U+0020); the topic id must be a canonical record.TopicID; the partition is a
// decimal int32 with an optional sign. A negative partition parses (as in Kafka); the shard, and the
// service's FindCoordinator, answer it with INVALID_REQUEST.
func ParseCoordinatorKey(s string) (Key, error) {
	if s == "" {
		return Key{}, errors.New("invalid share partition key: empty")
	}
	trimmed := strings.TrimRight(s, ":")
	last := strings.LastIndexByte(trimmed, ':')
	if last < 0 {
		return Key{}, fmt.Errorf("invalid share partition key %q: expected groupId:topicId:partition", s)
	}
	second := strings.LastIndexByte(trimmed[:last], ':')
	if second < 0 {
		return Key{}, fmt.Errorf("invalid share partition key %q: expected groupId:topicId:partition", s)
	}
	group, topic, part := trimmed[:second], trimmed[second+1:last], trimmed[last+1:]
	if javaTrim(group) == "" {
		return Key{}, fmt.Errorf("invalid share partition key %q: group id must not be blank", s)
	}
	id, err := record.ParseTopicID(topic)
	if err != nil {
		return Key{}, fmt.Errorf("invalid share partition key %q: %w", s, err)
	}
	p, err := strconv.ParseInt(part, 10, 32)
	if err != nil {
		return Key{}, fmt.Errorf("invalid share partition key %q: invalid partition %q", s, part)
	}
	return Key{GroupID: group, TopicID: id, Partition: int32(p)}, nil
}

// javaTrim strips leading and trailing characters ≤ U+0020, as java.lang.String.trim does.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// PartitionFor returns the state partition that owns coordinatorKey among numPartitions:
// Utils.abs(key.hashCode()) % numPartitions with Java's String.hashCode computed over UTF-16 code
// units (Kafka's SharePartitionKey). Invalid UTF-8 bytes count as U+FFFD, as a Java decoder would
// substitute them. numPartitions below 1 is treated as 1.
func PartitionFor(coordinatorKey string, numPartitions int) int {
	return partitionOfHash(javaStringHash(0, coordinatorKey), numPartitions)
}

// PartitionOf returns the state partition that owns k among numPartitions, as
// PartitionFor(k.CoordinatorKey(), numPartitions) does, without building the coordinator key:
// routing runs for every key of every request.
func (k Key) PartitionOf(numPartitions int) int {
	var buf [topicIDChars]byte
	base64.RawURLEncoding.Encode(buf[:], k.TopicID[:])
	h := javaStringHash(0, k.GroupID)
	h = javaASCIIHash(31*h+':', buf[:])
	h = javaASCIIHash(31*h+':', strconv.AppendInt(buf[:0], int64(k.Partition), 10))
	return partitionOfHash(h, numPartitions)
}

// topicIDChars is the length of a topic id's string form (16 bytes in unpadded base64), which is
// longer than any int32 in decimal.
const topicIDChars = 22

// partitionOfHash is Utils.abs(h) % numPartitions; numPartitions below 1 is treated as 1.
func partitionOfHash(h int32, numPartitions int) int {
	if numPartitions < 1 {
		numPartitions = 1
	}
	var a int64
	if h != math.MinInt32 { // Kafka's Utils.abs maps MIN_VALUE to 0
		a = int64(h)
		if a < 0 {
			a = -a
		}
	}
	return int(a % int64(numPartitions))
}

// javaStringHash continues java.lang.String.hashCode from h (0 for a whole string): h = 31*h + c
// over UTF-16 code units, wrapping.
func javaStringHash(h int32, s string) int32 {
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + hi
			h = 31*h + lo
			continue
		}
		h = 31*h + r
	}
	return h
}

// javaASCIIHash continues javaStringHash from h over b, which holds only ASCII characters (one
// UTF-16 code unit each).
func javaASCIIHash(h int32, b []byte) int32 {
	for _, c := range b {
		h = 31*h + int32(c)
	}
	return h
}
