package devcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// A real Prometheus in paddock dev (docs/devcluster.md, "Prometheus"). It is an environment
// component like the cluster DNS, not a pod: it listens at the ClusterIP of Service
// monitoring/prometheus itself, and the service proxy forwards HostPrometheusPort of the
// host address to it, as it forwards the apiserver. It discovers its targets through the
// apiserver as ServiceAccount monitoring/prometheus (pods: list, watch) and scrapes exactly
// what the monitoring kit's PodMonitors (config/monitoring) select: paddock dev translates
// each one into the scrape job the Prometheus Operator would generate for it
// (podMonitorScrapeConfigs), and loads the kit's PrometheusRule as its rule file. Nothing
// is copied by hand, so a monitor or a rule that is wrong for a real cluster is wrong here.

const (
	// PrometheusIP is the ClusterIP of Service monitoring/prometheus, where Prometheus listens.
	PrometheusIP              = "10.96.0.9"
	prometheusPort            = 9090
	prometheusNamespace       = "monitoring"
	prometheusName            = "prometheus"
	prometheusTokenSecret     = "prometheus-token"
	prometheusClusterRole     = "paddock-dev:prometheus"
	prometheusDefaultInterval = 30 * time.Second // the Prometheus Operator's default interval
	// prometheusVersion is the Prometheus the Makefile builds (PROMETHEUS_VERSION):
	// DefaultConfig looks for bin/prometheus-v<version>.
	prometheusVersion = "0.316.0"
)

// prometheusAddr is where Prometheus listens inside the private network.
func prometheusAddr() string { return net.JoinHostPort(PrometheusIP, strconv.Itoa(prometheusPort)) }

// monitoringKit is what paddock dev reads from config/monitoring: the PodMonitors and the
// PrometheusRule's rule groups, after kustomize (so with the kit's namespace and labels).
type monitoringKit struct {
	podMonitors []podMonitor
	ruleGroups  []ruleGroup
}

// podMonitor is the part of a monitoring.coreos.com/v1 PodMonitor paddock dev translates. It
// is decoded strictly: a field the kit starts using that the translation does not know is an
// error at start, never a scrape job that silently differs from the Prometheus Operator's.
type podMonitor struct {
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

// ruleGroup is one group of a PrometheusRule, as a Prometheus rule file has it.
type ruleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []rule `json:"rules"`
}

