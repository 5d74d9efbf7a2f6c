package groupcfg

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// EnvPrefix starts the name of every environment variable that sets a broker key.
const EnvPrefix = "COORDINATORD_"

// Definition describes one config key. Definitions() is the single table of every key; the
// README's config table, DescribeConfigs documentation, start-up validation, alter validation and
// evaluation all read it, so adding a key is adding a row.
type Definition struct {
	// Name is the key, with Kafka's name where Kafka has the key.
	Name string
	// Type is the value type; values are parsed (and whitespace-trimmed) as Kafka's ConfigDef does.
	Type Type
	// Default is the built-in value as canonical text. For a group key with a Synonym it is the
	// synonym's built-in default (the group key inherits the synonym's value in force).
	Default string
	// Validator restricts the values of Type that are accepted; nil accepts any.
	Validator Validator
	// Importance and Doc are shown in DescribeConfigs and the README.
	Importance Importance
	Doc        string
	// Scope says whether the key is set for the process (broker) or per group.
	Scope Scope
	// Dynamic keys can be altered at run time with IncrementalAlterConfigs. Every group key is
	// dynamic; a dynamic broker key is altered on the BROKER resource and persisted.
	Dynamic bool
	// Synonym, for a group key, is the broker key whose value in force is the group's value when
	// the group has no override.
	Synonym string
	// MinKey and MaxKey, for an INT group key, name the broker keys whose values in force bound
	// the group values: alters outside them are rejected and stored overrides are clamped to them
	// when evaluated. A key may name its own Synonym as MaxKey (a ceiling); "" means the
	// Validator's bound alone.
	MinKey, MaxKey string
	// Sensitive values are never shown (DescribeConfigs, logs, errors).
	Sensitive bool
	// Internal keys are left out of DescribeConfigs unless asked for by name (as in Kafka).
	Internal bool
	// Server marks coordinatord's own server keys, which have no Kafka counterpart.
	Server bool
	// Migration, when set, explains why values below the Validator's minimum that older releases
	// accepted are now refused; start-up errors for such values then carry the upgrade step.
	Migration string
}

// EnvName returns the environment variable that sets this key: EnvPrefix + the key upper-cased
// with dots as underscores, e.g. COORDINATORD_SHARE_COORDINATOR_WRITE_TIMEOUT_MS.
func (d Definition) EnvName() string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(d.Name, ".", "_"))
}

// hidden reports whether the key's values are never shown: Sensitive keys and PASSWORD keys.
func (d Definition) hidden() bool { return d.Sensitive || d.Type == TypePassword }

// Validator restricts the values of a key beyond its Type.
type Validator interface {
	// Validate returns nil if text, canonical text already of the key's Type, is allowed, else
	// the reason, phrased to follow "key=value", e.g. "must be one of a, b".
	Validate(text string) error
	// String describes the allowed values for documentation, e.g. "[1, 10]".
	String() string
}

// Range accepts whole numbers in [Min, Max] (inclusive). Max = math.MaxInt64 means no upper
// bound beyond the type's own.
type Range struct {
	Min, Max int64
}

// Between returns the Range [lo, hi].
func Between(lo, hi int64) Range { return Range{Min: lo, Max: hi} }

// AtLeast returns the Range [lo, no upper bound].
func AtLeast(lo int64) Range { return Range{Min: lo, Max: math.MaxInt64} }

// Validate accepts text when it is a whole number in [Min, Max].
func (r Range) Validate(text string) error {
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return errors.New("is not a whole number")
	}
	if n < r.Min || n > r.Max {
		return errors.New("is out of range " + r.String())
	}
	return nil
}

// String returns "[Min, Max]", or "[Min, ...]" without an upper bound.
func (r Range) String() string {
	if r.Max == math.MaxInt64 {
		return "[" + strconv.FormatInt(r.Min, 10) + ", ...]"
	}
	return formatRange(r.Min, r.Max)
}

// OneOf accepts exactly (case-sensitively) one of its strings.
type OneOf []string

// Validate accepts text when it equals one of the strings.
func (o OneOf) Validate(text string) error {
	for _, s := range o {
		if text == s {
			return nil
		}
	}
	return errors.New("must be one of " + o.String())
}

// String lists the accepted strings, comma-separated.
func (o OneOf) String() string { return strings.Join(o, ", ") }

// Rule is a validator given by a function, for rules a Range or OneOf cannot express.
type Rule struct {
	// Desc describes the accepted values for documentation.
	Desc string
	// Check returns nil for an accepted value, else the reason (see Validator.Validate).
	Check func(text string) error
}

// Validate calls Check.
func (r Rule) Validate(text string) error { return r.Check(text) }

// String returns Desc.
func (r Rule) String() string { return r.Desc }

func formatRange(lo, hi int64) string {
	return "[" + strconv.FormatInt(lo, 10) + ", " + strconv.FormatInt(hi, 10) + "]"
}
