package groupcfg

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// value is a parsed config value. text is its canonical form (what is stored, described and
// compared); the other fields hold the parsed form of the key's type.
type value struct {
	text string
	num  int64    // TypeInt, TypeLong
	flag bool     // TypeBoolean
	list []string // TypeList
}

// parseValue parses raw as a value of type t the way Kafka's ConfigDef does: surrounding
// whitespace is trimmed, booleans are case-insensitive, list items are comma-separated and trimmed.
func parseValue(t Type, raw string) (value, bool) {
	s := strings.TrimSpace(raw)
	switch t {
	case TypeBoolean:
		switch {
		case strings.EqualFold(s, "true"):
			return value{text: "true", flag: true}, true
		case strings.EqualFold(s, "false"):
			return value{text: "false"}, true
		}
	case TypeInt, TypeLong:
		bits := 64
		if t == TypeInt {
			bits = 32
		}
		n, err := strconv.ParseInt(s, 10, bits)
		if err == nil {
			return value{text: strconv.FormatInt(n, 10), num: n}, true
		}
	case TypeString, TypePassword:
		return value{text: s}, true
	case TypeList:
		if s == "" {
			return value{text: ""}, true
		}
		items := strings.Split(s, ",")
		for i := range items {
			items[i] = strings.TrimSpace(items[i])
		}
		return value{text: strings.Join(items, ","), list: items}, true
	}
	return value{}, false
}

// typeRange is the range of whole numbers a numeric type can hold.
func typeRange(t Type) (lo, hi int64) {
	if t == TypeInt {
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

// isNumeric reports whether t holds whole numbers.
func isNumeric(t Type) bool { return t == TypeInt || t == TypeLong }

// staticRange is the range a numeric key accepts on its own: its Range validator, capped to
// what its type can hold.
func staticRange(d *Definition) (lo, hi int64) {
	lo, hi = typeRange(d.Type)
	if r, ok := d.Validator.(Range); ok {
		lo, hi = max(lo, r.Min), min(hi, r.Max)
	}
	return lo, hi
}

// violation says why a raw value is not acceptable for a key on its own (before any bound that
// depends on other keys).
type violation struct {
	badType bool   // not parseable as the key's type
	below   bool   // numeric, under the key's minimum
	above   bool   // numeric, over the key's maximum
	reason  string // refused by a non-Range validator
}

// checkStatic parses raw for d and applies d's Validator.
func checkStatic(d *Definition, raw string) (value, *violation) {
	v, ok := parseValue(d.Type, raw)
	if !ok {
		return value{}, &violation{badType: true}
	}
	if isNumeric(d.Type) {
		lo, hi := staticRange(d)
		switch {
		case v.num < lo:
			return v, &violation{below: true}
		case v.num > hi:
			return v, &violation{above: true}
		}
		return v, nil
	}
	if d.Validator != nil {
		if err := d.Validator.Validate(v.text); err != nil {
			return v, &violation{reason: err.Error()}
		}
	}
	return v, nil
}

// expected describes, for messages, what a key accepts given the numeric range [lo, hi].
func expected(d *Definition, lo, hi int64) string {
	switch {
	case isNumeric(d.Type):
		return "a whole number in " + formatRange(lo, hi)
	case d.Type == TypeBoolean:
		return "true or false"
	case d.Validator != nil:
		return "a value that is " + d.Validator.String()
	}
	return "a value"
}

// maxShown is how many bytes of a value a message repeats; a longer value is cut and its length
// given, so that a huge value does not make a huge message or log line.
const maxShown = 256

// show renders a value for a message: as is when it is plain, quoted when it is empty or holds
// spaces or control characters (so that the one-line message stays one line and unambiguous),
// cut after maxShown bytes.
func show(d *Definition, text string) string {
	if d != nil && d.hidden() {
		return "[hidden]"
	}
	if len(text) > maxShown {
		cut := maxShown
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		return strconv.Quote(text[:cut]) + "... (" + strconv.Itoa(len(text)) + " bytes)"
	}
	if text == "" || strings.IndexFunc(text, func(r rune) bool {
		return unicode.IsSpace(r) || !unicode.IsPrint(r) || r == '"'
	}) >= 0 {
		return strconv.Quote(text)
	}
	return text
}

// showDefault renders a key's built-in default for a "remove the setting (default X)" hint.
func showDefault(d *Definition) string {
	if d.hidden() {
		return "[hidden]"
	}
	if d.Default == "" {
		return "empty"
	}
	return d.Default
}
