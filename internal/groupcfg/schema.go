package groupcfg

import (
	"errors"
	"fmt"
)

// schema is a definition table indexed for lookups. It is immutable once built.
type schema struct {
	defs     []Definition
	index    map[string]int // key name → position in defs
	env      map[string]int // environment variable → position in defs (broker keys)
	broker   []int          // positions of broker keys, in table order
	group    []int          // positions of group keys, in table order
	groupPos map[string]int // group key name → position in a group value vector
	defaults []value        // parsed Default of every key, by position in defs
}

// newSchema indexes defs and checks that the table is consistent: unique names and environment
// names, defaults that pass their own validators, group keys whose synonyms and bounds are broker
// keys of the right type. A broken table is a programming error reported as an error.
func newSchema(defs []Definition) (*schema, error) {
	s := &schema{
		defs:     defs,
		index:    make(map[string]int, len(defs)),
		env:      make(map[string]int, len(defs)),
		groupPos: make(map[string]int),
		defaults: make([]value, len(defs)),
	}
	var errs []error
	bad := func(d *Definition, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config table: %s: %s", d.Name, fmt.Sprintf(format, args...)))
	}
	for i := range defs {
		d := &defs[i]
		if d.Name == "" {
			errs = append(errs, fmt.Errorf("config table: row %d has no name", i))
			continue
		}
		if _, dup := s.index[d.Name]; dup {
			bad(d, "defined twice")
			continue
		}
		s.index[d.Name] = i
		switch d.Type {
		case TypeBoolean, TypeString, TypeInt, TypeLong, TypeList, TypePassword:
		default:
			bad(d, "unknown type %d", d.Type)
			continue
		}
		if d.Doc == "" {
			bad(d, "no documentation")
		}
		if d.Importance < ImportanceHigh || d.Importance > ImportanceLow {
			bad(d, "no importance")
		}
		if _, isRange := d.Validator.(Range); isRange != isNumeric(d.Type) && (isRange || d.Validator != nil) {
			bad(d, "a Range validator goes with INT and LONG keys only, and numeric keys take no other validator")
		}
		if d.Migration != "" && !isNumeric(d.Type) {
			bad(d, "a migration note needs a numeric key")
		}
		v, problem := checkStatic(d, d.Default)
		if problem != nil {
			bad(d, "default %q is not a valid value", d.Default)
		}
		s.defaults[i] = v
		switch d.Scope {
		case ScopeBroker:
			s.broker = append(s.broker, i)
			if j, dup := s.env[d.EnvName()]; dup {
				bad(d, "environment variable %s also names %s", d.EnvName(), defs[j].Name)
			}
			s.env[d.EnvName()] = i
		case ScopeGroup:
			s.groupPos[d.Name] = len(s.group)
			s.group = append(s.group, i)
			if !d.Dynamic {
				bad(d, "group keys are dynamic")
			}
		default:
			bad(d, "unknown scope %d", d.Scope)
		}
	}
	// References are checked once every name is known.
	for _, i := range s.group {
		d := &defs[i]
		if d.Synonym != "" {
			syn, ok := s.lookup(d.Synonym)
			switch {
			case !ok || syn.Scope != ScopeBroker:
				bad(d, "synonym %s is not a broker key", d.Synonym)
			case syn.Type != d.Type:
				bad(d, "synonym %s has type %s, not %s", d.Synonym, syn.Type, d.Type)
			case syn.Default != d.Default:
				bad(d, "default %q differs from its synonym's %q", d.Default, syn.Default)
			}
		}
		for _, bound := range []string{d.MinKey, d.MaxKey} {
			if bound == "" {
				continue
			}
			b, ok := s.lookup(bound)
			if !ok || b.Scope != ScopeBroker || b.Type != d.Type || !isNumeric(d.Type) {
				bad(d, "bound %s is not a numeric broker key of type %s", bound, d.Type)
			}
		}
	}
	for i := range defs {
		d := &defs[i]
		if d.Scope == ScopeBroker && (d.Synonym != "" || d.MinKey != "" || d.MaxKey != "") {
			bad(d, "only group keys have synonyms and bounds")
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// lookup returns the definition of name.
func (s *schema) lookup(name string) (*Definition, bool) {
	i, ok := s.index[name]
	if !ok {
		return nil, false
	}
	return &s.defs[i], true
}

// builtinSchema indexes Definitions().
func builtinSchema() (*schema, error) {
	return newSchema(Definitions())
}
