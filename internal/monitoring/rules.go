package monitoring

import (
	"fmt"

	"sigs.k8s.io/yaml"
)

// Rule is one alerting or recording rule of a Prometheus rule group.
type Rule struct {
	Record      string            `json:"record,omitempty"`
	Alert       string            `json:"alert,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// RuleGroup is one group of a rule file.
type RuleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []Rule `json:"rules"`
}

// RuleFile is what Prometheus's rule_files (and promtool) read.
type RuleFile struct {
	Groups []RuleGroup `json:"groups"`
}

// RulesOf reads a PrometheusRule object (the Prometheus Operator's kind): its spec is a rule
// file, which the operator hands to Prometheus as is.
func RulesOf(prometheusRule []byte) (RuleFile, error) {
	var obj struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       RuleFile       `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(prometheusRule, &obj); err != nil {
		return RuleFile{}, fmt.Errorf("read PrometheusRule: %w", err)
	}
	if obj.Kind != "PrometheusRule" {
		return RuleFile{}, fmt.Errorf("read PrometheusRule: kind is %q", obj.Kind)
	}
	if len(obj.Spec.Groups) == 0 {
		return RuleFile{}, fmt.Errorf("read PrometheusRule: no rule groups")
	}
	return obj.Spec, nil
}

// Alerts are the names of f's alerting rules, in file order.
func (f RuleFile) Alerts() []string {
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r.Alert)
			}
		}
	}
	return out
}

// KeepAnnotations is f with every alert's annotations cut to those named (promtool's unit
// tests compare an alert's annotations whole, so a test file states only the ones it pins).
func (f RuleFile) KeepAnnotations(names ...string) RuleFile {
	out := RuleFile{}
	for _, g := range f.Groups {
		ng := RuleGroup{Name: g.Name}
		for _, r := range g.Rules {
			if r.Annotations != nil {
				kept := map[string]string{}
				for _, n := range names {
					if v, ok := r.Annotations[n]; ok {
						kept[n] = v
					}
				}
				r.Annotations = kept
			}
			ng.Rules = append(ng.Rules, r)
		}
		out.Groups = append(out.Groups, ng)
	}
	return out
}

// YAML is f as a rule file.
func (f RuleFile) YAML() ([]byte, error) { return yaml.Marshal(f) }
