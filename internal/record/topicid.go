package record

import (
	"encoding/base64"
	"fmt"
)

// TopicID is a Kafka Uuid (16 bytes, most-significant half first). Its text form is the unpadded
// URL-safe base64 of the 16 bytes: 22 characters, e.g. "P6hfZFcXRWKz_CyWP2avpg".
type TopicID [16]byte

// topicIDTextLen is the length of a TopicID's text form.
const topicIDTextLen = 22

// ParseTopicID parses the text form of a TopicID. Only the canonical form is accepted: exactly 22
// characters of the URL-safe alphabet whose unused trailing bits are zero, so that
// ParseTopicID(s).String() == s. (Kafka's Uuid.fromString also takes a padded 24-character form and
// non-zero trailing bits; accepting those would let two strings name one topic and route
// differently.)
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	if len(s) != topicIDTextLen {
		return id, fmt.Errorf("%q is not a valid topic id: want %d characters of unpadded URL-safe base64, got %d", s, topicIDTextLen, len(s))
	}
	n, err := base64.RawURLEncoding.Strict().Decode(id[:], []byte(s))
	if err != nil {
		return TopicID{}, fmt.Errorf("%q is not a valid topic id: %w", s, err)
	}
	if n != len(id) {
		return TopicID{}, fmt.Errorf("%q is not a valid topic id: decoded %d bytes, want %d", s, n, len(id))
	}
	return id, nil
}

// String returns the 22-character text form (Kafka's Uuid.toString).
func (t TopicID) String() string {
	return base64.RawURLEncoding.EncodeToString(t[:])
}
