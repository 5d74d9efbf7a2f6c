package groupcfg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
)

// AlterConfig is one change of an IncrementalAlterConfigs resource.
type AlterConfig struct {
	Name  string
	Op    Operation
	Value *string // required by SET, APPEND and SUBTRACT; ignored by DELETE
}

// AlterResource is the set of changes to one resource, applied together or not at all.
type AlterResource struct {
	Type    ResourceType
	Name    string // group id; for BROKER "" or this node's id
	Configs []AlterConfig
}

// AlterResult is the outcome for one resource.
type AlterResult struct {
	Type         ResourceType
	Name         string
	ErrorCode    kafkaerr.Code
	ErrorMessage string // "" when ErrorCode is kafkaerr.None
}

// alterError is a refused resource.
type alterError struct {
	code kafkaerr.Code
	msg  string
}

func invalidConfig(format string, args ...any) *alterError {
	return &alterError{code: kafkaerr.InvalidConfig, msg: fmt.Sprintf(format, args...)}
}

func invalidRequest(format string, args ...any) *alterError {
	return &alterError{code: kafkaerr.InvalidRequest, msg: fmt.Sprintf(format, args...)}
}

// maxGroupIDBytes is the longest group id a share group can have, as the state RPCs allow: Kafka
// writes group ids as int16-prefixed strings.
const maxGroupIDBytes = 32767

// checkGroupName refuses a GROUP resource name that no share group can have, unless the store
// already holds overrides for it (stored before the limit was checked), which can then still be
// described and deleted (alterGroup refuses any other operation on it).
func checkGroupName(name string, stored bool) *alterError {
	switch {
	case name == "":
		return invalidRequest("a GROUP resource needs a group id; the name is empty")
	case len(name) > maxGroupIDBytes && !stored:
		return invalidRequest("the GROUP resource name is %d bytes long; a group id has at most %d bytes", len(name), maxGroupIDBytes)
	}
	return nil
}

// IncrementalAlterConfigs applies changes to GROUP resources (per-group overrides) and to the
// BROKER resource of this node (dynamic broker keys). Results are in request order. Resources
// are validated in request order, each against the configuration the earlier ones of the same
// request leave; all changes to one resource apply together or not at all. Group values are
// validated against the broker bounds in force; an existing override is never re-validated.
// Accepted changes are made durable together before any of them is acknowledged or becomes
// visible to lookups; if that fails, every accepted resource gets UNKNOWN_SERVER_ERROR and
// nothing changes in this process. validateOnly checks everything and stores nothing. As in
// Kafka, DELETE of a name that nothing is stored under succeeds and changes nothing, whatever the
// name, and DELETE drops a value stored under a name this release cannot alter.
//
// Changes are applied one request at a time; a request waits for the one before it only until
// ctx is done. A request whose ctx is done before its changes are applied (made durable, or
// proposed to the cluster) changes nothing: its resources get REQUEST_TIMED_OUT. The cost of a
// request grows with its resources, not with the groups stored.
func (m *Manager) IncrementalAlterConfigs(ctx context.Context, resources []AlterResource, validateOnly bool) []AlterResult {
	results := make([]AlterResult, len(resources))
	for i, r := range resources {
		results[i] = AlterResult{Type: r.Type, Name: r.Name}
	}
	if err := m.lockAdmin(ctx); err != nil {
		for i := range results {
			results[i].ErrorCode, results[i].ErrorMessage = kafkaerr.RequestTimedOut, notApplied(err)
		}
		return results
	}
	defer m.unlockAdmin()
	cur := m.view.Load()
	p := m.plan(cur, resources, results)
	if validateOnly || p.empty() {
		return results
	}
	if err := ctx.Err(); err != nil {
		p.refuse(results, kafkaerr.RequestTimedOut, notApplied(err))
		return results
	}
	if m.repl != nil {
		// Every node applies the change once it is committed, this one before commit returns.
		if err := m.commit(ctx, &p.change); err != nil {
			m.logger.Error("config change not applied: the cluster did not commit it", zap.Error(err))
			p.refuse(results, kafkaerr.UnknownServerError, "The change was not committed by the cluster ("+err.Error()+
				"); it may still be applied: describe the configs to see whether it was.")
			return results
		}
		m.logger.Info("config change committed", p.logFields()...)
		return results
	}
	next := m.nextView(cur, &p.change, p.broker)
	if err := m.store.commit(&storeRecord{Generation: next.generation, change: p.change}, next.storeState); err != nil {
		m.logger.Error("config change not applied: the config store could not make it durable", zap.Error(err))
		p.refuse(results, kafkaerr.UnknownServerError, notDurable(err))
		return results
	}
	m.publish(cur, next, &p.change)
	m.logger.Info("config store updated", append([]zap.Field{zap.Uint64("generation", next.generation)}, p.logFields()...)...)
	return results
}

