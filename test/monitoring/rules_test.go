package monitoring

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestAlertRulesPassPromtoolUnitTests runs config/monitoring/tests/alerts.yaml with `promtool
// test rules` on the kit's rules: each alert fires in its scenario with the labels and the
// summary its runbook needs, and resolves after. The rule file given to promtool keeps only
// the summary annotation (promtool compares annotations whole); the others are checked by
// TestAlertRulesPassPromtoolCheck.
func TestAlertRulesPassPromtoolUnitTests(t *testing.T) {
	dir := t.TempDir()
	writeRules(t, dir, "rules.yaml", kitRules(t).KeepAnnotations("summary"))
	tests, err := os.ReadFile(filepath.Join(kit, "tests", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log(promtool(t, dir, nil, "test", "rules", "alerts.yaml"))
}

// unitTests is the part of a promtool unit-test file the coverage rule reads.
type unitTests struct {
	Tests []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			EvalTime  string `json:"eval_time"`
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestEveryAlertHasAFiringAndAResolvingUnitTest: each alert of the kit has a unit test that
// expects it to fire and, later in the same test, to be resolved; a test naming an alert the
// rules do not have fails (promtool would pass it: a missing alert is never firing).
func TestEveryAlertHasAFiringAndAResolvingUnitTest(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(kit, "tests", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ut unitTests
	if err := yaml.Unmarshal(b, &ut); err != nil {
		t.Fatal(err)
	}
	alerts := kitRules(t).Alerts()
	fires, resolves := map[string]bool{}, map[string]bool{}
	for _, test := range ut.Tests {
		firedAt := map[string]time.Duration{}
		for _, a := range test.AlertRuleTest {
			if !slices.Contains(alerts, a.Alertname) {
				t.Errorf("test %q checks alert %q, which the rules do not have", test.Name, a.Alertname)
			}
			at, err := time.ParseDuration(a.EvalTime)
			if err != nil {
				t.Fatalf("test %q: eval_time %q: %v", test.Name, a.EvalTime, err)
			}
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
				if _, ok := firedAt[a.Alertname]; !ok {
					firedAt[a.Alertname] = at
				}
			} else if f, ok := firedAt[a.Alertname]; ok && at > f {
				resolves[a.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !fires[a] {
			t.Errorf("no unit test expects %s to fire", a)
		}
		if !resolves[a] {
			t.Errorf("no unit test expects %s to resolve after it fired", a)
		}
	}
}

// TestAlertRulesPassPromtoolCheck: `promtool check rules` accepts the kit's rules as
// written (expressions, durations, every annotation's template), and every alert carries
// what a page needs: a severity of critical or warning, a summary, a description and a
// runbook.
func TestAlertRulesPassPromtoolCheck(t *testing.T) {
	rules := kitRules(t)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s has no %s annotation", r.Alert, a)
				}
			}
		}
	}
	dir := t.TempDir()
	writeRules(t, dir, "rules.yaml", rules)
	t.Log(promtool(t, dir, nil, "check", "rules", "rules.yaml"))
}
