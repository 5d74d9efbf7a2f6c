package groupcfg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/magiconair/properties"
)

// Sources are the inputs of the static (start-up) broker configuration.
type Sources struct {
	File      string   // Java properties file ("" = none)
	Env       []string // os.Environ()-style "K=V"; only COORDINATORD_* entries are considered
	Overrides []string // "key=value" from repeated --override
}

// Problem is one reason a static configuration is refused.
type Problem struct {
	Key     string // the key concerned ("" when the problem is not about one key, e.g. an unreadable file)
	Value   string // the value as given ([hidden] for sensitive keys)
	Source  string // where the value came from, e.g. "file /etc/coordinatord.properties", "environment COORDINATORD_X", "--override"
	Message string // one line naming the key, the value, the allowed values and the fix

	kind problemKind
}

// problemKind classifies problems (for tests and for callers that only want one kind).
type problemKind int8

const (
	problemInput    problemKind = iota // unreadable file, malformed --override, unknown key or variable
	problemValue                       // a value refused on its own (type, range, validator)
	problemRelation                    // a relation between keys (cross-check)
)

// String returns the problem as one line: the message, then its source in parentheses.
func (p Problem) String() string {
	if p.Source == "" {
		return p.Message
	}
	return p.Message + " (from " + p.Source + ")"
}

// StaticError is the error of LoadStatic: every problem found, one per line.
type StaticError struct {
	Problems []Problem
}

