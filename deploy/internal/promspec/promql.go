package promspec

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// grafanaVariable matches $name, ${name} and ${name:format}; a name starts with a letter or _,
// so a regular expression's $ anchor or a label_replace $1 is left alone.
var grafanaVariable = regexp.MustCompile(`\$(?:\{([a-zA-Z_][a-zA-Z0-9_]*)(?::[^}]*)?\}|([a-zA-Z_][a-zA-Z0-9_]*))`)

// Expand replaces the Grafana variables of a dashboard expression so that Prometheus can run it:
// $__rate_interval, $__interval and $__range become interval (a PromQL duration such as "1m");
// every other variable becomes ".*", which selects every value because the dashboard uses its
// variables only in regular-expression matchers (=~).
func Expand(expr, interval string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(m string) string {
		sub := grafanaVariable.FindStringSubmatch(m)
		name := sub[1] + sub[2]
		switch name {
		case "__rate_interval", "__interval", "__range":
			return interval
		default:
			return ".*"
		}
	})
}

// Selector is one vector selector of an expression.
type Selector struct {
	// Metric is the metric name the selector names.
	Metric string
	// Matchers are all its label matchers, the metric name's included.
	Matchers []*labels.Matcher
}

// String returns the selector in PromQL syntax, e.g. {__name__="up",job="x"}, as the series API
// accepts it.
func (s Selector) String() string {
	parts := make([]string, len(s.Matchers))
	for i, m := range s.Matchers {
		parts[i] = m.String()
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Selectors parses expr as PromQL and returns its vector selectors in order. A selector without
// an exact metric name is an error: every query must say which metric it reads.
func Selectors(expr string) ([]Selector, error) {
	ast, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", expr, err)
	}
	var out []Selector
	for _, ms := range parser.ExtractSelectors(ast) {
		s := Selector{Matchers: ms}
		for _, m := range ms {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				s.Metric = m.Value
			}
		}
		if s.Metric == "" {
			return nil, fmt.Errorf("selector %s in %q names no metric", s, expr)
		}
		out = append(out, s)
	}
	return out, nil
}
