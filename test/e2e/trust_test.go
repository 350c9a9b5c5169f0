package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/scheme"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// trustTopic is the topic the trust scenario checks the assignment of.
const trustTopic = "e2e-trust"

// 16. The trust boundary (docs/security.md, "Threat model"): with broker 1's own pod-bound
// token, writing broker 2's Lease is refused by the API server (the ValidatingAdmissionPolicy
// of config/admission), and so is every write its Role allows that would speak for another
// broker or another cluster; what it may still write about itself — a Lease announcing
// addresses that do not parse, a day-long lease duration, a claims digest — leaves the
// registry rows, the assignment, the coordinator epoch and recovery as they were, and each is
// an InvalidHeartbeat Warning. The NetworkPolicy is there (paddock dev does not enforce it: its
// pods share one network without a policy engine), and a namespace user granted Kubernetes'
// view or edit role reads, or writes, paddock's kinds.
func trustBoundary(ctx context.Context, t *testing.T, s *suite) {
	broker1 := brokerIdentity(t, s, 1)
	createTrustTopic(ctx, t, s)
	before := s.outcomes(ctx, t)
	t.Logf("outcomes before the hostile broker:\n%s", before)

	t.Run("broker 1's token cannot write broker 2's Lease", func(t *testing.T) { s.peerLeaseRefused(ctx, t, broker1) })
	t.Run("broker 1's token cannot write for another broker or another cluster", func(t *testing.T) { s.foreignWritesRefused(ctx, t, broker1) })
	t.Run("what broker 1 may still say about itself misleads no one", func(t *testing.T) {
		s.forgedOwnLease(ctx, t, broker1, before)
	})
	t.Run("the NetworkPolicy admits what the spec says", func(t *testing.T) { s.networkPolicyPresent(ctx, t) })
	t.Run("a namespace user granted view or edit reads or writes paddock's kinds", func(t *testing.T) { s.aggregatedRoles(ctx, t) })

	after := s.outcomes(ctx, t)
	t.Logf("outcomes after the hostile broker:\n%s", after)
	if after != before {
		t.Errorf("the hostile broker changed what the operator decided:\n--- before ---\n%s\n--- after ---\n%s", before, after)
	}
	if err := s.c.Delete(ctx, &kafkav1alpha1.KafkaTopic{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: trustTopic}}); err != nil {
		t.Error(err)
	}
}

// brokerIdentity is a client acting with broker id's real token: the one its process reads
// from its projected ServiceAccount volume.
func brokerIdentity(t *testing.T, s *suite, id int32) client.Client {
	t.Helper()
	cfg := tokenConfig(t, s.env, readPID(t, s.env, s.namespace, kafkav1alpha1.BrokerPodName(s.name, id)))
	return identityClient(t, cfg)
}

func identityClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	sc, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: sc})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// createTrustTopic creates a topic of three partitions and waits until each is led.
func createTrustTopic(ctx context.Context, t *testing.T, s *suite) {
	t.Helper()
	kt := &kafkav1alpha1.KafkaTopic{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: trustTopic},
		Spec: kafkav1alpha1.KafkaTopicSpec{Cluster: s.name, Partitions: 3}}
	if err := s.c.Create(ctx, kt); err != nil {
		t.Fatal(err)
	}
	testkit.Within(t, trustTopic+" led on every partition", testkit.Deadline, func() (bool, string) { return s.topicLed(ctx, trustTopic) })
}

// outcomes prints what the operator decided: the registry rows, each partition's leader and
// epoch, the coordinator epoch and sets, every broker's BrokerRecovery condition, and the
// broker pods (a force-deleted pod has a new uid).
func (s *suite) outcomes(ctx context.Context, t *testing.T) string {
	t.Helper()
	kc, err := s.cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintln(&b, "registry:")
	for _, r := range kc.Status.Brokers {
		fmt.Fprintf(&b, "  broker %d: %s %s %q epoch %d listeners %s\n", r.ID, r.State, r.Health, r.Reason, r.Epoch, kafkav1alpha1.FormatListeners(r.Listeners))
	}
	fmt.Fprintf(&b, "coordinator epoch %d for %+v\n", kc.Status.CoordinatorEpoch, ptr.Deref(kc.Status.CoordinatorBrokers, kafkav1alpha1.CoordinatorBrokers{}))
	kt := &kafkav1alpha1.KafkaTopic{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: trustTopic}, kt); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "assignment of %s:", trustTopic)
	for _, p := range kt.Status.Partitions {
		fmt.Fprintf(&b, " %d→%d@%d", p.Partition, p.Leader, p.LeaderEpoch)
	}
	fmt.Fprintln(&b)
	brokers, err := s.brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(&b, "recovery:")
	for id := range int32(3) {
		cond := "none"
		if c := meta.FindStatusCondition(brokers[id].Status.Conditions, kafkav1alpha1.ConditionBrokerRecovery); c != nil {
			cond = c.Reason
		}
		fmt.Fprintf(&b, " broker %d %s;", id, cond)
	}
	fmt.Fprintf(&b, "\npods: %v", s.podUIDs(ctx, t))
	return b.String()
}

