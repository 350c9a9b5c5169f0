package kafkacluster

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// The -update flag rewrites the golden files instead of comparing against them
// (`make test-update-golden`). It is defined only if no other test file of the package
// defined it first, so a second golden-file test cannot make the package panic.
var _ = func() bool {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files in testdata/golden")
	}
	return true
}()

// updatingGolden reports whether -update was given.
func updatingGolden() bool {
	g, ok := flag.Lookup("update").Value.(flag.Getter)
	if !ok {
		return false
	}
	b, _ := g.Get().(bool)
	return b
}

// goldenCluster is the cluster the golden files are built from: the sample's
// defaults (as the apiserver fills them in), with a fixed UID so owner references are stable
// and the clusterID the reconciler has stored by the time it builds the children.
func goldenCluster() *kafkav1alpha1.KafkaCluster {
	return &kafkav1alpha1.KafkaCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "kafka", UID: "0b6f1c8e-6a52-4a43-9f0e-3f1f2d7c5a10"},
		Spec: kafkav1alpha1.KafkaClusterSpec{
			Replicas: 3,
			Listeners: []kafkav1alpha1.Listener{{
				Name: "kafka", Port: 9092, Type: kafkav1alpha1.ListenerInternal, AdvertisedHost: kafkav1alpha1.AdvertisePodDNS,
			}},
			Storage: kafkav1alpha1.Storage{
				Type: kafkav1alpha1.StoragePersistentClaim, Size: ptr.To(resource.MustParse("10Gi")), AccessMode: corev1.ReadWriteMany,
			},
			Heartbeat: kafkav1alpha1.Heartbeat{
				Interval: &metav1.Duration{Duration: time.Second}, SessionTimeout: &metav1.Duration{Duration: 6 * time.Second},
			},
			DrainTimeout: &metav1.Duration{Duration: time.Minute},
			Rack:         kafkav1alpha1.Rack{TopologyKey: "topology.kubernetes.io/zone"},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			},
		},
		Status: kafkav1alpha1.KafkaClusterStatus{ClusterID: "cZ4mKx7zQd2cWq0b3nT9fA"},
	}
}

// goldenDeleteClaimCluster deletes its data claim with it.
func goldenDeleteClaimCluster() *kafkav1alpha1.KafkaCluster {
	c := goldenCluster()
	c.Spec.Storage.DeleteClaim = true
	return c
}

// goldenExternalCluster adds a NodePort listener (its advertisedHost mode is ignored: it
// advertises the node's address), a host template on the internal listener, a
// storage class, an explicit image, and spec.config with resource bounds (static keys, passed
// as flags; an invalid one is left out) and a dynamic key (not a flag).
func goldenExternalCluster() *kafkav1alpha1.KafkaCluster {
	c := goldenCluster()
	c.Spec.Config = map[string]string{"max.connections": "5000", "connections.max.idle.ms": " 300000", "max.connections.per.ip": "many", "num.partitions": "3"}
	c.Spec.Replicas = 2
	c.Spec.Image = "example.com/paddock:v1"
	c.Spec.Listeners = append(c.Spec.Listeners, kafkav1alpha1.Listener{
		Name: "external", Port: 9094, Type: kafkav1alpha1.ListenerNodePort, AdvertisedHost: kafkav1alpha1.AdvertisePodIP,
	})
	c.Spec.Listeners[0].AdvertisedHostTemplate = "broker-{id}.kafka.example.com"
	c.Spec.Storage.StorageClassName = ptr.To("nfs")
	c.Spec.DrainTimeout = &metav1.Duration{Duration: 90500 * time.Millisecond}
	return c
}

// goldenSecuredCluster adds a TLS listener with SCRAM-SHA-512 and a mutual-TLS one.
func goldenSecuredCluster() *kafkav1alpha1.KafkaCluster {
	c := goldenCluster()
	c.Spec.Replicas = 2
	c.Spec.Listeners = append(c.Spec.Listeners,
		kafkav1alpha1.Listener{Name: "secure", Port: 9093, Type: kafkav1alpha1.ListenerInternal, AdvertisedHost: kafkav1alpha1.AdvertisePodDNS,
			TLS: true, Authentication: &kafkav1alpha1.ListenerAuthentication{Type: kafkav1alpha1.AuthenticationScramSHA512}},
		kafkav1alpha1.Listener{Name: "mtls", Port: 9094, Type: kafkav1alpha1.ListenerInternal, AdvertisedHost: kafkav1alpha1.AdvertisePodDNS,
			TLS: true, Authentication: &kafkav1alpha1.ListenerAuthentication{Type: kafkav1alpha1.AuthenticationTLS}})
	return c
}

// goldenLoadBalancerCluster exposes a LoadBalancer listener with its Service settings,
// limits its internal listener to the pods of one namespace, lets a Prometheus reach the
// health port, and opts out of nothing.
func goldenLoadBalancerCluster() *kafkav1alpha1.KafkaCluster {
	c := goldenCluster()
	c.Spec.Replicas = 1
	c.Spec.Listeners[0].AllowFrom = []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "shop"}},
	}}
	c.Spec.Listeners = append(c.Spec.Listeners, kafkav1alpha1.Listener{
		Name: "public", Port: 9094, Type: kafkav1alpha1.ListenerLoadBalancer,
		Service: &kafkav1alpha1.ListenerService{
			Annotations:              map[string]string{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"},
			LoadBalancerSourceRanges: []string{"203.0.113.0/24"},
			ExternalTrafficPolicy:    corev1.ServiceExternalTrafficPolicyLocal,
		},
		AllowFrom: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "203.0.113.0/24"}}},
	})
	c.Spec.NetworkPolicy.HealthFrom = []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}},
	}}
	return c
}

