package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// 8. Identities: every broker and the operator talk to the apiserver as their own
// ServiceAccounts, with tokens bound to their pods, and hold no admin credential; what their
// roles do not grant is refused.
func identities(ctx context.Context, t *testing.T, s *suite) {
	mgr, err := s.env.ManagerPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	managerSA, err := s.env.ManagerServiceAccount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	managerUser := serviceAccountUser(managerSA.Namespace, managerSA.Name)
	brokerUser := serviceAccountUser(s.namespace, kafkav1alpha1.StatefulSetName(s.name))

	t.Run("no broker or manager process can reach the admin credentials", func(t *testing.T) {
		pids := map[string]int{mgr.Namespace + "/" + mgr.Name: readPID(t, s.env, mgr.Namespace, mgr.Name)}
		for id := range int32(3) {
			pod := kafkav1alpha1.BrokerPodName(s.name, id)
			pids[s.namespace+"/"+pod] = readPID(t, s.env, s.namespace, pod)
		}
		for pod, pid := range pids {
			found, err := s.env.AdminCredentialExposure(pid)
			if err != nil {
				t.Fatal(err)
			}
			if len(found) > 0 {
				t.Errorf("%s (pid %d) can reach the admin credentials: %q", pod, pid, found)
			}
		}
	})

	t.Run("a broker is refused what its Role does not grant", func(t *testing.T) {
		pod := kafkav1alpha1.BrokerPodName(s.name, 0)
		broker := tokenClient(t, s.env, readPID(t, s.env, s.namespace, pod))
		leases := broker.CoordinationV1().Leases(s.namespace)
		// Control: its own Lease is its to read, so a refusal below is the Role's doing.
		if _, err := leases.Get(ctx, kafkav1alpha1.LeaseName(s.name, 0), metav1.GetOptions{}); err != nil {
			t.Fatalf("broker 0 reads its own Lease: %v", err)
		}
		other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: kafkav1alpha1.LeaseName("other", 0)},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("other-broker-0_x")}}
		if err := s.c.Create(ctx, other); err != nil {
			t.Fatal(err)
		}
		other.Spec.HolderIdentity = ptr.To(pod)
		_, updateErr := leases.Update(ctx, other, metav1.UpdateOptions{})
		_, getErr := leases.Get(ctx, other.Name, metav1.GetOptions{})
		_, listErr := broker.CoreV1().Secrets(s.namespace).List(ctx, metav1.ListOptions{})
		_, secretErr := broker.CoreV1().Secrets(s.namespace).Get(ctx, "anything", metav1.GetOptions{})
		_, otherNSErr := broker.CoordinationV1().Leases(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		for what, err := range map[string]error{
			"update another cluster's Lease": updateErr, "read another cluster's Lease": getErr,
			"list Secrets": listErr, "read a Secret": secretErr, "list Leases in another namespace": otherNSErr,
		} {
			if !apierrors.IsForbidden(err) {
				t.Errorf("broker 0 may %s: err %v, want Forbidden", what, err)
			}
		}
	})

	t.Run("the operator is refused what config/rbac does not grant", func(t *testing.T) {
		manager := tokenClient(t, s.env, readPID(t, s.env, mgr.Namespace, mgr.Name))
		// Control: reading Nodes is granted, so a refusal below is the ClusterRole's doing.
		if _, err := manager.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("the manager lists Nodes: %v", err)
		}
		_, patchNodeErr := manager.CoreV1().Nodes().Patch(ctx, s.env.Nodes()[0], "application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
		_, secretsErr := manager.CoreV1().Secrets(s.namespace).List(ctx, metav1.ListOptions{})
		// Deleting a broker pod is granted (node-loss recovery force-deletes one); creating
		// one is not: the StatefulSet controller does that.
		if err := manager.CoreV1().Pods(s.namespace).Delete(ctx, kafkav1alpha1.BrokerPodName(s.name, 0), metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("the manager deletes a broker Pod (dry run), as node-loss recovery does: %v", err)
		}
		_, podErr := manager.CoreV1().Pods(s.namespace).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		_, cmErr := manager.CoreV1().ConfigMaps(s.namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		for what, err := range map[string]error{
			"patch a Node": patchNodeErr, "list Secrets": secretsErr, "create a Pod": podErr, "create a ConfigMap": cmErr,
		} {
			if !apierrors.IsForbidden(err) {
				t.Errorf("the manager may %s: err %v, want Forbidden", what, err)
			}
		}
	})

	t.Run("the audit log shows every broker request as the broker's ServiceAccount and operator writes as the manager's", func(t *testing.T) {
		var detail string
		testkit.EventuallyDetail(t, "each broker's Lease renewals in the audit log", func() (bool, string) {
			events, err := s.env.AuditEvents()
			if err != nil {
				return false, err.Error()
			}
			ok, why := auditShowsIdentities(events, s, brokerUser, managerUser)
			detail = why
			return ok, why
		})
		t.Log(detail)
	})
}

