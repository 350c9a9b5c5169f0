package kafkacluster

import (
	"bytes"
	"crypto/rand"
	"errors"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/kafkaconfig"
)

func TestValidateSpec(t *testing.T) {
	cases := []struct {
		rule   string
		mutate func(*kafkav1alpha1.KafkaCluster, *Options)
		want   string // substring of the message; "" means valid
	}{
		{"the golden cluster is valid", func(*kafkav1alpha1.KafkaCluster, *Options) {}, ""},
		{"spec.image alone names the image", func(c *kafkav1alpha1.KafkaCluster, o *Options) { o.DefaultBrokerImage, c.Spec.Image = "", "x/y:1" }, ""},
		{"no image anywhere is refused", func(c *kafkav1alpha1.KafkaCluster, o *Options) { o.DefaultBrokerImage = "" }, "no --default-broker-image"},
		{"a listener named health is refused", func(c *kafkav1alpha1.KafkaCluster, _ *Options) { c.Spec.Listeners[0].Name = "health" }, "reserved for the health port"},
		{"a listener on the health port is refused", func(c *kafkav1alpha1.KafkaCluster, _ *Options) { c.Spec.Listeners[0].Port = 9644 }, "port 9644"},
		{"NodePort and LoadBalancer listeners together are refused", func(c *kafkav1alpha1.KafkaCluster, _ *Options) {
			c.Spec.Listeners = append(c.Spec.Listeners,
				kafkav1alpha1.Listener{Name: "np", Port: 9094, Type: kafkav1alpha1.ListenerNodePort},
				kafkav1alpha1.Listener{Name: "lb", Port: 9095, Type: kafkav1alpha1.ListenerLoadBalancer})
		}, "mix NodePort and LoadBalancer"},
		{"one external type with internal listeners is valid", func(c *kafkav1alpha1.KafkaCluster, _ *Options) {
			c.Spec.Listeners = append(c.Spec.Listeners, kafkav1alpha1.Listener{Name: "lb", Port: 9095, Type: kafkav1alpha1.ListenerLoadBalancer})
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			c, o := goldenCluster(), goldenOptions
			tc.mutate(c, &o)
			p := checkSpec(c, o)
			switch {
			case tc.want == "" && p != nil:
				t.Fatalf("want valid, got %v", p)
			case tc.want != "" && p == nil:
				t.Fatalf("want refused with %q, got valid", tc.want)
			case tc.want != "" && (p.Reason != kafkav1alpha1.ReasonInvalidSpec || !strings.Contains(p.Message, tc.want)):
				t.Fatalf("want InvalidSpec with %q, got %v", tc.want, p)
			}
		})
	}
}

// expandable and fixed are StorageClasses that do and do not allow volume expansion.
var (
	expandable = &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, AllowVolumeExpansion: ptr.To(true)}
	fixed      = &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}}
)

