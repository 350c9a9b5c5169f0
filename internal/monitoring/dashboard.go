package monitoring

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Query is one PromQL query of a dashboard panel.
type Query struct {
	Panel string // the panel's title
	RefID string // the target's refId (A, B, ...)
	Expr  string
}

type grafanaPanel struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's panels
}

// DashboardQueries lists every query of a Grafana dashboard's panels (rows' nested panels
// included), in panel order. A panel without a query, or a query without an expression, is an
// error: the dashboard would show an empty panel.
func DashboardQueries(dashboard []byte) ([]Query, error) {
	var d struct {
		Panels []grafanaPanel `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, fmt.Errorf("read dashboard: %w", err)
	}
	var out []Query
	var walk func([]grafanaPanel) error
	walk = func(panels []grafanaPanel) error {
		for _, p := range panels {
			if p.Type == "row" {
				if err := walk(p.Panels); err != nil {
					return err
				}
				continue
			}
			if len(p.Targets) == 0 {
				return fmt.Errorf("dashboard panel %q has no query", p.Title)
			}
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					return fmt.Errorf("dashboard panel %q, query %s, has no expression", p.Title, t.RefID)
				}
				out = append(out, Query{Panel: p.Title, RefID: t.RefID, Expr: t.Expr})
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("read dashboard: no panels")
	}
	return out, nil
}

// dashboardVariable is a Grafana variable reference: $name or ${name}.
var dashboardVariable = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// Expand replaces the dashboard variables in expr ($name, ${name}) by their values, as
// Grafana does before it sends the query; a variable vars does not name is an error.
func Expand(expr string, vars map[string]string) (string, error) {
	var missing []string
	out := dashboardVariable.ReplaceAllStringFunc(expr, func(ref string) string {
		name := dashboardVariable.FindStringSubmatch(ref)[1]
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("query %q uses variables with no value: %s", expr, strings.Join(missing, ", "))
	}
	return out, nil
}
