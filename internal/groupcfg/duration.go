package groupcfg

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// isoDuration matches Java's java.time.Duration.parse text, PnDTnHnMn.nS with optional signs
// (case-insensitive), which Kafka uses for share.auto.offset.reset=by_duration:<duration>.
var isoDuration = regexp.MustCompile(`^(?i)([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?$`)

var errBadDuration = errors.New("is not an ISO-8601 duration such as PT1H or P1DT12H")

// parseISODuration reports whether s is a valid Java Duration and whether it is negative.
func parseISODuration(s string) (negative bool, err error) {
	m := isoDuration.FindStringSubmatch(s)
	if m == nil {
		return false, errBadDuration
	}
	day, tpart, hour, minute, sec, frac := m[2], m[3], m[4], m[5], m[6], m[7]
	if strings.EqualFold(tpart, "T") || (day == "" && hour == "" && minute == "" && sec == "") {
		return false, errBadDuration
	}
	var total int64
	for _, part := range []struct {
		text string
		unit int64
	}{{day, 86400}, {hour, 3600}, {minute, 60}, {sec, 1}} {
		if part.text == "" {
			continue
		}
		n, err := strconv.ParseInt(part.text, 10, 64)
		if err != nil {
			return false, errBadDuration
		}
		if n > math.MaxInt64/part.unit || n < math.MinInt64/part.unit {
			return false, errBadDuration
		}
		n *= part.unit
		if (n > 0 && total > math.MaxInt64-n) || (n < 0 && total < math.MinInt64-n) {
			return false, errBadDuration
		}
		total += n
	}
	var nanos int64
	if frac != "" {
		f, err := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		if err != nil {
			return false, errBadDuration
		}
		if strings.HasPrefix(sec, "-") {
			f = -f
		}
		nanos = f
	}
	// |nanos| < 1s, so a non-zero total decides the sign on its own.
	negative = total < 0 || (total == 0 && nanos < 0)
	if m[1] == "-" && (total != 0 || nanos != 0) {
		negative = !negative
	}
	return negative, nil
}

// checkAutoOffsetReset is the rule of share.auto.offset.reset: earliest, latest or
// by_duration:<non-negative ISO-8601 duration>. As in Kafka, the keywords are lower case and
// the duration's letters may be either case.
func checkAutoOffsetReset(text string) error {
	if text == "earliest" || text == "latest" {
		return nil
	}
	const prefix = "by_duration:"
	if !strings.HasPrefix(text, prefix) {
		return errors.New("must be earliest, latest or by_duration:<ISO-8601 duration> (keywords in lower case)")
	}
	negative, err := parseISODuration(text[len(prefix):])
	if err != nil {
		return errors.New("has a duration that " + err.Error())
	}
	if negative {
		return errors.New("has a negative duration; by_duration needs a duration of zero or more")
	}
	return nil
}

// normalizeAutoOffsetReset lower-cases the keyword of a share.auto.offset.reset value, leaving the
// duration as it is: stored overrides written before keywords had to be lower case keep working.
func normalizeAutoOffsetReset(text string) string {
	const prefix = "by_duration:"
	switch lower := strings.ToLower(text); {
	case lower == "earliest" || lower == "latest":
		return lower
	case strings.HasPrefix(lower, prefix):
		return prefix + text[len(prefix):]
	}
	return text
}

// maxTopicNameLength is Kafka's limit on a topic name (Topic.MAX_NAME_LENGTH): 249 characters,
// so that a partition directory name (topic, '-', partition number) fits in 255 bytes.
const maxTopicNameLength = 249

// topicNameRule says, for messages, what a DLQ topic name may be.
const topicNameRule = "a topic name is at most 249 characters, each an ASCII letter, digit, '.', '_' or '-', " +
	"and is not \".\" or \"..\"; names starting with \"__\" are reserved for internal topics; empty means no DLQ topic"

// checkDeadLetterTopicName is the rule of errors.deadletterqueue.topic.name: empty (no DLQ topic,
// the default), or a name Kafka's Topic.validate accepts that does not start with "__", which
// KIP-1191 reserves for internal topics. A name Kafka could never create would only fail later,
// when the first record is dead-lettered.
func checkDeadLetterTopicName(text string) error {
	switch {
	case text == "":
		return nil
	case text == "." || text == "..":
		return errors.New("is not a valid topic name: " + topicNameRule)
	case strings.IndexFunc(text, func(r rune) bool { return !isTopicNameChar(r) }) >= 0:
		return errors.New("holds characters a topic name cannot hold: " + topicNameRule)
	case len(text) > maxTopicNameLength:
		return errors.New("is " + strconv.Itoa(len(text)) + " characters long: " + topicNameRule)
	case strings.HasPrefix(text, "__"):
		return errors.New(`must not start with "__" (reserved for internal topics)`)
	}
	return nil
}

// isTopicNameChar reports whether r may appear in a Kafka topic name (Topic.LEGAL_CHARS).
func isTopicNameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}