// Error returns the problems, one line each.
func (e *StaticError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Static is the resolved static broker configuration: every broker key's value with its source.
// It is immutable and safe for concurrent use.
type Static struct {
	state *brokerState
}

// Broker returns the static values as typed getters (no dynamic values applied).
func (s *Static) Broker() Broker { return Broker{state: s.state} }

// LoadStatic resolves every broker key: override > env > file > default, validates types, ranges
// and cross-checks. The error (a *StaticError) lists every problem; each problem is one line
// naming the key, the value, the allowed range and the fix.
func LoadStatic(src Sources) (*Static, error) {
	sch, err := builtinSchema()
	if err != nil {
		return nil, err
	}
	st, problems := loadStatic(sch, src)
	if len(problems) > 0 {
		return nil, &StaticError{Problems: problems}
	}
	return st, nil
}

// rawSetting is a value given by an operator, before validation.
type rawSetting struct {
	text   string
	origin string
}

func loadStatic(sch *schema, src Sources) (*Static, []Problem) {
	var problems []Problem
	raw := make(map[int]rawSetting)
	var kafka []string // the Kafka broker keys of the source being read, reported together
	set := func(key, text, origin string) {
		d, ok := sch.lookup(key)
		switch {
		case !ok && isKafkaBrokerKey(key):
			kafka = append(kafka, key)
		case !ok:
			problems = append(problems, Problem{Key: key, Value: text, Source: origin,
				Message: fmt.Sprintf("unknown config %s: it is not a coordinatord broker config; remove it (the README lists every config)", show(nil, key))})
		case d.Scope == ScopeGroup:
			problems = append(problems, Problem{Key: key, Value: show(d, text), Source: origin, Message: groupKeyInStatic(d)})
		default:
			raw[sch.index[key]] = rawSetting{text: text, origin: origin}
		}
	}
	endSource := func(origin string) {
		if len(kafka) > 0 {
			problems = append(problems, kafkaKeysProblem(kafka, origin))
		}
		kafka = nil
	}

	// Lowest precedence first, so that each later source overwrites the earlier ones.
	if src.File != "" {
		origin := "file " + src.File
		props, settings, err := loadProperties(src.File)
		if err != nil {
			problems = append(problems, Problem{Source: origin,
				Message: fmt.Sprintf("cannot read config file %s: %v; fix the file or the --config flag", src.File, err)})
		} else {
			for _, key := range props.Keys() {
				text, _ := props.Get(key)
				set(key, text, origin)
			}
			endSource(origin)
			problems = append(problems, repeatedKeys(sch, settings, origin)...)
		}
	}
	for _, kv := range src.Env {
		name, text, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		origin := "environment " + name
		i, ok := sch.env[name]
		if !ok && isServiceLink(name) {
			continue // injected by Kubernetes for a Service named coordinatord, not a setting
		}
		if !ok {
			problems = append(problems, Problem{Key: name, Value: text, Source: origin, Message: unknownEnv(sch, name)})
			continue
		}
		raw[i] = rawSetting{text: text, origin: origin}
	}
	for _, kv := range src.Overrides {
		key, text, ok := strings.Cut(kv, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			problems = append(problems, Problem{Value: kv, Source: "--override",
				Message: fmt.Sprintf("--override %s is not KEY=VALUE; write it as --override share.coordinator.write.timeout.ms=5000", show(nil, kv))})
			continue
		}
		set(key, text, "--override")
	}
	endSource("--override")

	state := newBrokerState(sch)
	valid := make(map[int]bool, len(sch.broker))
	for _, i := range sch.broker {
		d := &sch.defs[i]
		r, given := raw[i]
		if !given {
			valid[i] = true
			continue
		}
		v, bad := checkStatic(d, r.text)
		if bad != nil {
			problems = append(problems, Problem{Key: d.Name, Value: show(d, r.text), Source: r.origin,
				Message: staticMessage(d, r.text, bad), kind: problemValue})
			continue
		}
		valid[i] = true
		state.vals[i] = v
		state.source[i] = SourceStaticBrokerConfig
		state.origin[i] = r.origin
	}
	problems = append(problems, crossCheck(sch, state, valid)...)
	return &Static{state: state}, problems
}

// repeatedKeys are the problems of broker keys that a properties file sets more than once: the
// loader would keep the last one silently, and which was meant is the operator's to say. (Other
// keys are refused anyway.)
func repeatedKeys(sch *schema, settings []setting, origin string) []Problem {
	var problems []Problem
	for _, group := range repeated(settings) {
		d, ok := sch.lookup(group[0].key)
		if !ok || d.Scope == ScopeGroup {
			continue
		}
		lines, values := make([]string, len(group)), make([]string, len(group))
		for i, s := range group {
			lines[i], values[i] = strconv.Itoa(s.line), show(d, strings.TrimSpace(s.value))
		}
		problems = append(problems, Problem{Key: d.Name, Value: values[len(values)-1], Source: origin,
			Message: fmt.Sprintf("%s is set %d times, on lines %s (values %s): keep one of them", d.Name, len(group),
				joinAnd(lines), joinAnd(values))})
	}
	return problems
}

// joinAnd joins items as "a, b and c".
func joinAnd(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// staticMessage explains why a static value is refused and how to fix it, on one line.
func staticMessage(d *Definition, text string, v *violation) string {
	lo, hi := staticRange(d)
	shown := show(d, strings.TrimSpace(text))
	remove := "remove the setting (default " + showDefault(d) + ")"
	switch {
	case v.badType:
		return fmt.Sprintf("%s=%s is not a valid %s: %s or set %s", d.Name, shown, d.Type, remove, expected(d, lo, hi))
	case v.below && d.Migration != "":
		return fmt.Sprintf("%s=%s is out of range %s: %s; %s or set a value in %s before upgrading",
			d.Name, shown, formatRange(lo, hi), d.Migration, remove, formatRange(lo, hi))
	case v.below || v.above:
		return fmt.Sprintf("%s=%s is out of range %s: %s or set a value in %s", d.Name, shown, formatRange(lo, hi), remove, formatRange(lo, hi))
	}
	return fmt.Sprintf("%s=%s %s: %s or set %s", d.Name, shown, v.reason, remove, expected(d, lo, hi))
}

// groupKeyInStatic explains that a group key cannot be set for the whole process.
func groupKeyInStatic(d *Definition) string {
	msg := d.Name + " is a group config, set per group with IncrementalAlterConfigs on a GROUP resource"
	if d.Synonym != "" {
		return msg + "; to change the default of every group, set " + d.Synonym + " instead"
	}
	return msg + "; remove it here"
}

// unknownEnv explains an environment variable with the prefix that names no broker key.
func unknownEnv(sch *schema, name string) string {
	for _, i := range sch.group {
		if d := &sch.defs[i]; d.EnvName() == name {
			return fmt.Sprintf("environment variable %s names the group config %s, which cannot be set for the whole process; unset it", name, d.Name)
		}
	}
	return fmt.Sprintf("unknown environment variable %s: every %s* variable must name a broker config (%s = key upper-cased, dots as underscores); unset it or fix its name",
		name, EnvPrefix, EnvPrefix)
}

// isServiceLink reports whether name is one of the variables Kubernetes injects into every pod
// for a Service named "coordinatord" in its namespace (COORDINATORD_SERVICE_HOST,
// COORDINATORD_SERVICE_PORT[_NAME], COORDINATORD_PORT[_7070_TCP[_PROTO|_PORT|_ADDR]]). No config key
// upper-cases to these names, so they are skipped instead of refusing to start.
func isServiceLink(name string) bool {
	rest := strings.TrimPrefix(name, EnvPrefix)
	return rest == "SERVICE_HOST" || rest == "SERVICE_PORT" || strings.HasPrefix(rest, "SERVICE_PORT_") ||
		rest == "PORT" || strings.HasPrefix(rest, "PORT_")
}

// maxPropertiesBytes bounds what loadProperties reads: a properties file of broker configs holds a
// few dozen keys, and a path that names a device (/dev/zero) or a huge file by mistake must fail
// start-up, not fill the memory.
const maxPropertiesBytes = 1 << 20

// loadProperties reads a Java properties file, without ${} expansion: as UTF-8, or, when it is
// not valid UTF-8, as ISO-8859-1 (Latin-1), the encoding of Java's Properties.load and so of
// Kafka's own files (Java's PropertyResourceBundle falls back the same way). A file holding a NUL
// byte is refused as not being text, one larger than maxPropertiesBytes as too large, and a parse
// error shows no byte that is not printable text.
// It also returns every setting of the file in order (see fileSettings), so that a key set twice
// can be reported.
func loadProperties(path string) (*properties.Properties, []setting, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxPropertiesBytes+1))
	if err != nil {
		return nil, nil, err
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, nil, fmt.Errorf("it is not a text file (a NUL byte at byte %d)", i)
	}
	if len(data) > maxPropertiesBytes {
		return nil, nil, fmt.Errorf("it is larger than %d bytes, too large for a properties file of broker configs", maxPropertiesBytes)
	}
	enc := properties.UTF8
	if !utf8.Valid(data) {
		enc = properties.ISO_8859_1
	}
	loader := properties.Loader{Encoding: enc, DisableExpansion: true}
	p, err := loader.LoadBytes(data)
	if err != nil {
		return nil, nil, errors.New(strings.Map(func(r rune) rune {
			if r == utf8.RuneError || !unicode.IsPrint(r) {
				return '?'
			}
			return r
		}, err.Error()))
	}
	return p, fileSettings(loader, data), nil
}
