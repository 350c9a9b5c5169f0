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

// Panel is one panel of a Grafana dashboard: a row's heading (Type "row", no targets) or a
// panel that draws its targets' queries.
type Panel struct {
	Type    string // "row", "stat", "timeseries", ...
	Title   string
	GridPos GridPos
	Unit    string // fieldConfig.defaults.unit: Grafana's unit name ("s", "bytes", "Bps", ...), "" for a plain number
	Targets []Target
}

// GridPos is where a panel sits on Grafana's grid: 24 columns wide, y counted in rows of
// grid units from the top.
type GridPos struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

// Target is one query of a panel.
type Target struct {
	RefID        string `json:"refId"`
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"` // {{label}} placeholders; "" lets Grafana name the series
}

type grafanaPanel struct {
	Type        string   `json:"type"`
	Title       string   `json:"title"`
	GridPos     GridPos  `json:"gridPos"`
	Targets     []Target `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's panels
}

// DashboardPanels lists a Grafana dashboard's panels in order, each row's heading followed by
// a collapsed row's own panels. A panel other than a row without a query, or a query without
// an expression, is an error: the dashboard would show an empty panel.
func DashboardPanels(dashboard []byte) ([]Panel, error) {
	var d struct {
		Panels []grafanaPanel `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, fmt.Errorf("read dashboard: %w", err)
	}
	var out []Panel
	var walk func([]grafanaPanel) error
	walk = func(panels []grafanaPanel) error {
		for _, p := range panels {
			out = append(out, Panel{Type: p.Type, Title: p.Title, GridPos: p.GridPos, Unit: p.FieldConfig.Defaults.Unit, Targets: p.Targets})
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
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	return out, nil
}

// DashboardQueries lists every query of a Grafana dashboard's panels (rows' nested panels
// included), in panel order, with DashboardPanels' checks; a dashboard without a query is an
// error too.
func DashboardQueries(dashboard []byte) ([]Query, error) {
	panels, err := DashboardPanels(dashboard)
	if err != nil {
		return nil, err
	}
	var out []Query
	for _, p := range panels {
		for _, t := range p.Targets {
			out = append(out, Query{Panel: p.Title, RefID: t.RefID, Expr: t.Expr})
		}
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