// auditShowsIdentities checks the audit log: every heartbeat Lease write of the cluster is
// made by the broker ServiceAccount with a token bound to that broker's own pod, and there
// is at least one per broker; every write the broker ServiceAccount got through is to its
// Leases or KafkaTopics (all its Role and the broker-writes policy let through); every write
// to the cluster's status, Broker objects and NetworkPolicy is made by the manager's
// ServiceAccount; and nothing the paddock binary ran (user agent "paddock/…") used the admin
// identity.
func auditShowsIdentities(events []devcluster.AuditEvent, s *suite, brokerUser, managerUser string) (bool, string) {
	renewals := map[string]int{}
	operatorWrites, policyWrites := 0, 0
	for _, ev := range events {
		if strings.HasPrefix(ev.UserAgent, "paddock/") && !strings.HasPrefix(ev.User.Username, "system:serviceaccount:") {
			return false, fmt.Sprintf("the paddock binary made a %s of %+v as %s", ev.Verb, ev.ObjectRef, ev.User.Username)
		}
		ref := ev.ObjectRef
		if ref == nil || ref.Namespace != s.namespace || !isWrite(ev.Verb) {
			continue
		}
		if ev.User.Username == brokerUser && admitted(ev) && ref.Resource != "leases" && ref.Resource != "kafkatopics" {
			return false, fmt.Sprintf("the broker ServiceAccount made a %s of %+v", ev.Verb, ref)
		}
		switch {
		case ref.Resource == "networkpolicies":
			if ev.User.Username != managerUser {
				return false, fmt.Sprintf("NetworkPolicy %s %s by %s, want %s", ref.Name, ev.Verb, ev.User.Username, managerUser)
			}
			policyWrites++
		case ref.Resource == "leases" && strings.HasPrefix(ref.Name, kafkav1alpha1.StatefulSetName(s.name)+"-"):
			if ev.User.Username != brokerUser || ev.PodName() != ref.Name {
				return false, fmt.Sprintf("Lease %s %s by %s (pod %q), want %s from pod %s",
					ref.Name, ev.Verb, ev.User.Username, ev.PodName(), brokerUser, ref.Name)
			}
			renewals[ref.Name]++
		case ref.APIGroup == kafkav1alpha1.GroupVersion.Group && (ref.Subresource == "status" || ref.Resource == "brokers"):
			if ev.User.Username != managerUser {
				return false, fmt.Sprintf("%s %s/%s %s by %s, want %s", ref.Resource, ref.Name, ref.Subresource, ev.Verb, ev.User.Username, managerUser)
			}
			operatorWrites++
		}
	}
	for id := range int32(3) {
		if renewals[kafkav1alpha1.LeaseName(s.name, id)] == 0 {
			return false, fmt.Sprintf("no renewal of %s yet (%v)", kafkav1alpha1.LeaseName(s.name, id), renewals)
		}
	}
	if operatorWrites == 0 || policyWrites == 0 {
		return false, fmt.Sprintf("%d registry and %d NetworkPolicy writes by the operator yet", operatorWrites, policyWrites)
	}
	return true, fmt.Sprintf("%d events; Lease writes by %s: %v; %d registry and %d NetworkPolicy writes by %s",
		len(events), brokerUser, renewals, operatorWrites, policyWrites, managerUser)
}

// admitted reports whether the API server let the request through (a 2xx answer).
func admitted(ev devcluster.AuditEvent) bool {
	return ev.ResponseStatus != nil && ev.ResponseStatus.Code >= 200 && ev.ResponseStatus.Code < 300
}

func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

func serviceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// tokenClient connects with the ServiceAccount token the process pid holds at the in-cluster
// path, as that process's own in-cluster config does.
func tokenClient(t *testing.T, env *devcluster.Env, pid int) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(tokenConfig(t, env, pid))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// tokenConfig is the rest config of the ServiceAccount token the process pid holds.
func tokenConfig(t *testing.T, env *devcluster.Env, pid int) *rest.Config {
	t.Helper()
	token, err := os.ReadFile(devcluster.ProcessPath(pid, filepath.Join(devcluster.ServiceAccountDir, "token")))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(devcluster.ProcessPath(pid, filepath.Join(devcluster.ServiceAccountDir, "ca.crt")))
	if err != nil {
		t.Fatal(err)
	}
	return &rest.Config{Host: env.APIServerHost(), BearerToken: string(token), TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}