// goldenEphemeralCluster keeps its data in an emptyDir.
func goldenEphemeralCluster() *kafkav1alpha1.KafkaCluster {
	c := goldenCluster()
	c.Spec.Replicas = 1
	c.Spec.Storage = kafkav1alpha1.Storage{Type: kafkav1alpha1.StorageEphemeral, Size: ptr.To(resource.MustParse("1Gi"))}
	return c
}

// goldenTemplateCluster customizes its broker pods through spec.template and leaves
// spec.resources empty, so the default resources and GOMEMLIMIT apply.
func goldenTemplateCluster() *kafkav1alpha1.KafkaCluster {
	c := goldenCluster()
	c.Spec.Resources = corev1.ResourceRequirements{}
	c.Spec.Template = kafkav1alpha1.BrokerPodTemplate{
		Metadata: kafkav1alpha1.PodMetadata{
			Labels:      map[string]string{"team": "streaming", kafkav1alpha1.LabelCluster: "not-demo"},
			Annotations: map[string]string{"prometheus.io/scrape": "true"},
		},
		NodeSelector: map[string]string{"node-role.example.com/kafka": ""},
		Tolerations: []corev1.Toleration{{
			Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "kafka", Effect: corev1.TaintEffectNoSchedule,
		}},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
			}}},
		}},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{kafkav1alpha1.LabelCluster: "demo"}},
		}},
		PriorityClassName:        "kafka-critical",
		ImagePullSecrets:         []corev1.LocalObjectReference{{Name: "registry"}},
		SecurityContext:          &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), FSGroup: ptr.To[int64](2000)},
		ContainerSecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true)},
	}
	return c
}

var goldenOptions = Options{DefaultBrokerImage: "ghcr.io/paddock-dev/paddock:v0.1.0"}

func TestGolden(t *testing.T) {
	def, ext, eph, owned := goldenCluster(), goldenExternalCluster(), goldenEphemeralCluster(), goldenDeleteClaimCluster()
	lb, tmpl := goldenLoadBalancerCluster(), goldenTemplateCluster()
	sec := goldenSecuredCluster()
	cases := map[string]client.Object{
		"serviceaccount":                      desiredServiceAccount(def),
		"role":                                desiredRole(def),
		"rolebinding":                         desiredRoleBinding(def),
		"service-headless":                    desiredHeadlessService(def),
		"service-bootstrap":                   desiredBootstrapService(def),
		"service-broker-1":                    desiredBrokerServices(def)[1],
		"pvc-data":                            desiredDataClaim(def),
		"deleteclaim-pvc-data":                desiredDataClaim(owned),
		"pdb":                                 desiredPodDisruptionBudget(def),
		"statefulset":                         desiredStatefulSet(def, goldenOptions),
		"external-service-bootstrap":          desiredBootstrapService(ext),
		"external-service-broker-0":           desiredBrokerServices(ext)[0],
		"external-pvc-data":                   desiredDataClaim(ext),
		"external-statefulset":                desiredStatefulSet(ext, goldenOptions),
		"external-role":                       desiredRole(ext),
		"node-reader-clusterrole":             desiredNodeReaderRole(),
		"node-reader-binding":                 desiredNodeReaderBinding(ext),
		"ephemeral-statefulset":               desiredStatefulSet(eph, goldenOptions),
		"networkpolicy":                       desiredNetworkPolicy(def),
		"external-networkpolicy":              desiredNetworkPolicy(ext),
		"external-service-bootstrap-internal": desiredInternalBootstrapService(ext),
		"lb-service-bootstrap":                desiredBootstrapService(lb),
		"lb-service-broker-0":                 desiredBrokerServices(lb)[0],
		"lb-networkpolicy":                    desiredNetworkPolicy(lb),
		"template-statefulset":                desiredStatefulSet(tmpl, goldenOptions),
		"secured-role":                        desiredRole(sec),
		"secured-statefulset":                 desiredStatefulSet(sec, goldenOptions),
		"storage-check-job":                   desiredStorageCheckJob(def, goldenOptions, storageCheckDigest(def, &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-demo"}})),
		"storage-check-service":               desiredStorageCheckService(def),
	}
	for name, obj := range cases {
		t.Run(name, func(t *testing.T) {
			body, err := applyBody(obj)
			if err != nil {
				t.Fatal(err)
			}
			got, err := yaml.Marshal(body.Object)
			if err != nil {
				t.Fatal(err)
			}
			compareGolden(t, name, got)
		})
	}
}

// compareGolden compares got with testdata/golden/<name>.yaml, or
// rewrites that file with -update.
func compareGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".yaml")
	if updatingGolden() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run `make test-update-golden` to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the builder's output (run `make test-update-golden` if the change is intended)\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// The ephemeral cluster has no claim to build.
func TestGoldenEphemeralClusterHasNoDataClaim(t *testing.T) {
	if pvc := desiredDataClaim(goldenEphemeralCluster()); pvc != nil {
		t.Fatalf("want no data claim for Ephemeral storage, got %s", pvc.Name)
	}
}
