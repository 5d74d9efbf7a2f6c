package groupcfg

import (
	"math"
	"strings"
)

// markdownTable renders the config table of the README from Definitions(): one row per key, in
// table order (share.coordinator.* and group.share.* broker keys, coordinatord server keys, then
// the per-group keys). The README holds exactly this text between the markers
// <!-- config-table:begin --> and <!-- config-table:end --> (a test checks it).
func markdownTable() string {
	var b strings.Builder
	b.WriteString("Scope: **broker** keys are Kafka's share-coordinator and share-group broker configs, **server** keys are " +
		"coordinatord's own server settings (no Kafka counterpart); both are set with `--override KEY=VALUE`, the " +
		"environment (`COORDINATORD_` + the key upper-cased, dots as underscores) or the `--config` properties file, in " +
		"that order of precedence. **group** keys are set per share group with IncrementalAlterConfigs on a GROUP " +
		"resource; an unset one inherits the broker key named in Default.\n\n")
	b.WriteString("| Key | Scope | Type | Default | Valid values | Importance | Dynamic | Description |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, d := range Definitions() {
		cells := []string{
			"`" + d.Name + "`",
			scopeCell(&d),
			d.Type.String(),
			defaultCell(&d),
			validCell(&d),
			d.Importance.String(),
			dynamicCell(&d),
			descriptionCell(&d),
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return b.String()
}

func scopeCell(d *Definition) string {
	switch {
	case d.Scope == ScopeGroup:
		return "group"
	case d.Server:
		return "server"
	}
	return "broker"
}

func defaultCell(d *Definition) string {
	switch {
	case d.Synonym != "":
		return "inherits `" + d.Synonym + "`"
	case d.hidden():
		return "(hidden)"
	case d.Default == "":
		return "(empty)"
	}
	return "`" + d.Default + "`"
}

func validCell(d *Definition) string {
	switch {
	case d.Type == TypeBoolean:
		return "`true`, `false`"
	case isNumeric(d.Type):
		lo, hi := staticRange(d)
		loText, hiText := fmtInt(lo), fmtInt(hi)
		if r, ok := d.Validator.(Range); !ok || r.Max == math.MaxInt64 || (d.Type == TypeInt && hi == math.MaxInt32) {
			hiText = "..."
		}
		if d.MinKey != "" {
			loText = "`" + d.MinKey + "`"
		}
		if d.MaxKey != "" {
			hiText = "`" + d.MaxKey + "`"
		}
		return "[" + loText + ", " + hiText + "]"
	case d.Validator != nil:
		if o, ok := d.Validator.(OneOf); ok {
			return "`" + strings.Join(o, "`, `") + "`"
		}
		return escapeCell(d.Validator.String())
	}
	return "any"
}

func dynamicCell(d *Definition) string {
	switch {
	case d.Scope == ScopeGroup:
		return "per group"
	case d.Dynamic:
		return "yes"
	}
	return "no"
}

func descriptionCell(d *Definition) string {
	doc := d.Doc
	if d.Internal {
		doc += " (Internal: not listed by DescribeConfigs unless asked for by name.)"
	}
	return escapeCell(doc)
}

// escapeCell keeps text inside one Markdown table cell and out of HTML.
func escapeCell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "__", `\_\_`, "\n", " ").Replace(s)
}
