package devcluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/paddock-dev/paddock/internal/monitoring"
)

// A real Prometheus in paddock dev (docs/devcluster.md, "Prometheus"). It is an environment
// component like the cluster DNS, not a pod: it listens at the ClusterIP of Service
// monitoring/prometheus itself, and the service proxy forwards HostPrometheusPort of the
// host address to it, as it forwards the apiserver. It discovers its targets through the
// apiserver as ServiceAccount monitoring/prometheus (pods: list, watch) and scrapes exactly
// what the monitoring kit's PodMonitors (config/monitoring) select: paddock dev translates
// each one into the scrape job the Prometheus Operator would generate for it
// (monitoring.ScrapeConfigs), and loads the kit's PrometheusRule as its rule file. Nothing
// is copied by hand, so a monitor or a rule that is wrong for a real cluster is wrong here.

const (
	// PrometheusIP is the ClusterIP of Service monitoring/prometheus, where Prometheus listens.
	PrometheusIP          = "10.96.0.9"
	prometheusPort        = 9090
	prometheusNamespace   = "monitoring"
	prometheusName        = "prometheus"
	prometheusTokenSecret = "prometheus-token"
	prometheusClusterRole = "paddock-dev:prometheus"
	// prometheusVersion is the Prometheus the Makefile builds (PROMETHEUS_VERSION):
	// DefaultConfig looks for bin/prometheus-v<version>.
	prometheusVersion = "0.316.0"
)

// prometheusAddr is where Prometheus listens inside the private network.
func prometheusAddr() string { return net.JoinHostPort(PrometheusIP, strconv.Itoa(prometheusPort)) }

// monitoringKit is what paddock dev reads from config/monitoring: the PodMonitors and the
// PrometheusRule's rule groups, after kustomize (so with the kit's namespace and labels).
type monitoringKit struct {
	podMonitors []monitoring.PodMonitor
	rules       monitoring.RuleFile
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
			pm, err := monitoring.PodMonitorOf(b)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", dir, r.GetName(), err)
			}
			kit.podMonitors = append(kit.podMonitors, pm)
		case "PrometheusRule":
			f, err := monitoring.RulesOf(b)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", dir, r.GetName(), err)
			}
			kit.rules.Groups = append(kit.rules.Groups, f.Groups...)
		}
	}
	if len(kit.podMonitors) == 0 {
		return nil, fmt.Errorf("%s has no PodMonitor: nothing for Prometheus to scrape", dir)
	}
	return kit, nil
}

// prometheusConfig is Prometheus's configuration file: a global interval (the kit's
// monitors set their own), the rule file, and the PodMonitors' scrape jobs.
func prometheusConfig(kit *monitoringKit, kubeconfig, rules string, speedup int) ([]byte, error) {
	var jobs []map[string]any
	for _, pm := range kit.podMonitors {
		j, err := monitoring.ScrapeConfigs(pm, kubeconfig, speedup)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j...)
	}
	interval := model.Duration(monitoring.Scaled(monitoring.DefaultScrapeInterval, speedup)).String()
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
	fast, err := monitoring.Speedup(kit.rules, e.cfg.PrometheusSpeedup)
	if err != nil {
		return err
	}
	rules, err := fast.YAML()
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
		return fmt.Errorf("the dev Prometheus did not become ready (see %s): %w", e.cfg.logPath("prometheus"), err)
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
