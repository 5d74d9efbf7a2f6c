package groupcfg

import "github.com/coordinatord/coordinatord/internal/kafkaerr"

// DescribeResource asks for the configs of one resource.
type DescribeResource struct {
	Type ResourceType
	Name string   // group id; for BROKER "" or this node's id
	Keys []string // empty: every key of the resource except internal ones; unknown names are skipped (as in Kafka)
}

// DescribeResult is one resource's configs.
type DescribeResult struct {
	Type         ResourceType
	Name         string
	ErrorCode    kafkaerr.Code
	ErrorMessage string
	Configs      []DescribedConfig
}

// DescribedConfig is one key of a described resource.
type DescribedConfig struct {
	Name string
	// Value is the value set for the resource (a group's stored override, as stored) or, when
	// the resource does not set it, the value it inherits. "" for sensitive keys.
	Value string
	// EffectiveValue is what is used: Value clamped to the broker bounds in force. It differs
	// from Value only when clamped.
	EffectiveValue string
	ReadOnly       bool // the key cannot be altered on this resource
	Source         ConfigSource
	Sensitive      bool
	Synonyms       []Synonym // with includeSynonyms: the layers Value comes from, most precedent first
	Type           Type
	Documentation  string // with includeDocumentation
}

// Synonym is one layer a described value could come from.
type Synonym struct {
	Name   string
	Value  string // "" for sensitive keys
	Source ConfigSource
}

// DescribeConfigs describes GROUP resources (any group id; a group without overrides shows the
// values it inherits) and the BROKER resource of this node. Results are in request order.
//
// For a group key set on the group, Value is the stored override, EffectiveValue the value in
// use and Source GROUP_CONFIG; for an unset group key both are the inherited value (its broker
// synonym's value in force, or the built-in default) and Source is where that value comes from
// (the broker synonym's source, or DEFAULT_CONFIG), as in Kafka. Synonyms list
// the GROUP_CONFIG entry if set, then the broker synonym's layers (DYNAMIC_BROKER_CONFIG,
// STATIC_BROKER_CONFIG, DEFAULT_CONFIG, those that exist, the one in force first), or, for a
// key without synonym, its DEFAULT_CONFIG entry. For broker keys, Source is where the value in
// force comes from and Synonyms are its layers.
func (m *Manager) DescribeConfigs(resources []DescribeResource, includeSynonyms, includeDocumentation bool) []DescribeResult {
	v := m.view.Load()
	out := make([]DescribeResult, len(resources))
	for i, r := range resources {
		res := DescribeResult{Type: r.Type, Name: r.Name}
		switch r.Type {
		case ResourceGroup:
			_, stored := v.groups.Get(r.Name)
			if err := checkGroupName(r.Name, stored); err != nil {
				res.ErrorCode, res.ErrorMessage = err.code, err.msg
				break
			}
			g := v.values(r.Name)
			for _, p := range m.selectKeys(m.sch.group, r.Keys) {
				res.Configs = append(res.Configs, m.describeGroupKey(v, g, m.sch.groupPos[m.sch.defs[p].Name], includeSynonyms, includeDocumentation))
			}
		case ResourceBroker:
			if err := m.checkNode(r.Name); err != nil {
				res.ErrorCode, res.ErrorMessage = err.code, err.msg
				break
			}
			for _, p := range m.selectKeys(m.sch.broker, r.Keys) {
				res.Configs = append(res.Configs, m.describeBrokerKey(v.broker, p, includeSynonyms, includeDocumentation))
			}
		default:
			err := unsupportedResource(r.Type)
			res.ErrorCode, res.ErrorMessage = err.code, err.msg
		}
		out[i] = res
	}
	return out
}

// selectKeys returns the table positions (among scope) of the requested keys, in request order
// without repeats, or of every non-internal key when none is requested.
func (m *Manager) selectKeys(scope []int, requested []string) []int {
	var out []int
	if len(requested) == 0 {
		for _, i := range scope {
			if !m.sch.defs[i].Internal {
				out = append(out, i)
			}
		}
		return out
	}
	inScope := make(map[int]bool, len(scope))
	for _, i := range scope {
		inScope[i] = true
	}
	seen := map[int]bool{}
	for _, name := range requested {
		if i, ok := m.sch.index[name]; ok && inScope[i] && !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	return out
}

func masked(d *Definition, text string) string {
	if d.hidden() {
		return ""
	}
	return text
}

func (m *Manager) describeBrokerKey(b *brokerState, i int, synonyms, docs bool) DescribedConfig {
	d := &m.sch.defs[i]
	c := DescribedConfig{
		Name: d.Name, Value: masked(d, b.vals[i].text), EffectiveValue: masked(d, b.vals[i].text),
		ReadOnly: !d.Dynamic, Source: b.source[i], Sensitive: d.hidden(), Type: d.Type,
	}
	if synonyms {
		c.Synonyms = m.brokerLayers(b, i)
	}
	if docs {
		c.Documentation = d.Doc
	}
	return c
}

// brokerLayers lists the layers of broker key i: dynamic, static and default, those that exist.
func (m *Manager) brokerLayers(b *brokerState, i int) []Synonym {
	d := &m.sch.defs[i]
	var out []Synonym
	if b.source[i] == SourceDynamicBrokerConfig {
		out = append(out, Synonym{Name: d.Name, Value: masked(d, b.vals[i].text), Source: SourceDynamicBrokerConfig})
	}
	if st := m.static.state; st.source[i] == SourceStaticBrokerConfig {
		out = append(out, Synonym{Name: d.Name, Value: masked(d, st.vals[i].text), Source: SourceStaticBrokerConfig})
	}
	return append(out, Synonym{Name: d.Name, Value: masked(d, d.Default), Source: SourceDefaultConfig})
}

func (m *Manager) describeGroupKey(v *view, g *groupValues, p int, synonyms, docs bool) DescribedConfig {
	d := m.groupDef(p)
	c := DescribedConfig{
		Name: d.Name, Value: masked(d, g.vals[p].text), EffectiveValue: masked(d, g.vals[p].text),
		Source: SourceDefaultConfig, Sensitive: d.hidden(), Type: d.Type,
	}
	stored, set := g.stored[d.Name]
	switch {
	case set:
		c.Value, c.Source = masked(d, stored), SourceGroupConfig
	case d.Synonym != "":
		// As in Kafka (ConfigHelper.createGroupConfigEntry): the source of the first synonym,
		// where the inherited value comes from.
		c.Source = v.broker.source[m.sch.index[d.Synonym]]
	}
	if synonyms {
		if set {
			c.Synonyms = append(c.Synonyms, Synonym{Name: d.Name, Value: masked(d, stored), Source: SourceGroupConfig})
		}
		if d.Synonym != "" {
			c.Synonyms = append(c.Synonyms, m.brokerLayers(v.broker, m.sch.index[d.Synonym])...)
		} else {
			c.Synonyms = append(c.Synonyms, Synonym{Name: d.Name, Value: masked(d, d.Default), Source: SourceDefaultConfig})
		}
	}
	if docs {
		c.Documentation = d.Doc
	}
	return c
}