func (s *suite) peerLeaseRefused(ctx context.Context, t *testing.T, broker1 client.Client) {
	// Broker 2 renews its Lease every second: an update from a read it renewed since is a
	// Conflict, which the API server finds before admission runs. Read again and retry.
	var err error
	for range 10 {
		peer := &coordinationv1.Lease{}
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: kafkav1alpha1.LeaseName(s.name, 2)}, peer); err != nil {
			t.Fatal(err)
		}
		peer.Spec.RenewTime = ptr.To(metav1.NowMicro())
		if err = broker1.Update(ctx, peer); !apierrors.IsConflict(err) {
			break
		}
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may write only its own heartbeat Lease") {
		t.Fatalf("broker 1 renews broker 2's Lease: err %v, want Forbidden by the broker-writes policy", err)
	}
	t.Logf("refused: %v", err)
	// Control: its own Lease is its to write (a dry run, so its heartbeat is not disturbed).
	own := &coordinationv1.Lease{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: kafkav1alpha1.LeaseName(s.name, 1)}, own); err != nil {
		t.Fatal(err)
	}
	if err := broker1.Update(ctx, own, client.DryRunAll); err != nil {
		t.Fatalf("broker 1 writes its own Lease: %v", err)
	}
	testkit.Within(t, "the refusal in the audit log", testkit.Deadline, func() (bool, string) {
		events, err := s.env.AuditEvents()
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range events {
			if ev.ObjectRef != nil && ev.ObjectRef.Resource == "leases" && ev.ObjectRef.Name == kafkav1alpha1.LeaseName(s.name, 2) && ev.Verb == "update" &&
				ev.PodName() == kafkav1alpha1.BrokerPodName(s.name, 1) && ev.ResponseStatus != nil && ev.ResponseStatus.Code == 403 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no 403 for broker 1's update of %s among %d events", kafkav1alpha1.LeaseName(s.name, 2), len(events))
	})
}