func TestStorageChange(t *testing.T) {
	base := goldenCluster()
	sts := desiredStatefulSet(base, goldenOptions)
	claim := desiredDataClaim(base)
	claim.Spec.StorageClassName = ptr.To("standard") // filled in by the default StorageClass
	unclassed := claim.DeepCopy()
	unclassed.Spec.StorageClassName = nil
	ephemeralSTS := desiredStatefulSet(goldenEphemeralCluster(), goldenOptions)
	sized := func(size string) kafkav1alpha1.Storage {
		return kafkav1alpha1.Storage{Type: kafkav1alpha1.StoragePersistentClaim, Size: ptr.To(resource.MustParse(size))}
	}

	cases := []struct {
		rule   string
		want   kafkav1alpha1.Storage
		sts    *appsv1.StatefulSet
		claim  *corev1.PersistentVolumeClaim
		class  *storagev1.StorageClass
		reason string // the refusal's reason; "" means accepted
		refuse string // substring of the message
	}{
		{"a new cluster may choose any storage", kafkav1alpha1.Storage{Type: kafkav1alpha1.StorageEphemeral}, nil, nil, nil, "", ""},
		{"unchanged storage is accepted", base.Spec.Storage, sts, claim, nil, "", ""},
		{"a class left empty accepts the default class", base.Spec.Storage, sts, claim, nil, "", ""},
		{"the claim not created yet is accepted", base.Spec.Storage, sts, nil, nil, "", ""},
		{"claim to emptyDir is refused", kafkav1alpha1.Storage{Type: kafkav1alpha1.StorageEphemeral}, sts, claim, nil, kafkav1alpha1.ReasonStorageImmutable, "from PersistentClaim to Ephemeral"},
		{"emptyDir to claim is refused", base.Spec.Storage, ephemeralSTS, nil, nil, kafkav1alpha1.ReasonStorageImmutable, "from Ephemeral to PersistentClaim"},
		{"a larger size is an expansion where the class allows it", sized("20Gi"), sts, claim, expandable, "", ""},
		{"a larger size is refused where the class does not allow expansion", sized("20Gi"), sts, claim, fixed, kafkav1alpha1.ReasonStorageNotExpandable, "StorageClass standard does not allow volume expansion"},
		{"a larger size is refused when the class does not exist", sized("20Gi"), sts, claim, nil, kafkav1alpha1.ReasonStorageNotExpandable, "StorageClass standard does not exist"},
		{"a larger size is refused for a claim without a class", sized("20Gi"), sts, unclassed, nil, kafkav1alpha1.ReasonStorageNotExpandable, "it has no StorageClass"},
		{"a smaller size is refused, whatever the class", sized("5Gi"), sts, claim, expandable, kafkav1alpha1.ReasonStorageImmutable, "shrank from 10Gi to 5Gi"},
		{"a new class is refused", kafkav1alpha1.Storage{Type: kafkav1alpha1.StoragePersistentClaim, Size: ptr.To(resource.MustParse("10Gi")), StorageClassName: ptr.To("fast")}, sts, claim, nil, kafkav1alpha1.ReasonStorageImmutable, `storageClassName changed from "standard" to "fast"`},
		{"a new access mode is refused", kafkav1alpha1.Storage{Type: kafkav1alpha1.StoragePersistentClaim, Size: ptr.To(resource.MustParse("10Gi")), AccessMode: corev1.ReadWriteOnce}, sts, claim, nil, kafkav1alpha1.ReasonStorageImmutable, "accessMode changed"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			p := storageChange(tc.want, tc.sts, tc.claim, tc.class)
			switch {
			case tc.reason == "" && p != nil:
				t.Fatalf("want accepted, got %v", p)
			case tc.reason != "" && p == nil:
				t.Fatalf("want refused with %q, got accepted", tc.refuse)
			case tc.reason != "" && (p.Reason != tc.reason || !strings.Contains(p.Message, tc.refuse)):
				t.Fatalf("want %s with %q, got %v", tc.reason, tc.refuse, p)
			}
		})
	}
}

func TestNewClusterIDIs22CharsOfBase64URL(t *testing.T) {
	id, err := newClusterID(bytes.NewReader(bytes.Repeat([]byte{0xfb}, 16)))
	if err != nil {
		t.Fatal(err)
	}
	if id != "-_v7-_v7-_v7-_v7-_v7-w" {
		t.Fatalf("16 bytes of 0xfb: got %q", id)
	}
	if _, err := newClusterID(bytes.NewReader(make([]byte, 15))); err == nil {
		t.Fatal("want an error when the random source runs dry")
	}
	shape := regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)
	for range 100 {
		id, err := newClusterID(rand.Reader)
		if err != nil || !shape.MatchString(id) {
			t.Fatalf("got %q, %v", id, err)
		}
	}
}

// statefulSetWith is a StatefulSet at generation gen with the given status.
func statefulSetWith(specReplicas int32, gen int64, st appsv1.StatefulSetStatus) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Generation: gen},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To(specReplicas)},
		Status:     st,
	}
}

