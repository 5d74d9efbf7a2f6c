package principal

import (
	"fmt"
	"strings"
	"unicode"
)

// separator separates the entries of a principal list. Principals are distinguished names full
// of commas, so lists use semicolons, as Kafka's super.users does. A semicolon inside a
// distinguished name is escaped there ("\;", RFC 2253), as principal names always write it, and
// does not separate.
const separator = ";"

// Any in a principal list stands for every authenticated client, and so does Kafka's wildcard
// principal, AnyUser.
const (
	Any     = "*"
	AnyUser = prefix + "*"
)

// ParseList splits a principal list (such as a value of the authorizer.*.principals settings),
// whose entries are separated by semicolons, into its entries, each trimmed of surrounding white
// space (a space escaped at its end, "\ ", is kept), empty entries skipped. Every entry must be
// Any or AnyUser or a principal name "User:<distinguished name>"; the error describes the first
// that is not.
func ParseList(text string) ([]string, error) {
	var out []string
	for _, entry := range splitList(text) {
		switch {
		case entry == "":
			continue
		case entry == Any:
		case !strings.HasPrefix(entry, prefix) || strings.TrimSpace(strings.TrimPrefix(entry, prefix)) == "":
			return nil, fmt.Errorf("has the entry %q, which is neither * nor a principal User:<distinguished name> such as User:CN=broker-1,O=Acme", entry)
		}
		out = append(out, entry)
	}
	return out, nil
}

// splitList splits text at every separator that no backslash escapes and trims each entry,
// keeping a trailing space that a backslash escapes.
func splitList(text string) []string {
	var entries []string
	start, escapedEnd := 0, 0 // escapedEnd: the end of the last escaped byte seen
	flush := func(end int) {
		entry := strings.TrimRightFunc(text[start:end], unicode.IsSpace)
		if start+len(entry) < escapedEnd {
			entry = text[start:escapedEnd]
		}
		entries = append(entries, strings.TrimLeftFunc(entry, unicode.IsSpace))
	}
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '\\':
			i++ // the escaped byte
			escapedEnd = min(i+1, len(text))
		case separator[0]:
			flush(i)
			start = i + 1
		}
	}
	flush(len(text))
	return entries
}
