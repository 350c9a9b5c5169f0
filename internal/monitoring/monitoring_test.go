package monitoring

import (
	"slices"
	"strings"
	"testing"
)

func TestDashboardQueriesListsRowsPanelsAndRejectsAnEmptyOne(t *testing.T) {
	dash := `{"panels": [
		{"type": "stat", "title": "a", "targets": [{"refId": "A", "expr": "up"}]},
		{"type": "row", "title": "r", "panels": [
			{"type": "timeseries", "title": "b", "targets": [{"refId": "A", "expr": "x"}, {"refId": "B", "expr": "y"}]}]}]}`
	got, err := DashboardQueries([]byte(dash))
	if err != nil {
		t.Fatal(err)
	}
	want := []Query{{"a", "A", "up"}, {"b", "A", "x"}, {"b", "B", "y"}}
	if !slices.Equal(got, want) {
		t.Errorf("queries %v, want %v", got, want)
	}
	for _, bad := range []string{
		`{"panels": [{"type": "stat", "title": "a", "targets": []}]}`,
		`{"panels": [{"type": "stat", "title": "a", "targets": [{"refId": "A", "expr": " "}]}]}`,
		`{"panels": []}`,
		`not json`,
	} {
		if _, err := DashboardQueries([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestExpandReplacesGrafanaVariablesAndRefusesAnUnknownOne(t *testing.T) {
	got, err := Expand(`rate(x{cluster=~"$cluster"}[$__rate_interval]) + ${cluster}`, map[string]string{"cluster": ".*", "__rate_interval": "1m"})
	if err != nil || got != `rate(x{cluster=~".*"}[1m]) + .*` {
		t.Errorf("Expand = %q, %v", got, err)
	}
	if _, err := Expand(`x{a="$nope"}`, map[string]string{}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("an unknown variable: %v", err)
	}
}

func TestRulesOfReadsAPrometheusRuleAndKeepsOnlyTheNamedAnnotations(t *testing.T) {
	obj := `apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: x}
spec:
  groups:
  - name: g
    rules:
    - record: r
      expr: up
    - alert: A
      expr: up == 0
      annotations: {summary: s, runbook: long}
`
	f, err := RulesOf([]byte(obj))
	if err != nil {
		t.Fatal(err)
	}
	if a := f.Alerts(); !slices.Equal(a, []string{"A"}) {
		t.Errorf("alerts %v", a)
	}
	kept := f.KeepAnnotations("summary").Groups[0].Rules[1].Annotations
	if len(kept) != 1 || kept["summary"] != "s" {
		t.Errorf("kept annotations %v", kept)
	}
	if f.Groups[0].Rules[1].Annotations["runbook"] != "long" {
		t.Error("KeepAnnotations changed the original")
	}
	for _, bad := range []string{strings.Replace(obj, "PrometheusRule", "ConfigMap", 1), strings.Replace(obj, "expr: up\n", "exp: up\n", 1), "kind: PrometheusRule\nspec: {groups: []}\n"} {
		if _, err := RulesOf([]byte(bad)); err == nil {
			t.Errorf("no error for\n%s", bad)
		}
	}
}

func TestCompareNamesUndocumentedAndUnregisteredSeries(t *testing.T) {
	md := "## Broker series (`paddock broker`)\n\n| series | type |\n|---|---|\n| `a_total` | counter | x |\n| `go_*` | | |\n| `gone` | gauge | |\n\n## Other\n\n| `b` | gauge | |\n"
	doc, err := DocumentedSeries([]byte(md))
	if err != nil {
		t.Fatal(err)
	}
	undoc, unreg := Compare("broker", []string{"a_total", "go_goroutines", "new_one"}, doc)
	if !slices.Equal(undoc, []string{"new_one"}) || !slices.Equal(unreg, []string{"gone"}) {
		t.Errorf("undocumented %v, unregistered %v", undoc, unreg)
	}
}