func TestConditions(t *testing.T) {
	settled := appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, UpdatedReplicas: 3, CurrentRevision: "r2", UpdateRevision: "r2"}
	rolling := settled
	rolling.UpdatedReplicas, rolling.CurrentRevision, rolling.ReadyReplicas = 1, "r1", 2
	unseen := settled
	unseen.ObservedGeneration = 1
	oneDown := settled
	oneDown.ReadyReplicas = 2
	invalid := &specProblem{Reason: kafkav1alpha1.ReasonInvalidSpec, Message: "bad listener"}

	type want struct{ ready, progressing, degraded, reason string }
	cases := []struct {
		rule string
		obs  observation
		want want
	}{
		{"no StatefulSet yet: not ready, progressing", observation{DesiredReplicas: 3},
			want{"False", "True", "False", kafkav1alpha1.ReasonAsExpected}},
		{"every broker ready and up to date: ready, settled", observation{DesiredReplicas: 3, StatefulSet: statefulSetWith(3, 2, settled)},
			want{"True", "False", "False", kafkav1alpha1.ReasonAsExpected}},
		{"a rolling update is progressing and not ready", observation{DesiredReplicas: 3, StatefulSet: statefulSetWith(3, 2, rolling)},
			want{"False", "True", "False", kafkav1alpha1.ReasonAsExpected}},
		{"a spec the StatefulSet controller has not seen is progressing", observation{DesiredReplicas: 3, StatefulSet: statefulSetWith(3, 2, unseen)},
			want{"True", "True", "False", kafkav1alpha1.ReasonAsExpected}},
		{"a scale-up not yet applied is progressing", observation{DesiredReplicas: 5, StatefulSet: statefulSetWith(3, 2, settled)},
			want{"False", "True", "False", kafkav1alpha1.ReasonAsExpected}},
		{"a broker not ready is not ready", observation{DesiredReplicas: 3, StatefulSet: statefulSetWith(3, 2, oneDown)},
			want{"False", "True", "False", kafkav1alpha1.ReasonAsExpected}},
		{"an invalid spec is degraded and not progressing; running brokers stay ready", observation{DesiredReplicas: 3, Problem: invalid, StatefulSet: statefulSetWith(3, 2, settled)},
			want{"True", "False", "True", kafkav1alpha1.ReasonInvalidSpec}},
		{"a failed apply is degraded", observation{DesiredReplicas: 3, ApplyErr: errors.New("apply Service x: forbidden"), StatefulSet: statefulSetWith(3, 2, settled)},
			want{"True", "False", "True", kafkav1alpha1.ReasonApplyFailed}},
		{"a spec.config entry that is not applied is degraded", observation{DesiredReplicas: 3, StatefulSet: statefulSetWith(3, 2, settled),
			ConfigProblems: kafkaconfig.CheckBrokerConfig(map[string]string{"log.cleanup.policy": "shred"})},
			want{"True", "False", "True", kafkav1alpha1.ReasonInvalidConfig}},
		{"cleaner lags that are no range are degraded", observation{DesiredReplicas: 3, StatefulSet: statefulSetWith(3, 2, settled),
			ConfigProblems: kafkaconfig.CheckBrokerConfig(map[string]string{"log.cleaner.min.compaction.lag.ms": "100", "log.cleaner.max.compaction.lag.ms": "50"})},
			want{"True", "False", "True", kafkav1alpha1.ReasonInvalidConfig}},
		{"registered brokers of which none is alive are degraded", observation{DesiredReplicas: 3, StatefulSet: statefulSetWith(3, 2, settled),
			Counts: kafkav1alpha1.BrokerCounts{Registered: 3, Serving: 3, Dead: 2, Draining: 1}},
			want{"True", "False", "True", kafkav1alpha1.ReasonNoAliveBrokers}},
		{"a cluster whose brokers have not registered yet is not degraded", observation{DesiredReplicas: 3, StatefulSet: statefulSetWith(3, 2, settled)},
			want{"True", "False", "False", kafkav1alpha1.ReasonAsExpected}},
		{"a broker that refuses its data volume's mount is degraded, naming the option", observation{DesiredReplicas: 3, StatefulSet: statefulSetWith(3, 2, settled),
			MountRefused: mountRefusals([]kafkav1alpha1.BrokerRow{{ID: 1, MountRefused: "soft: a soft mount fails an fsync with EIO"}, {ID: 0}})},
			want{"True", "False", "True", kafkav1alpha1.ReasonMountRefused}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			tc.obs.Generation = 7
			r, p, d := readyCondition(tc.obs), progressingCondition(tc.obs), degradedCondition(tc.obs)
			got := want{string(r.Status), string(p.Status), string(d.Status), d.Reason}
			if got != tc.want {
				t.Fatalf("ready/progressing/degraded/reason: got %+v, want %+v (messages: %q %q %q)", got, tc.want, r.Message, p.Message, d.Message)
			}
			for _, c := range []metav1.Condition{r, p, d} {
				if c.ObservedGeneration != 7 || c.Reason == "" || c.Message == "" {
					t.Errorf("%s: want observedGeneration 7, a reason and a message, got %+v", c.Type, c)
				}
			}
		})
	}
}