// foreignWritesRefused tries, with broker 1's token, every write its Role allows that would
// speak for someone else, and the writes its Role never allowed.
func (s *suite) foreignWritesRefused(ctx context.Context, t *testing.T, broker1 client.Client) {
	phantom := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: kafkav1alpha1.LeaseName(s.name, 9),
		Labels: kafkav1alpha1.BrokerLabels(s.name, 9)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("e2e-broker-9_x"), LeaseDurationSeconds: ptr.To[int32](6), RenewTime: ptr.To(metav1.NowMicro())}}
	foreign := &kafkav1alpha1.KafkaTopic{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: "other.orders", Labels: kafkav1alpha1.ClusterLabels("other")},
		Spec: kafkav1alpha1.KafkaTopicSpec{Cluster: "other", TopicName: "orders", Partitions: 1}}
	if err := s.c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.c.Delete(context.Background(), foreign) })
	status := &kafkav1alpha1.Broker{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: kafkav1alpha1.BrokerObjectName(s.name, 2)}, status); err != nil {
		t.Fatal(err)
	}
	status.Status.Health = kafkav1alpha1.BrokerDead
	clusterPatch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"coordinatorEpoch":1}}`))
	kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name}}
	for _, w := range []struct {
		what string
		err  error
	}{
		{"register a broker that does not exist (create Lease e2e-broker-9)", broker1.Create(ctx, phantom)},
		{"create a KafkaTopic of another cluster", broker1.Create(ctx, &kafkav1alpha1.KafkaTopic{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: "other.payments"},
			Spec: kafkav1alpha1.KafkaTopicSpec{Cluster: "other", Partitions: 1}})},
		{"grow another cluster's KafkaTopic", updateFresh(ctx, s.c, broker1, foreign, func(kt *kafkav1alpha1.KafkaTopic) { kt.Spec.Partitions = 5 })},
		{"delete another cluster's KafkaTopic", broker1.Delete(ctx, foreign)},
		{"say a peer is dead on its Broker object", broker1.Status().Update(ctx, status)},
		{"rewrite the cluster's coordinator epoch", broker1.Status().Patch(ctx, kc, clusterPatch)},
	} {
		if !apierrors.IsForbidden(w.err) {
			t.Errorf("broker 1 may %s: err %v, want Forbidden", w.what, w.err)
			continue
		}
		t.Logf("refused: %s: %v", w.what, w.err)
	}
}

// updateFresh reads obj with reader, changes it and updates it with writer, again while the
// update conflicts with another writer's: the answer that is not a conflict.
func updateFresh[T client.Object](ctx context.Context, reader, writer client.Client, obj T, change func(T)) error {
	for {
		if err := reader.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		if err := writer.Update(ctx, obj); !apierrors.IsConflict(err) || ctx.Err() != nil {
			return err
		}
	}
}

// forgedOwnLease has broker 1's token write, on its own Lease and interleaved with its real
// beats, what a broken or lying broker could: listeners that do not parse, a day-long
// duration, claims digests. After each, it waits for the registry's or recovery's Warning and
// checks that the outcomes did not move.
func (s *suite) forgedOwnLease(ctx context.Context, t *testing.T, broker1 client.Client, before string) {
	leaseName := kafkav1alpha1.LeaseName(s.name, 1)
	brokerName := kafkav1alpha1.BrokerObjectName(s.name, 1)
	long := strings.Repeat("x", 300) + ".example.com"
	for _, forged := range []struct {
		what    string
		edit    func(*coordinationv1.Lease)
		warning string
	}{
		{"a host longer than any DNS name", func(l *coordinationv1.Lease) {
			l.Annotations[kafkav1alpha1.AnnotationListeners] = "kafka=" + long + ":9092"
		}, "more than 253"},
		{"a listener the cluster does not have", func(l *coordinationv1.Lease) {
			l.Annotations[kafkav1alpha1.AnnotationListeners] += ",admin=attacker.example.com:9999"
		}, `listener "admin" is not one of the cluster's`},
		{"a port out of range", func(l *coordinationv1.Lease) {
			l.Annotations[kafkav1alpha1.AnnotationListeners] = "kafka=attacker.example.com:70000"
		}, "not in 1..65535"},
		{"a lease duration of a day", func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To[int32](86400) },
			"longer than the cluster's session timeout 6s"},
		{"a claims digest of more partitions than the cluster has", func(l *coordinationv1.Lease) {
			l.Annotations[kafkav1alpha1.AnnotationClaimed] = "100000/0123456789abcdef"
		}, "claims 100000 partitions"},
		{"something that is no claims digest", func(l *coordinationv1.Lease) {
			l.Annotations[kafkav1alpha1.AnnotationClaimed] = "all of them"
		}, "not <count>/<digest>"},
	} {
		started := time.Now()
		testkit.Within(t, "broker 1's forged Lease ("+forged.what+") written and warned about", testkit.Deadline, func() (bool, string) {
			if err := forgeOwnLease(ctx, s, broker1, leaseName, forged.edit); err != nil {
				return false, err.Error()
			}
			notes, err := s.warnings(ctx, brokerName)
			if err != nil {
				return false, err.Error()
			}
			return slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, forged.warning) }),
				fmt.Sprintf("warnings on %s: %q", brokerName, notes)
		})
		t.Logf("forged %s: warned within %s", forged.what, time.Since(started).Round(time.Millisecond))
		// Keep the forgery up against the broker's own beats for a while, looking each time.
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			_ = forgeOwnLease(ctx, s, broker1, leaseName, forged.edit) // a conflict with a beat: next round
			if now := s.outcomes(ctx, t); now != before {
				t.Fatalf("while broker 1 forged %s the outcomes moved:\n--- before ---\n%s\n--- now ---\n%s", forged.what, before, now)
			}
		}
	}
	testkit.Within(t, "three healthy brokers after the forgeries", 3*time.Minute, func() (bool, string) { return s.healthy(ctx, 3) })
}

