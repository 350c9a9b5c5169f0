package monitoring

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The monitoring kit's PodMonitors as Prometheus scrape jobs, and its rules on a faster
// clock: what paddock dev's Prometheus runs (docs/devcluster.md, "Prometheus").

// DefaultScrapeInterval is the Prometheus Operator's interval for an endpoint that sets none.
const DefaultScrapeInterval = 30 * time.Second

// PodMonitorOf decodes a monitoring.coreos.com/v1 PodMonitor (JSON or YAML) strictly.
func PodMonitorOf(b []byte) (PodMonitor, error) {
	var pm PodMonitor
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	if err := d.Decode(&pm); err != nil {
		return pm, fmt.Errorf("read PodMonitor: %w (paddock dev translates only the fields PodMonitor declares)", err)
	}
	if pm.Kind != "PodMonitor" {
		return pm, fmt.Errorf("read PodMonitor: kind is %q", pm.Kind)
	}
	return pm, nil
}

// PodMonitor is the part of a monitoring.coreos.com/v1 PodMonitor paddock dev translates. It
// is decoded strictly: a field the kit starts using that ScrapeConfigs does not know is an
// error at start, never a scrape job that silently differs from the Prometheus Operator's.
type PodMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec struct {
		NamespaceSelector struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector"`
		Selector            metav1.LabelSelector `json:"selector"`
		PodMetricsEndpoints []struct {
			Port        string       `json:"port"`
			Path        string       `json:"path,omitempty"`
			Interval    string       `json:"interval,omitempty"`
			HonorLabels bool         `json:"honorLabels,omitempty"`
			Relabelings []relabeling `json:"relabelings,omitempty"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// relabeling is a Prometheus Operator RelabelConfig (camelCase) and, marshalled through
// promRelabel, a Prometheus relabel_config (snake_case).
type relabeling struct {
	Action       string   `json:"action,omitempty"`
	SourceLabels []string `json:"sourceLabels,omitempty"`
	Separator    *string  `json:"separator,omitempty"`
	TargetLabel  string   `json:"targetLabel,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
}

type promRelabel struct {
	Action       string   `json:"action,omitempty"`
	SourceLabels []string `json:"source_labels,omitempty"`
	Separator    *string  `json:"separator,omitempty"`
	TargetLabel  string   `json:"target_label,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
}

// promLabelName is a Kubernetes label key as Prometheus's kubernetes discovery names it in
// __meta_kubernetes_pod_label_<name>: every character outside [a-zA-Z0-9_] becomes "_".
func promLabelName(key string) string { return notLabelChar.ReplaceAllString(key, "_") }

var notLabelChar = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// ScrapeConfigs is the scrape jobs the Prometheus Operator generates for pm, one
// per endpoint (its generatePodMonitorConfig, for the fields podMonitor has): pod discovery
// in the selected namespaces; terminated pods dropped; a keep rule per label selector term
// and one for the port name; the namespace, container, pod, job (<namespace>/<name>) and
// endpoint labels; then the monitor's own relabelings. speedup divides the interval (a test
// environment's accelerated clock, Speedup). kubeconfig is the discovery's
// credentials.
func ScrapeConfigs(pm PodMonitor, kubeconfig string, speedup int) ([]map[string]any, error) {
	sel := pm.Spec.Selector
	var keep []promRelabel
	for _, k := range slices.Sorted(maps.Keys(sel.MatchLabels)) {
		l := promLabelName(k)
		keep = append(keep, promRelabel{Action: "keep",
			SourceLabels: []string{"__meta_kubernetes_pod_label_" + l, "__meta_kubernetes_pod_labelpresent_" + l},
			Regex:        "(" + regexp.QuoteMeta(sel.MatchLabels[k]) + ");true"})
	}
	for _, e := range sel.MatchExpressions {
		l := promLabelName(e.Key)
		switch e.Operator {
		case metav1.LabelSelectorOpExists:
			keep = append(keep, promRelabel{Action: "keep", SourceLabels: []string{"__meta_kubernetes_pod_labelpresent_" + l}, Regex: "true"})
		case metav1.LabelSelectorOpDoesNotExist:
			keep = append(keep, promRelabel{Action: "drop", SourceLabels: []string{"__meta_kubernetes_pod_labelpresent_" + l}, Regex: "true"})
		case metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn:
			action := map[metav1.LabelSelectorOperator]string{metav1.LabelSelectorOpIn: "keep", metav1.LabelSelectorOpNotIn: "drop"}[e.Operator]
			quoted := make([]string, len(e.Values))
			for i, v := range e.Values {
				quoted[i] = regexp.QuoteMeta(v)
			}
			keep = append(keep, promRelabel{Action: action,
				SourceLabels: []string{"__meta_kubernetes_pod_label_" + l, "__meta_kubernetes_pod_labelpresent_" + l},
				Regex:        "(" + strings.Join(quoted, "|") + ");true"})
		default:
			return nil, fmt.Errorf("PodMonitor %s: selector operator %q", pm.Metadata.Name, e.Operator)
		}
	}
	sd := map[string]any{"role": "pod", "kubeconfig_file": kubeconfig}
	if !pm.Spec.NamespaceSelector.Any {
		names := pm.Spec.NamespaceSelector.MatchNames
		if len(names) == 0 {
			names = []string{pm.Metadata.Namespace} // the monitor's own namespace, as the operator does
		}
		sd["namespaces"] = map[string]any{"names": names}
	}
	var out []map[string]any
	for i, ep := range pm.Spec.PodMetricsEndpoints {
		if ep.Port == "" {
			return nil, fmt.Errorf("PodMonitor %s: endpoint %d has no port name", pm.Metadata.Name, i)
		}
		interval := DefaultScrapeInterval
		if ep.Interval != "" {
			d, err := model.ParseDuration(ep.Interval)
			if err != nil {
				return nil, fmt.Errorf("PodMonitor %s: interval: %w", pm.Metadata.Name, err)
			}
			interval = time.Duration(d)
		}
		path := ep.Path
		if path == "" {
			path = "/metrics"
		}
		relabel := []promRelabel{
			{SourceLabels: []string{"job"}, TargetLabel: "__tmp_prometheus_job_name"},
			{Action: "drop", SourceLabels: []string{"__meta_kubernetes_pod_phase"}, Regex: "(Failed|Succeeded)"},
		}
		relabel = append(relabel, keep...)
		relabel = append(relabel,
			promRelabel{Action: "keep", SourceLabels: []string{"__meta_kubernetes_pod_container_port_name"}, Regex: regexp.QuoteMeta(ep.Port)},
			promRelabel{SourceLabels: []string{"__meta_kubernetes_namespace"}, TargetLabel: "namespace"},
			promRelabel{SourceLabels: []string{"__meta_kubernetes_pod_container_name"}, TargetLabel: "container"},
			promRelabel{SourceLabels: []string{"__meta_kubernetes_pod_name"}, TargetLabel: "pod"},
			promRelabel{TargetLabel: "job", Replacement: ptr.To(pm.Metadata.Namespace + "/" + pm.Metadata.Name)},
			promRelabel{TargetLabel: "endpoint", Replacement: ptr.To(ep.Port)},
		)
		for _, r := range ep.Relabelings {
			relabel = append(relabel, promRelabel{Action: strings.ToLower(r.Action), SourceLabels: r.SourceLabels,
				Separator: r.Separator, TargetLabel: r.TargetLabel, Regex: r.Regex, Replacement: r.Replacement})
		}
		out = append(out, map[string]any{
			"job_name":              fmt.Sprintf("podMonitor/%s/%s/%d", pm.Metadata.Namespace, pm.Metadata.Name, i),
			"honor_labels":          ep.HonorLabels,
			"scrape_interval":       model.Duration(Scaled(interval, speedup)).String(),
			"metrics_path":          path,
			"kubernetes_sd_configs": []any{sd},
			"relabel_configs":       relabel,
		})
	}
	return out, nil
}

// Scaled is d divided by speedup (at least a second; speedup ≤ 1 leaves it).
func Scaled(d time.Duration, speedup int) time.Duration {
	if speedup <= 1 {
		return d
	}
	return max(d/time.Duration(speedup), time.Second)
}

// rangeSelector is a PromQL range or subquery duration: [10m], [6h], [5m:1m].
var rangeSelector = regexp.MustCompile(`\[([0-9]+[smhdwy])(:[0-9]+[smhdwy])?\]`)

// Speedup is f for a clock speedup times faster. With speedup > 1 —
// an environment whose tests cannot wait ten minutes for an alert — every `for`, every range
// selector and every group interval is divided by it: the alerts keep their expressions,
// labels and annotations and fire after the same number of evaluations of the same shape of
// data, sooner. Their timings as written are proved by promtool's unit tests
// (config/monitoring/tests), not here.
func Speedup(f RuleFile, speedup int) (RuleFile, error) {
	groups := f.Groups
	out := make([]RuleGroup, len(groups))
	for i, g := range groups {
		out[i] = g
		out[i].Rules = make([]Rule, len(g.Rules))
		var err error
		if out[i].Interval, err = scaleDuration(g.Interval, speedup); err != nil {
			return RuleFile{}, fmt.Errorf("rule group %s: %w", g.Name, err)
		}
		for j, r := range g.Rules {
			if r.For, err = scaleDuration(r.For, speedup); err != nil {
				return RuleFile{}, fmt.Errorf("rule %s%s: %w", r.Alert, r.Record, err)
			}
			if speedup > 1 {
				r.Expr = rangeSelector.ReplaceAllStringFunc(r.Expr, func(sel string) string {
					m := rangeSelector.FindStringSubmatch(sel)
					rng, _ := scaleDuration(m[1], speedup) // matched the duration syntax
					step := ""
					if m[2] != "" {
						step, _ = scaleDuration(m[2][1:], speedup)
						step = ":" + step
					}
					return "[" + rng + step + "]"
				})
			}
			out[i].Rules[j] = r
		}
	}
	return RuleFile{Groups: out}, nil
}

// scaleDuration is a Prometheus duration divided by speedup ("" stays "").
func scaleDuration(s string, speedup int) (string, error) {
	if s == "" || speedup <= 1 {
		return s, nil
	}
	d, err := model.ParseDuration(s)
	if err != nil {
		return "", err
	}
	return model.Duration(Scaled(time.Duration(d), speedup)).String(), nil
}