func TestSecuredConditionNamesEveryOpenListener(t *testing.T) {
	scram := &kafkav1alpha1.ListenerAuthentication{Type: kafkav1alpha1.AuthenticationScramSHA512}
	mtls := &kafkav1alpha1.ListenerAuthentication{Type: kafkav1alpha1.AuthenticationTLS}
	plain := &kafkav1alpha1.ListenerAuthentication{Type: kafkav1alpha1.AuthenticationPlain}
	cases := []struct {
		rule      string
		listeners []kafkav1alpha1.Listener
		status    metav1.ConditionStatus
		reason    string
		mentions  []string
	}{
		{"the default plaintext listener is open", []kafkav1alpha1.Listener{{Name: "kafka", Port: 9092}},
			metav1.ConditionFalse, kafkav1alpha1.ReasonOpenListener, []string{"listener kafka lets anyone in unauthenticated"}},
		{"tls without authentication is still open", []kafkav1alpha1.Listener{{Name: "tls", Port: 9093, TLS: true}},
			metav1.ConditionFalse, kafkav1alpha1.ReasonOpenListener, []string{"listener tls lets anyone in"}},
		{"one open listener beside secured ones makes the cluster open, naming only it",
			[]kafkav1alpha1.Listener{{Name: "secure", TLS: true, Authentication: scram}, {Name: "plain", Port: 9092}},
			metav1.ConditionFalse, kafkav1alpha1.ReasonOpenListener, []string{"listener plain lets anyone in"}},
		{"plain authentication without tls takes passwords in the clear", []kafkav1alpha1.Listener{{Name: "pw", Authentication: plain}},
			metav1.ConditionFalse, kafkav1alpha1.ReasonOpenListener, []string{"listener pw takes passwords over plaintext"}},
		{"scram over tls and mutual tls are secured", []kafkav1alpha1.Listener{{Name: "a", TLS: true, Authentication: scram}, {Name: "b", TLS: true, Authentication: mtls}},
			metav1.ConditionTrue, kafkav1alpha1.ReasonAllListenersSecured, nil},
		{"scram without tls is secured and says the records travel unencrypted", []kafkav1alpha1.Listener{{Name: "s", Authentication: scram}},
			metav1.ConditionTrue, kafkav1alpha1.ReasonAllListenersSecured, []string{"listener s authenticates with SCRAM but carries records unencrypted"}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			c := securedCondition(4, tc.listeners)
			if c.Type != kafkav1alpha1.ConditionSecured || c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 4 || c.Message == "" {
				t.Fatalf("got %+v, want %s %s", c, tc.status, tc.reason)
			}
			for _, m := range tc.mentions {
				if !strings.Contains(c.Message, m) {
					t.Errorf("message %q does not say %q", c.Message, m)
				}
			}
			if strings.Contains(tc.rule, "naming only it") && strings.Contains(c.Message, "secure ") {
				t.Errorf("message %q names the secured listener", c.Message)
			}
		})
	}
}

func TestListenerStatuses(t *testing.T) {
	c := goldenCluster()
	c.Spec.Listeners = append(c.Spec.Listeners,
		kafkav1alpha1.Listener{Name: "np", Port: 9094, Type: kafkav1alpha1.ListenerNodePort},
		kafkav1alpha1.Listener{Name: "lb", Port: 9095, Type: kafkav1alpha1.ListenerLoadBalancer})
	svc := desiredBootstrapService(c)
	svc.Spec.Ports[0].NodePort = 30094 // the bootstrap Service carries the external listeners only

	got := listenerStatuses(c, svc)
	want := []string{"demo-bootstrap-internal.kafka.svc:9092", ":30094", ""}
	for i, w := range want {
		if got[i].Bootstrap != w || got[i].Name != c.Spec.Listeners[i].Name {
			t.Errorf("listener %d: got %+v, want bootstrap %q", i, got[i], w)
		}
	}

	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
	if got := listenerStatuses(c, svc)[2].Bootstrap; got != "203.0.113.7:9095" {
		t.Errorf("a provisioned load balancer: got %q", got)
	}
	if got := listenerStatuses(c, nil)[1].Bootstrap; got != "" {
		t.Errorf("no bootstrap Service yet: want no NodePort address, got %q", got)
	}
	if got := listenerStatuses(goldenCluster(), nil)[0].Bootstrap; got != "demo-bootstrap.kafka.svc:9092" {
		t.Errorf("a cluster of Internal listeners only: want its bootstrap Service c-bootstrap, got %q", got)
	}
}

func TestTheMountRefusedMessageNamesEachBrokerAndItsOption(t *testing.T) {
	msg := mountRefusedMessage(mountRefusals([]kafkav1alpha1.BrokerRow{
		{ID: 2, MountRefused: "vers=4.0: NFS older than 4.1"}, {ID: 0, MountRefused: "soft: a soft mount fails an fsync with EIO"}, {ID: 1}}))
	want := "broker 0 refuses its data volume's mount (soft: a soft mount fails an fsync with EIO); broker 2 refuses its data volume's mount (vers=4.0: NFS older than 4.1)"
	if !strings.HasPrefix(msg, want) {
		t.Fatalf("message %q, want it to start %q", msg, want)
	}
}