// lockAdmin takes the admin lock, waiting at most until ctx is done.
func (m *Manager) lockAdmin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case m.admin <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Manager) unlockAdmin() { <-m.admin }

// notApplied is the answer to the resources of a request whose context ended (err) before its
// changes were applied.
func notApplied(err error) string {
	if errors.Is(err, context.Canceled) {
		return "the request was cancelled before its changes were applied; nothing was changed"
	}
	return "the request's deadline passed before its changes were applied; nothing was changed: send it again " +
		"with a later deadline, or split it into smaller requests"
}

// alterPlan is what the accepted resources of a request change.
type alterPlan struct {
	change   change
	broker   *brokerState // the broker values in force after the change
	accepted []int        // the accepted resources, by request position
	logged   []string     // the changes of the first of them, for the log
}

// loggedChanges is how many resources the log line of a change describes; loggedChangeBytes
// bounds each description.
const (
	loggedChanges     = 5
	loggedChangeBytes = 256
)

func (p *alterPlan) empty() bool { return len(p.change.Groups) == 0 && !p.change.BrokerSet }

// refuse gives every accepted resource the error code and msg.
func (p *alterPlan) refuse(results []AlterResult, code kafkaerr.Code, msg string) {
	for _, i := range p.accepted {
		results[i].ErrorCode, results[i].ErrorMessage = code, msg
	}
}

// logFields describe the change for its log line: how many resources it changes and the first
// few changes, so that the line stays short whatever the request's size.
func (p *alterPlan) logFields() []zap.Field {
	return []zap.Field{zap.Int("resources", len(p.accepted)), zap.Strings("first_changes", p.logged)}
}

// plan validates resources against the view cur, fills in the results of the refused ones and
// returns what the accepted ones change. It costs O(resources): each resource is looked up in
// cur, never copied with it.
func (m *Manager) plan(cur *view, resources []AlterResource, results []AlterResult) *alterPlan {
	p := &alterPlan{change: change{Groups: map[string]map[string]string{}}}
	dynamic, broker := cur.dynamic, cur.broker
	seen := make(map[string]int, len(resources))
	brokerNames := map[string]bool{} // the names the request gives this node's BROKER resource
	for _, r := range resources {
		seen[m.resourceID(r.Type, r.Name)]++
		if r.Type == ResourceBroker && m.isThisNode(r.Name) {
			brokerNames[r.Name] = true
		}
	}
	for i, r := range resources {
		var err *alterError
		dup := seen[m.resourceID(r.Type, r.Name)] > 1
		switch {
		case m.closed:
			err = &alterError{code: kafkaerr.UnknownServerError, msg: "the config manager is closed (coordinatord is shutting down)"}
		case dup && r.Type == ResourceBroker && m.isThisNode(r.Name) && len(brokerNames) > 1:
			err = invalidRequest("BROKER resources \"\" and %q both name this node, and the request names it more than once; "+
				"send its changes as one resource", strconv.Itoa(int(m.nodeID)))
		case dup:
			err = invalidRequest("resource %s %s appears more than once in the request; send each resource once", r.Type, show(nil, r.Name))
		case r.Type == ResourceGroup:
			var next map[string]string
			var changed bool
			next, changed, err = m.alterGroup(r, cur, broker)
			if err == nil && changed {
				p.change.Groups[r.Name] = next
			}
		case r.Type == ResourceBroker:
			var next *brokerState
			var dyn map[string]string
			next, dyn, err = m.alterBroker(r, dynamic, broker)
			if err == nil && next != nil {
				dynamic, broker = dyn, next
				p.change.Broker, p.change.BrokerSet, p.broker = dyn, true, next
			}
		default:
			err = unsupportedResource(r.Type)
		}
		if err != nil {
			results[i].ErrorCode, results[i].ErrorMessage = err.code, err.msg
			continue
		}
		p.accepted = append(p.accepted, i)
		if len(p.logged) < loggedChanges {
			p.logged = append(p.logged, truncateForLog(r.Type.String()+" "+show(nil, r.Name)+": "+describeChanges(m.sch, r)))
		}
	}
	return p
}

