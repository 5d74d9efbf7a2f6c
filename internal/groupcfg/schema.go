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
	var errs tableErrors
	for i := range defs {
		s.addRow(i, &errs)
	}
	// References are checked once every name is known.
	for _, i := range s.group {
		s.checkSynonym(&defs[i], &errs)
		s.checkBounds(&defs[i], &errs)
	}
	for i := range defs {
		if d := &defs[i]; d.Scope == ScopeBroker && (d.Synonym != "" || d.MinKey != "" || d.MaxKey != "") {
			errs.bad(d, "only group keys have synonyms and bounds")
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// tableErrors collects the inconsistencies of a table, so that one run reports all of them rather
// than one fix at a time.
type tableErrors []error

// bad records an inconsistency of the row d.
func (e *tableErrors) bad(d *Definition, format string, args ...any) {
	*e = append(*e, fmt.Errorf("config table: %s: %s", d.Name, fmt.Sprintf(format, args...)))
}

// addRow indexes row i. A row without a usable name or type is not indexed further, as every
// later check would only repeat that one problem.
func (s *schema) addRow(i int, errs *tableErrors) {
	d := &s.defs[i]
	if d.Name == "" {
		*errs = append(*errs, fmt.Errorf("config table: row %d has no name", i))
		return
	}
	if _, dup := s.index[d.Name]; dup {
		errs.bad(d, "defined twice")
		return
	}
	s.index[d.Name] = i
	if !knownType(d.Type) {
		errs.bad(d, "unknown type %d", d.Type)
		return
	}
	checkFields(d, errs)
	v, problem := checkStatic(d, d.Default)
	if problem != nil {
		errs.bad(d, "default %q is not a valid value", d.Default)
	}
	s.defaults[i] = v
	s.addToScope(i, errs)
}

// knownType reports whether t is one of the Types the parser reads.
func knownType(t Type) bool {
	switch t {
	case TypeBoolean, TypeString, TypeInt, TypeLong, TypeList, TypePassword:
		return true
	}
	return false
}

// checkFields checks what DescribeConfigs, the README and validation need of every row: a doc,
// an importance, and a validator and migration note that fit the type.
func checkFields(d *Definition, errs *tableErrors) {
	if d.Doc == "" {
		errs.bad(d, "no documentation")
	}
	if d.Importance < ImportanceHigh || d.Importance > ImportanceLow {
		errs.bad(d, "no importance")
	}
	if _, isRange := d.Validator.(Range); isRange != isNumeric(d.Type) && (isRange || d.Validator != nil) {
		errs.bad(d, "a Range validator goes with INT and LONG keys only, and numeric keys take no other validator")
	}
	if d.Migration != "" && !isNumeric(d.Type) {
		errs.bad(d, "a migration note needs a numeric key")
	}
}

// addToScope files row i among the broker or the group keys. Broker keys are also set from the
// environment, so two of them must not map to one variable; group keys are set at run time, so
// they must be dynamic.
func (s *schema) addToScope(i int, errs *tableErrors) {
	d := &s.defs[i]
	switch d.Scope {
	case ScopeBroker:
		s.broker = append(s.broker, i)
		if j, dup := s.env[d.EnvName()]; dup {
			errs.bad(d, "environment variable %s also names %s", d.EnvName(), s.defs[j].Name)
		}
		s.env[d.EnvName()] = i
	case ScopeGroup:
		s.groupPos[d.Name] = len(s.group)
		s.group = append(s.group, i)
		if !d.Dynamic {
			errs.bad(d, "group keys are dynamic")
		}
	default:
		errs.bad(d, "unknown scope %d", d.Scope)
	}
}

// checkSynonym checks that the group key d inherits from a broker key that could stand in for
// it: same type, same built-in default.
func (s *schema) checkSynonym(d *Definition, errs *tableErrors) {
	if d.Synonym == "" {
		return
	}
	syn, ok := s.lookup(d.Synonym)
	switch {
	case !ok || syn.Scope != ScopeBroker:
		errs.bad(d, "synonym %s is not a broker key", d.Synonym)
	case syn.Type != d.Type:
		errs.bad(d, "synonym %s has type %s, not %s", d.Synonym, syn.Type, d.Type)
	case syn.Default != d.Default:
		errs.bad(d, "default %q differs from its synonym's %q", d.Default, syn.Default)
	}
}

// checkBounds checks that the group key d is bounded by numeric broker keys of its own type, as
// the clamping on evaluation compares their values with the group's.
func (s *schema) checkBounds(d *Definition, errs *tableErrors) {
	for _, bound := range []string{d.MinKey, d.MaxKey} {
		if bound == "" {
			continue
		}
		b, ok := s.lookup(bound)
		if !ok || b.Scope != ScopeBroker || b.Type != d.Type || !isNumeric(d.Type) {
			errs.bad(d, "bound %s is not a numeric broker key of type %s", bound, d.Type)
		}
	}
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
