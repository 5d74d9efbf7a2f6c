package groupcfg

import "fmt"

// lessThan is a cross-check between two numeric broker keys: lo must be less than hi.
type lessThan struct {
	lo, hi string
	why    string
}

// lessThanChecks are the cross-checks that the group bounds do not already imply.
func lessThanChecks() []lessThan {
	return []lessThan{{
		lo: keyBrokerHeartbeatInterval, hi: keyBrokerSessionTimeout,
		why: "members would be timed out between heartbeats",
	}}
}

// crossCheck checks the relations between broker keys that start-up requires (Kafka's
// ShareGroupConfig and GroupCoordinatorConfig checks): for every group key with a synonym and
// bounds, min ≤ max (reported alone when violated) and min ≤ default ≤ max; and every
// lessThanChecks relation. Keys whose own value is invalid
// (valid[i] false) are skipped, so that one bad value is reported once.
func crossCheck(sch *schema, st *brokerState, valid map[int]bool) []Problem {
	c := crossChecker{sch: sch, st: st, valid: valid}
	var problems []Problem
	for _, gi := range sch.group {
		problems = append(problems, c.groupBounds(&sch.defs[gi])...)
	}
	for _, lt := range lessThanChecks() {
		if !c.ok(lt.lo, lt.hi) || st.num(lt.lo) < st.num(lt.hi) {
			continue
		}
		problems = append(problems, c.relation(lt.lo, lt.hi,
			fmt.Sprintf("%s=%d is not less than %s=%d: %s; lower %s or raise %s",
				lt.lo, st.num(lt.lo), lt.hi, st.num(lt.hi), lt.why, lt.lo, lt.hi)))
	}
	return problems
}

// crossChecker holds what crossCheck's steps share: the broker values under check and which of
// them are valid on their own.
type crossChecker struct {
	sch   *schema
	st    *brokerState
	valid map[int]bool
}

// ok reports whether every named key has a valid value of its own, so that a relation involving
// an invalid one is not reported on top of it.
func (c crossChecker) ok(names ...string) bool {
	for _, n := range names {
		if i, found := c.sch.index[n]; !found || !c.valid[i] {
			return false
		}
	}
	return true
}

// relation is the problem of a relation between keys a and b, put on the key an operator most
// likely meant to change: one they set, else a.
func (c crossChecker) relation(a, b, message string) Problem {
	key, origin := a, ""
	for _, k := range []string{a, b} {
		if i := c.sch.index[k]; c.st.source[i] != SourceDefaultConfig {
			key, origin = k, c.st.origin[i]
			break
		}
	}
	return Problem{Key: key, Value: c.st.vals[c.sch.index[key]].text, Source: origin, kind: problemRelation, Message: message}
}

// groupBounds checks the broker bounds of the group key g against each other and against the
// default its synonym gives it.
func (c crossChecker) groupBounds(g *Definition) []Problem {
	if g.Synonym == "" || !isNumeric(g.Type) || !c.ok(g.Synonym) {
		return nil
	}
	if p, empty := c.emptyBounds(g); empty {
		// No default can lie within empty bounds: say so once, not as the default's fault.
		return []Problem{p}
	}
	return c.defaultWithinBounds(g)
}

// emptyBounds reports min > max for the group key g, which no value of g could satisfy.
func (c crossChecker) emptyBounds(g *Definition) (Problem, bool) {
	if g.MinKey == "" || g.MaxKey == "" || !c.ok(g.MinKey, g.MaxKey) || c.st.num(g.MinKey) <= c.st.num(g.MaxKey) {
		return Problem{}, false
	}
	return c.relation(g.MinKey, g.MaxKey,
		fmt.Sprintf("%s=%d is above %s=%d: no value of %s could lie within these bounds; lower %s or raise %s",
			g.MinKey, c.st.num(g.MinKey), g.MaxKey, c.st.num(g.MaxKey), g.Name, g.MinKey, g.MaxKey)), true
}

// defaultWithinBounds checks that the synonym's value, which every group without an override
// gets, lies within g's bounds: the static range of g narrowed by its valid bound keys.
func (c crossChecker) defaultWithinBounds(g *Definition) []Problem {
	st := c.st
	def := st.num(g.Synonym)
	lo, hi := staticRange(g)
	if g.MinKey != "" && c.ok(g.MinKey) {
		lo = max(lo, st.num(g.MinKey))
	}
	if g.MaxKey != "" && c.ok(g.MaxKey) {
		hi = min(hi, st.num(g.MaxKey))
	}
	var problems []Problem
	for _, b := range []struct {
		bound string
		bad   bool
		dir   string
		fix   string
	}{
		{g.MinKey, def < lo, "below", "raise %s or lower %s"},
		{g.MaxKey, def > hi, "above", "lower %s or raise %s"},
	} {
		if b.bound == "" || b.bound == g.Synonym || !c.ok(b.bound) || !b.bad {
			continue
		}
		problems = append(problems, c.relation(g.Synonym, b.bound,
			fmt.Sprintf("%s=%d is %s %s=%d: the default of %s must lie within its bounds %s; "+b.fix,
				g.Synonym, def, b.dir, b.bound, st.num(b.bound), g.Name, formatRange(lo, hi), g.Synonym, b.bound)))
	}
	return problems
}