// truncateForLog cuts s to loggedChangeBytes, on a character boundary, marking the cut.
func truncateForLog(s string) string {
	if len(s) <= loggedChangeBytes {
		return s
	}
	cut := loggedChangeBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// resourceID identifies a resource for duplicate detection: the BROKER names of this node are
// one resource.
func (m *Manager) resourceID(t ResourceType, name string) string {
	if t == ResourceBroker && m.isThisNode(name) {
		name = ""
	}
	return strconv.Itoa(int(t)) + "/" + name
}

func (m *Manager) isThisNode(name string) bool {
	if name == "" {
		return true
	}
	n, err := strconv.ParseInt(name, 10, 32)
	return err == nil && int32(n) == m.nodeID
}

func unsupportedResource(t ResourceType) *alterError {
	if t == ResourceTopic {
		return invalidRequest("TOPIC resources are not supported by coordinatord")
	}
	return invalidRequest("resource type %d is not supported; use BROKER (4) or GROUP (32)", int(t))
}

// checkNode refuses a BROKER resource that names another node.
func (m *Manager) checkNode(name string) *alterError {
	if m.isThisNode(name) {
		return nil
	}
	return invalidRequest("BROKER resource %s is not this node: coordinatord configures only itself; name it \"\" or %q (its node id)",
		show(nil, name), strconv.Itoa(int(m.nodeID)))
}

// notDurable is the answer to a change the config store could not make durable: the kind of
// failure and the operating system's error, without the server's file names (they are in its
// log).
func notDurable(err error) string {
	msg := "the change could not be made durable and was not applied: the config store could not be written"
	if errno := syscall.Errno(0); errors.As(err, &errno) {
		msg += " (" + errno.Error() + ")"
	}
	if errors.Is(err, errStoreFailed) {
		msg += " earlier, and refuses changes until coordinatord is restarted"
	}
	return msg
}

// checkOps refuses malformed changes: duplicate names, unknown operations, missing values.
func checkOps(r AlterResource) *alterError {
	if !utf8.ValidString(r.Name) {
		return invalidRequest("resource name %s is not valid UTF-8", show(nil, r.Name))
	}
	names := map[string]bool{}
	for _, c := range r.Configs {
		if !utf8.ValidString(c.Name) || (c.Value != nil && !utf8.ValidString(*c.Value)) {
			return invalidRequest("config %s: names and values must be valid UTF-8", show(nil, c.Name))
		}
		if names[c.Name] {
			return invalidRequest("config %s appears more than once in the changes to %s %s; send one change per config",
				show(nil, c.Name), r.Type, show(nil, r.Name))
		}
		names[c.Name] = true
		switch c.Op {
		case OpSet, OpAppend, OpSubtract:
			if c.Value == nil {
				return invalidRequest("%s of %s needs a value", c.Op, show(nil, c.Name))
			}
		case OpDelete:
		default:
			return invalidConfig("config operation %d of %s is not one of SET (1), DELETE (2), APPEND (3), SUBTRACT (4)",
				int(c.Op), show(nil, c.Name))
		}
	}
	return nil
}

// alterGroup validates the changes to one group and returns its resulting overrides.
func (m *Manager) alterGroup(r AlterResource, cur *view, b *brokerState) (map[string]string, bool, *alterError) {
	var old map[string]string
	if g, ok := cur.groups.Get(r.Name); ok {
		old = g.stored
	}
	if err := checkGroupName(r.Name, old != nil); err != nil {
		return nil, false, err
	}
	if len(r.Name) > maxGroupIDBytes {
		for _, c := range r.Configs {
			if c.Op != OpDelete {
				return nil, false, invalidRequest("the GROUP resource name is %d bytes long, more than a group id can have: its stored overrides can only be deleted", len(r.Name))
			}
		}
	}
	if err := checkOps(r); err != nil {
		return nil, false, err
	}
	next := maps.Clone(old)
	if next == nil {
		next = map[string]string{}
	}
	touched := map[string]bool{}
	for _, c := range r.Configs {
		d, ok := m.sch.lookup(c.Name)
		if c.Op == OpDelete && (!ok || d.Scope != ScopeGroup) {
			// As in Kafka (ConfigurationControlManager.incrementalAlterConfigResource), DELETE
			// removes whatever is stored under the name, and is a no-op when nothing is: an
			// override stored by another release can be dropped.
			delete(next, c.Name)
			continue
		}
		switch {
		case !ok:
			return nil, false, invalidConfig("unknown group config %s; DescribeConfigs on a GROUP resource lists the group configs", show(nil, c.Name))
		case d.Scope != ScopeGroup:
			return nil, false, invalidConfig("%s is a broker config, not a group config; %s", d.Name, brokerChangeHint(d))
		case (c.Op == OpAppend || c.Op == OpSubtract) && d.Type != TypeList:
			return nil, false, invalidConfig("%s applies to LIST configs only and %s has type %s; use SET", c.Op, d.Name, d.Type)
		}
		touched[d.Name] = true
		if c.Op == OpDelete {
			delete(next, d.Name)
			continue
		}
		text := *c.Value
		if c.Op != OpSet {
			current := m.evalGroup(b, m.defaultGroup(b), next).vals[m.sch.groupPos[d.Name]]
			var err *alterError
			if text, err = listOp(d, c, current); err != nil {
				return nil, false, err
			}
		}
		v, err := m.checkGroupValue(d, text, b)
		if err != nil {
			return nil, false, err
		}
		next[d.Name] = v.text
	}
	if err := m.checkGroupRelations(next, touched, b); err != nil {
		return nil, false, err
	}
	return next, !maps.Equal(old, next), nil
}

// listOp returns the text a change sets: its value for SET, or the LIST value in force with the
// items added (APPEND) or removed (SUBTRACT).
func listOp(d *Definition, c AlterConfig, current value) (string, *alterError) {
	if c.Op == OpSet {
		return *c.Value, nil
	}
	items, ok := parseValue(TypeList, *c.Value)
	if !ok {
		return "", invalidConfig("%s=%s is not a valid list", d.Name, show(d, *c.Value))
	}
	out := slices.Clone(current.list)
	for _, item := range items.list {
		at := slices.Index(out, item)
		switch {
		case c.Op == OpAppend && at < 0:
			out = append(out, item)
		case c.Op == OpSubtract && at >= 0:
			out = slices.Delete(out, at, at+1)
		}
	}
	return strings.Join(out, ","), nil
}

// checkGroupValue validates a group value: its type and validator, then, for numeric keys, the
// bounds in force.
func (m *Manager) checkGroupValue(d *Definition, text string, b *brokerState) (value, *alterError) {
	v, bad := checkStatic(d, text)
	shown := show(d, strings.TrimSpace(text))
	if !isNumeric(d.Type) {
		switch {
		case bad == nil:
			return v, nil
		case bad.badType:
			return v, invalidConfig("%s=%s is not a valid %s: set %s", d.Name, shown, d.Type, expected(d, 0, 0))
		}
		return v, invalidConfig("%s=%s %s", d.Name, shown, bad.reason)
	}
	bn := groupBounds(d, b)
	if bad != nil && bad.badType {
		return v, invalidConfig("%s=%s is not a valid %s: set a whole number in %s (%s)",
			d.Name, shown, d.Type, formatRange(bn.lo, bn.hi), bn.explain(d))
	}
	if v.num >= bn.lo && v.num <= bn.hi {
		return v, nil
	}
	hint := ""
	switch {
	case v.num > bn.hi && bn.hiKey != "":
		hint = ", or first raise " + bn.hiKey + boundChangeWhere(m.sch, bn.hiKey)
	case v.num < bn.lo && bn.loKey != "":
		hint = ", or first lower " + bn.loKey + boundChangeWhere(m.sch, bn.loKey)
	}
	return v, invalidConfig("%s=%s is out of range %s: %s; set a value in %s%s",
		d.Name, shown, formatRange(bn.lo, bn.hi), bn.explain(d), formatRange(bn.lo, bn.hi), hint)
}

// boundChangeWhere says how a broker key that bounds group values is changed.
func boundChangeWhere(sch *schema, key string) string {
	if d, ok := sch.lookup(key); ok && d.Dynamic {
		return " on the BROKER resource"
	}
	return " in the broker configuration (restart needed)"
}

// brokerChangeHint says how a broker key is changed.
func brokerChangeHint(d *Definition) string {
	if d.Dynamic {
		return "alter it on the BROKER resource"
	}
	return "set it in the properties file, environment or --override and restart"
}

// groupLessThan are the relations between group keys that alters must keep (Kafka: the session
// timeout must be greater than the heartbeat interval).
func groupLessThan() [][2]string {
	return [][2]string{{keyHeartbeatInterval, keySessionTimeout}}
}

// checkGroupRelations checks the relations that involve a touched key, on the values the group
// would run with (its resulting overrides, clamped, or the inherited values).
func (m *Manager) checkGroupRelations(next map[string]string, touched map[string]bool, b *brokerState) *alterError {
	var eff *groupValues
	for _, rel := range groupLessThan() {
		lo, hi := rel[0], rel[1]
		if !touched[lo] && !touched[hi] {
			continue
		}
		if eff == nil {
			eff = m.evalGroup(b, m.defaultGroup(b), next)
		}
		loV, hiV := eff.vals[m.sch.groupPos[lo]].num, eff.vals[m.sch.groupPos[hi]].num
		if loV < hiV {
			continue
		}
		origin := func(key string) string {
			if _, set := next[key]; set {
				return ""
			}
			return " (inherited)"
		}
		return invalidConfig("%s=%d%s must be greater than %s=%d%s; raise %s or lower %s",
			hi, hiV, origin(hi), lo, loV, origin(lo), hi, lo)
	}
	return nil
}

// alterBroker validates the changes to this node's dynamic broker keys and returns the broker
// values and stored dynamic values that result (nil when nothing changes).
func (m *Manager) alterBroker(r AlterResource, dynamic map[string]string, b *brokerState) (*brokerState, map[string]string, *alterError) {
	if err := m.checkNode(r.Name); err != nil {
		return nil, nil, err
	}
	if err := checkOps(r); err != nil {
		return nil, nil, err
	}
	dyn := maps.Clone(dynamic)
	next := b.clone()
	for _, c := range r.Configs {
		d, ok := m.sch.lookup(c.Name)
		if c.Op == OpDelete && (!ok || d.Scope != ScopeBroker || !d.Dynamic) {
			// As for groups: a value stored under a name this release cannot alter was never
			// applied (brokerInForce ignores it), so deleting it only drops it from the store.
			delete(dyn, c.Name)
			continue
		}
		switch {
		case !ok:
			return nil, nil, invalidConfig("unknown broker config %s; DescribeConfigs on the BROKER resource lists the broker configs", show(nil, c.Name))
		case d.Scope != ScopeBroker:
			return nil, nil, invalidConfig("%s is a group config, not a broker config; alter it on a GROUP resource", d.Name)
		case !d.Dynamic:
			return nil, nil, invalidConfig("%s cannot be updated dynamically; set it in the properties file, environment or --override and restart", d.Name)
		case (c.Op == OpAppend || c.Op == OpSubtract) && d.Type != TypeList:
			return nil, nil, invalidConfig("%s applies to LIST configs only and %s has type %s; use SET", c.Op, d.Name, d.Type)
		}
		i := m.sch.index[d.Name]
		if c.Op == OpDelete {
			delete(dyn, d.Name)
			next.vals[i], next.source[i], next.origin[i] = m.static.state.vals[i], m.static.state.source[i], m.static.state.origin[i]
			continue
		}
		text, err := listOp(d, c, next.vals[i])
		if err != nil {
			return nil, nil, err
		}
		v, bad := checkStatic(d, text)
		if bad != nil {
			return nil, nil, invalidConfig("%s", dynamicMessage(d, text, bad))
		}
		dyn[d.Name] = v.text
		next.vals[i], next.source[i], next.origin[i] = v, SourceDynamicBrokerConfig, "dynamic"
	}
	valid := make(map[int]bool, len(m.sch.broker))
	for _, i := range m.sch.broker {
		valid[i] = true
	}
	if problems := crossCheck(m.sch, next, valid); len(problems) > 0 {
		return nil, nil, invalidConfig("%s", problems[0].Message)
	}
	if maps.Equal(dyn, dynamic) {
		return nil, nil, nil
	}
	return next, dyn, nil
}

// dynamicMessage explains why a dynamic broker value is refused.
func dynamicMessage(d *Definition, text string, v *violation) string {
	lo, hi := staticRange(d)
	shown := show(d, strings.TrimSpace(text))
	switch {
	case v.badType:
		return fmt.Sprintf("%s=%s is not a valid %s: set %s", d.Name, shown, d.Type, expected(d, lo, hi))
	case v.below && d.Migration != "":
		return fmt.Sprintf("%s=%s is out of range %s: %s; set a value in %s", d.Name, shown, formatRange(lo, hi), d.Migration, formatRange(lo, hi))
	case v.below || v.above:
		return fmt.Sprintf("%s=%s is out of range %s: set a value in %s", d.Name, shown, formatRange(lo, hi), formatRange(lo, hi))
	}
	return fmt.Sprintf("%s=%s %s", d.Name, shown, v.reason)
}

// describeChanges renders a resource's changes for the log, secrets masked.
func describeChanges(sch *schema, r AlterResource) string {
	parts := make([]string, 0, len(r.Configs))
	for _, c := range r.Configs {
		d, _ := sch.lookup(c.Name)
		switch {
		case c.Op == OpDelete:
			parts = append(parts, "DELETE "+c.Name)
		case c.Value != nil:
			parts = append(parts, c.Op.String()+" "+c.Name+"="+show(d, *c.Value))
		}
	}
	return strings.Join(parts, ", ")
}
