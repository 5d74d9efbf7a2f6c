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
	var problems []Problem
	ok := func(names ...string) bool {
		for _, n := range names {
			if i, found := sch.index[n]; !found || !valid[i] {
				return false
			}
		}
		return true
	}
	// blame picks the key an operator most likely meant to change: one they set, else the first.
	blame := func(a, b string) (key, origin string) {
		for _, k := range []string{a, b} {
			if i := sch.index[k]; st.source[i] != SourceDefaultConfig {
				return k, st.origin[i]
			}
		}
		return a, ""
	}
	for _, gi := range sch.group {
		g := &sch.defs[gi]
		if g.Synonym == "" || !isNumeric(g.Type) || !ok(g.Synonym) {
			continue
		}
		if g.MinKey != "" && g.MaxKey != "" && ok(g.MinKey, g.MaxKey) && st.num(g.MinKey) > st.num(g.MaxKey) {
			// No default can lie within empty bounds: say so once, not as the default's fault.
			key, origin := blame(g.MinKey, g.MaxKey)
			problems = append(problems, Problem{
				Key: key, Value: st.vals[sch.index[key]].text, Source: origin, kind: problemRelation,
				Message: fmt.Sprintf("%s=%d is above %s=%d: no value of %s could lie within these bounds; lower %s or raise %s",
					g.MinKey, st.num(g.MinKey), g.MaxKey, st.num(g.MaxKey), g.Name, g.MinKey, g.MaxKey),
			})
			continue
		}
		def := st.num(g.Synonym)
		lo, hi := staticRange(g)
		if g.MinKey != "" && ok(g.MinKey) {
			lo = max(lo, st.num(g.MinKey))
		}
		if g.MaxKey != "" && ok(g.MaxKey) {
			hi = min(hi, st.num(g.MaxKey))
		}
		for _, c := range []struct {
			bound string
			bad   bool
			dir   string
			fix   string
		}{
			{g.MinKey, def < lo, "below", "raise %s or lower %s"},
			{g.MaxKey, def > hi, "above", "lower %s or raise %s"},
		} {
			if c.bound == "" || c.bound == g.Synonym || !ok(c.bound) || !c.bad {
				continue
			}
			key, origin := blame(g.Synonym, c.bound)
			problems = append(problems, Problem{
				Key: key, Value: st.vals[sch.index[key]].text, Source: origin, kind: problemRelation,
				Message: fmt.Sprintf("%s=%d is %s %s=%d: the default of %s must lie within its bounds %s; "+c.fix,
					g.Synonym, def, c.dir, c.bound, st.num(c.bound), g.Name, formatRange(lo, hi), g.Synonym, c.bound),
			})
		}
	}
	for _, c := range lessThanChecks() {
		if !ok(c.lo, c.hi) || st.num(c.lo) < st.num(c.hi) {
			continue
		}
		key, origin := blame(c.lo, c.hi)
		problems = append(problems, Problem{
			Key: key, Value: st.vals[sch.index[key]].text, Source: origin, kind: problemRelation,
			Message: fmt.Sprintf("%s=%d is not less than %s=%d: %s; lower %s or raise %s",
				c.lo, st.num(c.lo), c.hi, st.num(c.hi), c.why, c.lo, c.hi),
		})
	}
	return problems
}
