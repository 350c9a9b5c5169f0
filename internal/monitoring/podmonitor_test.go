package monitoring

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func kitPodMonitor(t *testing.T, file string) PodMonitor {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "monitoring", file))
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := PodMonitorOf(j)
	if err != nil {
		t.Fatal(err)
	}
	pm.Metadata.Namespace = "paddock-system" // what the kit's kustomization sets
	return pm
}

// relabels is a scrape job's relabel_configs as plain JSON maps, for comparing.
func relabels(t *testing.T, job map[string]any) []map[string]any {
	t.Helper()
	b, err := json.Marshal(job["relabel_configs"])
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func indexOf(rs []map[string]any, match func(map[string]any) bool) int {
	for i, r := range rs {
		if match(r) {
			return i
		}
	}
	return -1
}

func TestABrokerPodMonitorBecomesTheScrapeJobThePrometheusOperatorGenerates(t *testing.T) {
	jobs, err := ScrapeConfigs(kitPodMonitor(t, "podmonitor-brokers.yaml"), "/kc", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Fatalf("%d jobs, want one per endpoint (1)", len(jobs))
	}
	job := jobs[0]
	if job["job_name"] != "podMonitor/paddock-system/paddock-brokers/0" || job["scrape_interval"] != "15s" ||
		job["metrics_path"] != "/metrics" || job["honor_labels"] != false {
		t.Errorf("job %v %v %v %v", job["job_name"], job["scrape_interval"], job["metrics_path"], job["honor_labels"])
	}
	sd := job["kubernetes_sd_configs"].([]any)[0].(map[string]any)
	if sd["role"] != "pod" || sd["kubeconfig_file"] != "/kc" || sd["namespaces"] != nil {
		t.Errorf("discovery %v: want pods of every namespace (namespaceSelector.any)", sd)
	}
	rs := relabels(t, job)
	want := []struct {
		what  string
		match func(map[string]any) bool
	}{
		{"terminated pods dropped", func(r map[string]any) bool {
			return r["action"] == "drop" && r["regex"] == "(Failed|Succeeded)"
		}},
		{"matchLabels app.kubernetes.io/name=paddock kept", func(r map[string]any) bool {
			return r["action"] == "keep" && r["regex"] == "(paddock);true" &&
				strings.Join(toStrings(r["source_labels"]), ",") == "__meta_kubernetes_pod_label_app_kubernetes_io_name,__meta_kubernetes_pod_labelpresent_app_kubernetes_io_name"
		}},
		{"the cluster label Exists", func(r map[string]any) bool {
			return r["action"] == "keep" && r["regex"] == "true" &&
				strings.Join(toStrings(r["source_labels"]), ",") == "__meta_kubernetes_pod_labelpresent_kafka_paddock_dev_cluster"
		}},
		{"the port named health", func(r map[string]any) bool {
			return r["action"] == "keep" && r["regex"] == "health"
		}},
		{"the operator's job label", func(r map[string]any) bool {
			return r["target_label"] == "job" && r["replacement"] == "paddock-system/paddock-brokers"
		}},
		{"the monitor's own job label, after it", func(r map[string]any) bool {
			return r["target_label"] == "job" && r["replacement"] == "paddock-broker"
		}},
		{"the broker ordinal from the pod name", func(r map[string]any) bool {
			return r["target_label"] == "broker" && r["regex"] == ".*-([0-9]+)" && r["action"] == "replace"
		}},
	}
	last := -1
	for _, w := range want {
		i := indexOf(rs, w.match)
		if i < 0 {
			t.Errorf("no relabeling: %s\n%v", w.what, rs)
			continue
		}
		if i < last {
			t.Errorf("%s at %d, before the one above it (%d): the monitor's relabelings come last", w.what, i, last)
		}
		last = i
	}
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

func TestTheOperatorPodMonitorHonorsTheClustersLabels(t *testing.T) {
	jobs, err := ScrapeConfigs(kitPodMonitor(t, "podmonitor-operator.yaml"), "/kc", 1)
	if err != nil {
		t.Fatal(err)
	}
	if jobs[0]["honor_labels"] != true {
		t.Errorf("honor_labels %v: the manager's per-cluster series keep their namespace", jobs[0]["honor_labels"])
	}
}

func TestAPodMonitorWithoutNamespaceSelectorWatchesItsOwnNamespace(t *testing.T) {
	pm := kitPodMonitor(t, "podmonitor-brokers.yaml")
	pm.Spec.NamespaceSelector.Any = false
	jobs, err := ScrapeConfigs(pm, "/kc", 1)
	if err != nil {
		t.Fatal(err)
	}
	sd := jobs[0]["kubernetes_sd_configs"].([]any)[0].(map[string]any)
	if got, _ := json.Marshal(sd["namespaces"]); string(got) != `{"names":["paddock-system"]}` {
		t.Errorf("namespaces %s, want the monitor's own", got)
	}
}

func TestAPodMonitorFieldTheTranslationDoesNotKnowIsRefused(t *testing.T) {
	_, err := PodMonitorOf([]byte(`{"apiVersion":"monitoring.coreos.com/v1","kind":"PodMonitor","metadata":{"name":"x"},
		"spec":{"selector":{},"podMetricsEndpoints":[{"port":"health","tlsConfig":{"insecureSkipVerify":true}}]}}`))
	if err == nil || !strings.Contains(err.Error(), "tlsConfig") {
		t.Fatalf("err %v, want tlsConfig named as unknown", err)
	}
}

func TestSpeedupDividesEveryForRangeAndInterval(t *testing.T) {
	f := RuleFile{Groups: []RuleGroup{{Name: "g", Interval: "1m", Rules: []Rule{
		{Alert: "A", Expr: `delta(x[10m]) > 0 and rate(y_bucket[5m]) > 0 and max_over_time(z[6h:1m]) > 1`, For: "10m",
			Labels: map[string]string{"severity": "warning"}},
		{Record: "r", Expr: `sum(x)`},
	}}}}
	got, err := Speedup(f, 10)
	if err != nil {
		t.Fatal(err)
	}
	r := got.Groups[0].Rules[0]
	if want := `delta(x[1m]) > 0 and rate(y_bucket[30s]) > 0 and max_over_time(z[36m:6s]) > 1`; r.Expr != want {
		t.Errorf("expr %q, want %q", r.Expr, want)
	}
	if r.For != "1m" || got.Groups[0].Interval != "6s" || r.Labels["severity"] != "warning" {
		t.Errorf("for %q interval %q labels %v", r.For, got.Groups[0].Interval, r.Labels)
	}
	if got.Groups[0].Rules[1].Expr != "sum(x)" || got.Groups[0].Rules[1].For != "" {
		t.Errorf("recording rule %+v changed", got.Groups[0].Rules[1])
	}
	if f.Groups[0].Rules[0].For != "10m" {
		t.Error("Speedup changed its argument")
	}
	same, err := Speedup(f, 1)
	if err != nil || same.Groups[0].Rules[0].Expr != f.Groups[0].Rules[0].Expr || same.Groups[0].Rules[0].For != "10m" {
		t.Errorf("speedup 1 changed the rules: %+v %v", same, err)
	}
}

func TestSpeedupRefusesAForThatIsNoDuration(t *testing.T) {
	_, err := Speedup(RuleFile{Groups: []RuleGroup{{Name: "g", Rules: []Rule{{Alert: "A", Expr: "x", For: "soon"}}}}}, 10)
	if err == nil || !strings.Contains(err.Error(), "A") {
		t.Fatalf("err %v, want the rule named", err)
	}
}
