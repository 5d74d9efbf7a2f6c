package groupcfg

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
)

func TestDefinitionsAreConsistent(t *testing.T) {
	if _, err := builtinSchema(); err != nil {
		t.Fatalf("the built-in table is inconsistent:\n%v", err)
	}
	// Only the snapshot ceiling is dynamic among the broker keys.
	for _, d := range Definitions() {
		if d.Scope == ScopeBroker && d.Dynamic != (d.Name == keySnapshotCeiling) {
			t.Errorf("%s: dynamic=%v", d.Name, d.Dynamic)
		}
	}
}

func TestSchemaRejectsBrokenTables(t *testing.T) {
	row := func(mod func(*Definition)) []Definition {
		defs := Definitions()
		for i := range defs {
			if defs[i].Name == keyDeliveryCountLimit {
				mod(&defs[i])
			}
		}
		return defs
	}
	for _, tc := range []struct {
		name string
		defs []Definition
		want string
	}{
		{"duplicate", append(Definitions(), Definitions()[0]), "defined twice"},
		{"bad default", row(func(d *Definition) { d.Default = "1" }), "not a valid value"},
		{"missing synonym", row(func(d *Definition) { d.Synonym = "no.such.key" }), "not a broker key"},
		{"bound of another type", row(func(d *Definition) { d.MaxKey = keyBrokerAssignorOffload }), "not a numeric broker key"},
		{"static group key", row(func(d *Definition) { d.Dynamic = false }), "group keys are dynamic"},
		{"no doc", row(func(d *Definition) { d.Doc = "" }), "no documentation"},
		{"range on a string", row(func(d *Definition) { d.Type, d.Default = TypeString, "5" }), "Range validator"},
		{"env clash", append(Definitions(), Definition{Name: "share_coordinator.write.timeout.ms", Type: TypeInt, Default: "1",
			Importance: ImportanceLow, Doc: "x", Scope: ScopeBroker}), "environment variable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newSchema(tc.defs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("newSchema: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// edgeCase is a value with the expected verdict and, for refusals, what the message must say.
type edgeCase struct {
	value  string
	ok     bool
	mustIn []string
}

// edgeCases derives the cases of a key from its definition: for numeric keys min, max (accepted),
// min−1, max+1 and a non-number (refused, naming [min, max]); for BOOLEAN true/false and a
// non-boolean; for OneOf each value and a wrong one. Rule validators have hand-written cases
// below: a new Rule key without cases fails the test.
func edgeCases(t *testing.T, d *Definition, lo, hi int64) []edgeCase {
	rng := formatRange(lo, hi)
	switch {
	case isNumeric(d.Type):
		below := strconv.FormatInt(lo-1, 10)
		if lo == math.MinInt64 {
			below = "-9223372036854775809"
		}
		above := strconv.FormatInt(hi+1, 10)
		if hi == math.MaxInt64 {
			above = "9223372036854775808"
		}
		return []edgeCase{
			{value: strconv.FormatInt(lo, 10), ok: true},
			{value: strconv.FormatInt(hi, 10), ok: true},
			{value: below, mustIn: []string{d.Name, below, rng}},
			{value: above, mustIn: []string{d.Name, above, rng}},
			{value: "12x", mustIn: []string{d.Name, "12x", "not a valid " + d.Type.String(), rng}},
			{value: "1.5", mustIn: []string{d.Name, "1.5", rng}},
		}
	case d.Type == TypeBoolean:
		return []edgeCase{
			{value: "true", ok: true}, {value: "FALSE", ok: true}, {value: " true ", ok: true},
			{value: "yes", mustIn: []string{d.Name, "yes", "not a valid BOOLEAN", "true or false"}},
		}
	}
	if o, ok := d.Validator.(OneOf); ok {
		cases := []edgeCase{{value: "nonsense", mustIn: []string{d.Name, "nonsense", o.String()}}}
		for _, v := range o {
			cases = append(cases, edgeCase{value: v, ok: true}, edgeCase{value: strings.ToUpper(v), mustIn: []string{v}})
		}
		return cases
	}
	switch d.Name {
	case keyAutoOffsetReset:
		return []edgeCase{
			{value: "earliest", ok: true}, {value: "latest", ok: true}, {value: "by_duration:pt1h", ok: true},
			{value: "by_duration:PT0S", ok: true}, {value: "by_duration:P1DT2H30M", ok: true}, {value: "by_duration:PT1.5S", ok: true},
			// Kafka's keywords are lower case only.
			{value: "LATEST", mustIn: []string{"lower case"}}, {value: "Earliest", mustIn: []string{"lower case"}},
			{value: "BY_DURATION:PT1H", mustIn: []string{"lower case"}},
			{value: "none", mustIn: []string{d.Name, "none", "earliest, latest or by_duration"}},
			{value: "by_duration:-PT1H", mustIn: []string{"negative"}},
			{value: "by_duration:PT-0.5S", mustIn: []string{"negative"}},
			{value: "by_duration:", mustIn: []string{"ISO-8601"}},
			{value: "by_duration:PT", mustIn: []string{"ISO-8601"}},
			{value: "by_duration:1h", mustIn: []string{"ISO-8601"}},
		}
	case keyDeadLetterTopicName:
		return []edgeCase{
			{value: "", ok: true}, {value: "dlq.orders", ok: true}, {value: "_one_underscore", ok: true},
			{value: "__consumer_offsets", mustIn: []string{d.Name, "__consumer_offsets", `must not start with "__"`}},
			// Kafka's Topic.validate: ASCII letters, digits, '.', '_' and '-', at most 249 of them, not "." or "..".
			{value: "Orders-DLQ_v2.9", ok: true}, {value: strings.Repeat("d", 249), ok: true},
			{value: strings.Repeat("d", 250), mustIn: []string{d.Name, "250 characters long", "at most 249 characters"}},
			{value: ".", mustIn: []string{d.Name, "not a valid topic name", `not "." or ".."`}},
			{value: "..", mustIn: []string{d.Name, "not a valid topic name"}},
			{value: "a b/c", mustIn: []string{d.Name, `"a b/c"`, "characters a topic name cannot hold", "ASCII letter, digit, '.', '_' or '-'"}},
			{value: "dlq\x00", mustIn: []string{d.Name, `"dlq\x00"`, "characters a topic name cannot hold"}},
			{value: "dlq\nnext", mustIn: []string{d.Name, `"dlq\nnext"`, "characters a topic name cannot hold"}},
			{value: "dlq/orders", mustIn: []string{"characters a topic name cannot hold"}},
			{value: "dlq-ö", mustIn: []string{"characters a topic name cannot hold"}},
		}
	}
	switch d.Name {
	case KeyAuthorizerClusterAction, KeyAuthorizerAlterConfigs, KeyAuthorizerDescribeConfigs, KeyAuthorizerAlterCluster:
		return []edgeCase{
			{value: "", ok: true}, {value: "*", ok: true}, {value: "User:CN=broker-1,O=Acme", ok: true},
			{value: " User:CN=a,O=Acme ; User:CN=b\\,c ;; * ", ok: true},
			{value: "CN=broker-1", mustIn: []string{d.Name, "CN=broker-1", "User:<distinguished name>"}},
			{value: "User:", mustIn: []string{d.Name, `"User:"`}},
			{value: "User:CN=a,User:CN=b", ok: true}, // one principal whose DN happens to contain "User:"
			{value: "User:CN=a;admin", mustIn: []string{`"admin"`}},
		}
	case keyMaxConnectionsPerIPOver:
		return []edgeCase{
			{value: "", ok: true}, {value: "127.0.0.1:200", ok: true}, {value: " 10.0.0.1:0, [::1]:5 ", ok: true},
			{value: "broker-1:100", mustIn: []string{d.Name, "broker-1", "not an IP address"}},
			{value: "10.0.0.1", mustIn: []string{d.Name, "ADDRESS:COUNT"}},
			{value: "10.0.0.1:-1", mustIn: []string{d.Name, "not a connection count"}},
		}
	}
	if d.Validator != nil {
		t.Fatalf("%s has a %T validator and no edge cases: add them to edgeCases", d.Name, d.Validator)
	}
	return []edgeCase{{value: "anything goes", ok: true}}
}

// TestEveryBrokerKeyBounds runs every broker key's edge cases through the static loader
// (--override), which must accept or refuse them on the key's own terms.
func TestEveryBrokerKeyBounds(t *testing.T) {
	for _, d := range Definitions() {
		if d.Scope != ScopeBroker {
			continue
		}
		lo, hi := staticRange(&d)
		for _, c := range edgeCases(t, &d, lo, hi) {
			t.Run(d.Name+"="+c.value, func(t *testing.T) {
				var own []Problem
				for _, p := range staticProblems(Sources{Overrides: []string{d.Name + "=" + c.value}}) {
					if p.kind == problemValue {
						own = append(own, p)
					}
				}
				if c.ok {
					if len(own) > 0 {
						t.Fatalf("refused: %v", own)
					}
					return
				}
				if len(own) != 1 || own[0].Key != d.Name || own[0].Source != "--override" {
					t.Fatalf("want one problem about %s from --override, got %+v", d.Name, own)
				}
				for _, s := range c.mustIn {
					if !strings.Contains(own[0].Message, s) {
						t.Fatalf("message %q lacks %q", own[0].Message, s)
					}
				}
				if strings.Contains(own[0].Message, "\n") {
					t.Fatalf("message is not one line: %q", own[0].Message)
				}
			})
		}
	}
}

// TestEveryGroupKeyBounds runs every group key's edge cases through IncrementalAlterConfigs
// (validate_only) against the default broker bounds in force.
func TestEveryGroupKeyBounds(t *testing.T) {
	f := openFixture(t, t.TempDir(), staticOf(t))
	broker := f.m.view.Load().broker
	for _, d := range Definitions() {
		if d.Scope != ScopeGroup {
			continue
		}
		var lo, hi int64
		if isNumeric(d.Type) {
			bn := groupBounds(&d, broker)
			lo, hi = bn.lo, bn.hi
		}
		for _, c := range edgeCases(t, &d, lo, hi) {
			t.Run(d.Name+"="+c.value, func(t *testing.T) {
				res := f.m.IncrementalAlterConfigs(context.Background(), []AlterResource{groupRes("g", set(d.Name, c.value))}, true)[0]
				if c.ok {
					if res.ErrorCode != kafkaerr.None {
						t.Fatalf("refused: %s %s", res.ErrorCode, res.ErrorMessage)
					}
					return
				}
				if res.ErrorCode != kafkaerr.InvalidConfig {
					t.Fatalf("got %s %q, want INVALID_CONFIG", res.ErrorCode, res.ErrorMessage)
				}
				for _, s := range c.mustIn {
					if !strings.Contains(res.ErrorMessage, s) {
						t.Fatalf("message %q lacks %q", res.ErrorMessage, s)
					}
				}
			})
		}
	}
	if gen := readStore(t, f.dir).Generation; gen != 1 {
		t.Fatalf("validate_only wrote the store: generation %d", gen)
	}
}

func TestParseISODuration(t *testing.T) {
	for _, tc := range []struct {
		in       string
		ok, neg  bool
		describe string
	}{
		{"PT0S", true, false, "zero"},
		{"PT1H", true, false, "hours"},
		{"pt1h", true, false, "lower case"},
		{"P2D", true, false, "days only"},
		{"P1DT1H1M1.123456789S", true, false, "everything"},
		{"PT1,5S", true, false, "comma fraction"},
		{"-PT1H", true, true, "negative sign"},
		{"-PT-1H", true, false, "double negative"},
		{"PT1H-3600S", true, false, "sums to zero"},
		{"PT1H-3601S", true, true, "sums below zero"},
		{"PT-0.5S", true, true, "negative fraction"},
		{"+PT5M", true, false, "plus sign"},
		{"P", false, false, "nothing"},
		{"PT", false, false, "empty time part"},
		{"P1W", false, false, "weeks are not Duration"},
		{"PT1.1234567890S", false, false, "ten fraction digits"},
		{"P106751991167301D", false, false, "overflow"},
		{"1H", false, false, "no P"},
	} {
		t.Run(tc.describe, func(t *testing.T) {
			neg, err := parseISODuration(tc.in)
			if (err == nil) != tc.ok || (tc.ok && neg != tc.neg) {
				t.Fatalf("parseISODuration(%q) = %v, %v; want ok=%v negative=%v", tc.in, neg, err, tc.ok, tc.neg)
			}
		})
	}
}

// TestDeadLetterTopicNameHugeValue: a 1 MiB DLQ topic name is refused with a message that says what
// a topic name may be and repeats only the start of the value, and nothing is stored.
func TestDeadLetterTopicNameHugeValue(t *testing.T) {
	f := openFixture(t, t.TempDir(), staticOf(t))
	huge := strings.Repeat("x", 1<<20)
	res := f.m.IncrementalAlterConfigs(context.Background(), []AlterResource{groupRes("g", set(keyDeadLetterTopicName, huge))}, false)[0]
	if res.ErrorCode != kafkaerr.InvalidConfig {
		t.Fatalf("got %s %q, want INVALID_CONFIG", res.ErrorCode, res.ErrorMessage)
	}
	for _, want := range []string{keyDeadLetterTopicName, "1048576 characters long", "at most 249 characters", "(1048576 bytes)"} {
		if !strings.Contains(res.ErrorMessage, want) {
			t.Fatalf("message lacks %q: %.400s", want, res.ErrorMessage)
		}
	}
	if len(res.ErrorMessage) > 1024 {
		t.Fatalf("message is %d bytes long: it repeats the whole value", len(res.ErrorMessage))
	}
	if got := f.m.groupText("g", keyDeadLetterTopicName); got != "" {
		t.Fatalf("stored %.40q...", got)
	}
}