// forgeOwnLease applies edit to the current Lease name and writes it with broker's token.
func forgeOwnLease(ctx context.Context, s *suite, broker client.Client, name string, edit func(*coordinationv1.Lease)) error {
	l := &coordinationv1.Lease{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, l); err != nil {
		return err
	}
	edit(l)
	return broker.Update(ctx, l) // a conflict with the broker's own beat is tried again
}

// warnings is the notes of the Warning Events about object name, newest series included.
func (s *suite) warnings(ctx context.Context, name string) ([]string, error) {
	list := &eventsv1.EventList{}
	if err := s.c.List(ctx, list, client.InNamespace(s.namespace)); err != nil {
		return nil, err
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Type == "Warning" && e.Reason == kafkav1alpha1.EventInvalidHeartbeat {
			notes = append(notes, e.Note)
		}
	}
	return notes, nil
}

// networkPolicyPresent checks the cluster's NetworkPolicy is there with one rule per
// listener besides the brokers' own; paddock dev enforces none, so its rules are pinned by
// controllers/kafkacluster's TestTheNetworkPolicyAdmitsEachListenerFromWhereTheSpecSays.
func (s *suite) networkPolicyPresent(ctx context.Context, t *testing.T) {
	np := &networkingv1.NetworkPolicy{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: kafkav1alpha1.StatefulSetName(s.name)}, np); err != nil {
		t.Fatal(err)
	}
	kc, err := s.cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ports []string
	for _, r := range np.Spec.Ingress {
		for _, p := range r.Ports {
			ports = append(ports, p.Port.String())
		}
	}
	var want []string
	for _, l := range kc.Spec.Listeners {
		want = append(want, fmt.Sprint(l.Port))
	}
	if len(np.Spec.Ingress) != len(kc.Spec.Listeners)+1 || !slices.Equal(ports, want) {
		t.Errorf("NetworkPolicy %s: %d rules on ports %v, want the brokers' rule and one per listener %v", np.Name, len(np.Spec.Ingress), ports, want)
	}
	t.Logf("NetworkPolicy %s present (paddock dev does not enforce NetworkPolicies): rules on ports %v and one for the brokers", np.Name, ports)
}

// aggregatedRoles binds Kubernetes' view and edit ClusterRoles to two users in the namespace:
// paddock's aggregated roles (config/rbac) give the viewer its kinds to read and the editor
// KafkaClusters and KafkaTopics to write, and neither the operator's Broker objects.
func (s *suite) aggregatedRoles(ctx context.Context, t *testing.T) {
	for user, role := range map[string]string{"viewer": "view", "editor": "edit"} {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: "e2e-" + user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
		if err := s.c.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.c.Delete(context.Background(), rb) })
	}
	as := func(user string) client.Client {
		cfg := s.env.RestConfig()
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		return identityClient(t, cfg)
	}
	viewer, editor := as("viewer"), as("editor")
	topic := &kafkav1alpha1.KafkaTopic{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: "e2e-by-editor"},
		Spec: kafkav1alpha1.KafkaTopicSpec{Cluster: s.name, Partitions: 1}}
	// kube-controller-manager aggregates the roles: wait for it.
	testkit.Within(t, "the viewer reads KafkaClusters, KafkaTopics and Brokers, the editor creates a KafkaTopic", testkit.Deadline, func() (bool, string) {
		for _, list := range []client.ObjectList{&kafkav1alpha1.KafkaClusterList{}, &kafkav1alpha1.KafkaTopicList{}, &kafkav1alpha1.BrokerList{}} {
			if err := viewer.List(ctx, list, client.InNamespace(s.namespace)); err != nil {
				return false, err.Error()
			}
		}
		if err := editor.Create(ctx, topic.DeepCopy(), client.DryRunAll); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	b := &kafkav1alpha1.Broker{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: kafkav1alpha1.BrokerObjectName(s.name, 0)}, b); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"the viewer creates a KafkaTopic":         viewer.Create(ctx, topic.DeepCopy(), client.DryRunAll),
		"the editor deletes a Broker object":      editor.Delete(ctx, b, client.DryRunAll),
		"the editor writes a Broker's status":     editor.Status().Update(ctx, b, client.DryRunAll),
		"the editor writes a KafkaTopic's status": editor.Status().Update(ctx, topic, client.DryRunAll),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: err %v, want Forbidden", what, err)
		}
	}
}
