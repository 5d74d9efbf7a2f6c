package promspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Dashboard is the part of a Grafana dashboard JSON model that the checks read.
type Dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is one dashboard panel. A row panel holds no queries itself; a collapsed row keeps its
// panels in Panels.
type Panel struct {
	ID      int      `json:"id"`
	Title   string   `json:"title"`
	Type    string   `json:"type"`
	Targets []Target `json:"targets"`
	Panels  []Panel  `json:"panels"`
}

// Target is one query of a panel.
type Target struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
	Hide  bool   `json:"hide"`
}

// Variable is one template variable. For a "query" variable, Query is either the query text or
// an object with a "query" field, depending on the Grafana version that saved the dashboard.
type Variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Definition string          `json:"definition"`
	Query      json.RawMessage `json:"query"`
}

// Query is one PromQL expression of a dashboard, with where it comes from.
type Query struct {
	// Source names the panel and ref id, or the variable, e.g. `panel 5 "Write latency" A`.
	Source string
	// Expr is the expression as written, Grafana variables included.
	Expr string
}

// LoadDashboard reads a Grafana dashboard JSON file.
func LoadDashboard(path string) (Dashboard, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Dashboard{}, fmt.Errorf("read dashboard: %w", err)
	}
	var d Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return Dashboard{}, fmt.Errorf("decode dashboard %s: %w", path, err)
	}
	return d, nil
}

// AllPanels returns every panel, rows and the panels inside collapsed rows included, in order.
func (d Dashboard) AllPanels() []Panel {
	var all []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return all
}

// Queries returns the expression of every visible panel target and of every query variable
// (for `label_values(selector, label)` the selector, for `query_result(expr)` the expression).
// A query variable of another form is an error, since it cannot be checked.
func (d Dashboard) Queries() ([]Query, error) {
	var qs []Query
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			if t.Hide {
				continue
			}
			qs = append(qs, Query{Source: fmt.Sprintf("panel %d %q %s", p.ID, p.Title, t.RefID), Expr: t.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		expr, err := v.Expr()
		if err != nil {
			return nil, err
		}
		if expr != "" {
			qs = append(qs, Query{Source: "variable " + v.Name, Expr: expr})
		}
	}
	return qs, nil
}

var (
	labelValuesCall = regexp.MustCompile(`^label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$`)
	labelOnlyCall   = regexp.MustCompile(`^label_values\(\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$`)
	queryResultCall = regexp.MustCompile(`^query_result\((.*)\)$`)
)

// Expr returns the PromQL that the query variable v runs: the selector of
// `label_values(selector, label)` or the expression of `query_result(expr)`, and "" for
// `label_values(label)`, which names no metric.
func (v Variable) Expr() (string, error) {
	text, err := v.queryText()
	if err != nil {
		return "", err
	}
	text = strings.TrimSpace(text)
	switch {
	case labelOnlyCall.MatchString(text):
		return "", nil
	case labelValuesCall.MatchString(text):
		return strings.TrimSpace(labelValuesCall.FindStringSubmatch(text)[1]), nil
	case queryResultCall.MatchString(text):
		return strings.TrimSpace(queryResultCall.FindStringSubmatch(text)[1]), nil
	default:
		return "", fmt.Errorf("variable %s: unsupported query %q (want label_values(...) or query_result(...))", v.Name, text)
	}
}

func (v Variable) queryText() (string, error) {
	if len(v.Query) == 0 {
		return v.Definition, nil
	}
	var text string
	if err := json.Unmarshal(v.Query, &text); err == nil {
		return text, nil
	}
	var obj struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(v.Query, &obj); err != nil {
		return "", fmt.Errorf("variable %s: query is neither text nor an object with a query: %w", v.Name, err)
	}
	if obj.Query == "" {
		return "", errors.New("variable " + v.Name + ": empty query")
	}
	return obj.Query, nil
}