type rule struct {
	Record      string            `json:"record,omitempty"`
	Alert       string            `json:"alert,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type prometheusRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Groups []ruleGroup `json:"groups"`
	} `json:"spec"`
}

// loadMonitoringKit builds configDir/monitoring with kustomize and decodes its PodMonitors
// and PrometheusRules; the dashboard ConfigMap is Grafana's, not Prometheus's, and skipped.
func loadMonitoringKit(configDir string) (*monitoringKit, error) {
	dir := filepath.Join(configDir, "monitoring")
	resources, err := kustomizeBuild(dir)
	if err != nil {
		return nil, err
	}
	kit := &monitoringKit{}
	for _, r := range resources.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		switch r.GetKind() {
		case "PodMonitor":
			var pm podMonitor
			if err := strictJSON(b, &pm); err != nil {
				return nil, fmt.Errorf("%s: PodMonitor %s: %w (paddock dev translates only the fields podMonitor declares)", dir, r.GetName(), err)
			}
			kit.podMonitors = append(kit.podMonitors, pm)
		case "PrometheusRule":
			var pr prometheusRule
			if err := strictJSON(b, &pr); err != nil {
				return nil, fmt.Errorf("%s: PrometheusRule %s: %w", dir, r.GetName(), err)
			}
			kit.ruleGroups = append(kit.ruleGroups, pr.Spec.Groups...)
		}
	}
	if len(kit.podMonitors) == 0 {
		return nil, fmt.Errorf("%s has no PodMonitor: nothing for Prometheus to scrape", dir)
	}
	return kit, nil
}

func strictJSON(b []byte, into any) error {
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	return d.Decode(into)
}

// promLabelName is a Kubernetes label key as Prometheus's kubernetes discovery names it in
// __meta_kubernetes_pod_label_<name>: every character outside [a-zA-Z0-9_] becomes "_".
func promLabelName(key string) string {
	return regexp.MustCompile(`[^a-zA-Z0-9_]`).ReplaceAllString(key, "_")
}

// podMonitorScrapeConfigs is the scrape jobs the Prometheus Operator generates for pm, one
// per endpoint (its generatePodMonitorConfig, for the fields podMonitor has): pod discovery
// in the selected namespaces; terminated pods dropped; a keep rule per label selector term
// and one for the port name; the namespace, container, pod, job (<namespace>/<name>) and
// endpoint labels; then the monitor's own relabelings. speedup divides the interval (a test
// environment's accelerated clock, prometheusRuleFile). kubeconfig is the discovery's
// credentials.
func podMonitorScrapeConfigs(pm podMonitor, kubeconfig string, speedup int) ([]map[string]any, error) {
	sel := pm.Spec.Selector
	var keep []promRelabel
	for _, k := range sortedKeys(sel.MatchLabels) {
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
		interval := prometheusDefaultInterval
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
			"scrape_interval":       model.Duration(scaled(interval, speedup)).String(),
			"metrics_path":          path,
			"kubernetes_sd_configs": []any{sd},
			"relabel_configs":       relabel,
		})
	}
	return out, nil
}

// scaled is d divided by speedup (at least a second; speedup ≤ 1 leaves it).
func scaled(d time.Duration, speedup int) time.Duration {
	if speedup <= 1 {
		return d
	}
	return max(d/time.Duration(speedup), time.Second)
}

// rangeSelector is a PromQL range or subquery duration: [10m], [6h], [5m:1m].
var rangeSelector = regexp.MustCompile(`\[([0-9]+[smhdwy])(:[0-9]+[smhdwy])?\]`)

// prometheusRuleFile is the kit's rule groups as a Prometheus rule file. With speedup > 1 —
// an environment whose tests cannot wait ten minutes for an alert — every `for`, every range
// selector and every group interval is divided by it: the alerts keep their expressions,
// labels and annotations and fire after the same number of evaluations of the same shape of
// data, sooner. Their timings as written are proved by promtool's unit tests
// (config/monitoring/tests), not here.
func prometheusRuleFile(groups []ruleGroup, speedup int) ([]byte, error) {
	out := make([]ruleGroup, len(groups))
	for i, g := range groups {
		out[i] = g
		out[i].Rules = make([]rule, len(g.Rules))
		var err error
		if out[i].Interval, err = scaleDuration(g.Interval, speedup); err != nil {
			return nil, fmt.Errorf("rule group %s: %w", g.Name, err)
		}
		for j, r := range g.Rules {
			if r.For, err = scaleDuration(r.For, speedup); err != nil {
				return nil, fmt.Errorf("rule %s%s: %w", r.Alert, r.Record, err)
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
	return yaml.Marshal(map[string]any{"groups": out})
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
	return model.Duration(scaled(time.Duration(d), speedup)).String(), nil
}

// prometheusConfig is Prometheus's configuration file: a global interval (the kit's
// monitors set their own), the rule file, and the PodMonitors' scrape jobs.
func prometheusConfig(kit *monitoringKit, kubeconfig, rules string, speedup int) ([]byte, error) {
	var jobs []map[string]any
	for _, pm := range kit.podMonitors {
		j, err := podMonitorScrapeConfigs(pm, kubeconfig, speedup)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j...)
	}
	interval := model.Duration(scaled(prometheusDefaultInterval, speedup)).String()
	return yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": interval, "evaluation_interval": interval},
		"rule_files":     []string{rules},
		"scrape_configs": jobs,
	})
}

// prometheusObjects are what Prometheus needs in the API: its namespace, ServiceAccount and
// that account's token Secret, read access to pods (what pod discovery lists and watches),
// and Service monitoring/prometheus at PrometheusIP with no selector — Prometheus is not a
// pod and answers there itself.
func prometheusObjects() []client.Object {
	labels := map[string]string{"app.kubernetes.io/name": prometheusName, "app.kubernetes.io/part-of": "paddock-dev"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: prometheusNamespace, Name: name, Labels: labels}
	}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prometheusNamespace, Labels: labels}},
		&corev1.ServiceAccount{ObjectMeta: meta(prometheusName)},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: prometheusNamespace, Name: prometheusTokenSecret, Labels: labels,
				Annotations: map[string]string{corev1.ServiceAccountNameKey: prometheusName}},
			Type: corev1.SecretTypeServiceAccountToken,
		},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: prometheusClusterRole, Labels: labels},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: prometheusClusterRole, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: prometheusClusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: prometheusNamespace, Name: prometheusName}},
		},
		&corev1.Service{
			ObjectMeta: meta(prometheusName),
			Spec: corev1.ServiceSpec{
				ClusterIP: PrometheusIP,
				Ports:     []corev1.ServicePort{{Name: "web", Port: prometheusPort, Protocol: corev1.ProtocolTCP}},
			},
		},
	}
}

// prometheus is the running Prometheus.
type prometheus struct {
	proc *process
}

// startPrometheus reads the monitoring kit, applies Prometheus's objects, writes its
// kubeconfig (under pki/, which no pod can read), configuration and rule file, starts it,
// forwards the host address's HostPrometheusPort to it, and waits until it is ready.
func (e *Env) startPrometheus(ctx context.Context) error {
	kit, err := loadMonitoringKit(e.cfg.ConfigDir)
	if err != nil {
		return err
	}
	for _, obj := range prometheusObjects() {
		if err := e.applyTyped(ctx, obj); err != nil {
			return err
		}
	}
	token, err := e.waitServiceAccountToken(ctx, prometheusNamespace, prometheusTokenSecret)
	if err != nil {
		return err
	}
	rc := *e.restConfig
	rc.BearerToken = token
	kubeconfig := filepath.Join(e.cfg.Dir, "pki", "prometheus.kubeconfig")
	if err := writeKubeconfig(kubeconfig, e.restConfig.Host, "system:serviceaccount:"+prometheusNamespace+":"+prometheusName, &rc); err != nil {
		return err
	}
	dir := filepath.Join(e.cfg.Dir, "prometheus")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return err
	}
	rules, err := prometheusRuleFile(kit.ruleGroups, e.cfg.PrometheusSpeedup)
	if err != nil {
		return err
	}
	rulesPath := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rulesPath, rules, 0o644); err != nil {
		return fmt.Errorf("write Prometheus's rules: %w", err)
	}
	conf, err := prometheusConfig(kit, kubeconfig, rulesPath, e.cfg.PrometheusSpeedup)
	if err != nil {
		return err
	}
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, conf, 0o644); err != nil {
		return fmt.Errorf("write Prometheus's configuration: %w", err)
	}
	args := []string{
		"--config.file=" + confPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--storage.tsdb.retention.time=2d",
		"--web.listen-address=" + prometheusAddr(),
		"--web.external-url=http://" + e.cfg.hostPrometheusAddr() + "/",
		"--web.route-prefix=/",
	}
	proc, err := startProcess("prometheus", e.cfg.PrometheusBinary, args, []string{"PATH=" + os.Getenv("PATH")}, e.cfg.logPath("prometheus"), nil)
	if err != nil {
		return err
	}
	e.prom = &prometheus{proc: proc}
	if err := waitHTTP(ctx, http.DefaultClient, "http://"+prometheusAddr()+"/-/ready", time.Minute); err != nil {
		return fmt.Errorf("Prometheus did not become ready (see %s): %w", e.cfg.logPath("prometheus"), err)
	}
	if err := e.proxy.forward(e.cfg.hostPrometheusAddr(), prometheusAddr()); err != nil {
		return fmt.Errorf("forward Prometheus to %s (pass --host-prometheus-port, or --prometheus=false): %w", e.cfg.hostPrometheusAddr(), err)
	}
	return nil
}

func (p *prometheus) stop() {
	if p != nil && p.proc != nil {
		p.proc.stop(10 * time.Second)
	}
}

func (c Config) hostPrometheusAddr() string {
	return net.JoinHostPort(c.HostAddress, strconv.Itoa(c.HostPrometheusPort))
}

// PrometheusURL is the dev Prometheus's address inside the private network (tests run
// there), or "" when the environment runs without one.
func (e *Env) PrometheusURL() string {
	if e.prom == nil {
		return ""
	}
	return "http://" + prometheusAddr()
}

// HostPrometheusURL is the dev Prometheus's address from the host's network, or "".
func (e *Env) HostPrometheusURL() string {
	if e.prom == nil {
		return ""
	}
	return "http://" + e.cfg.hostPrometheusAddr()
}
