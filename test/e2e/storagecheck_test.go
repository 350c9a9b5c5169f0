package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// 18. The storage check (docs/storage.md, "The storage check"): the cluster's shared claim is
// certified by a real Job — two pods that ran on two different dev nodes, the peer serving its
// view of the claim, the checker racing it — and StorageVerified is True naming both nodes
// and every property; nothing of the check is left on the volume.
func storageVerified(ctx context.Context, t *testing.T, s *suite, applied time.Time) {
	var cond *metav1.Condition
	testkit.Within(t, "StorageVerified True", 5*time.Minute, func() (bool, string) {
		kc, err := s.cluster(ctx)
		if err != nil {
			return false, err.Error()
		}
		cond = meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionStorageVerified)
		if cond == nil {
			return false, "no StorageVerified condition"
		}
		if cond.Status == metav1.ConditionFalse {
			t.Fatalf("StorageVerified False %s: %s", cond.Reason, cond.Message)
		}
		return cond.Status == metav1.ConditionTrue, fmt.Sprintf("%s %s: %s", cond.Status, cond.Reason, cond.Message)
	})
	measure(t, "18 storage verified", "apply → StorageVerified True (Job of two pods on two nodes)", time.Since(applied))
	t.Logf("StorageVerified: %s", cond.Message)

	var pods corev1.PodList
	if err := s.c.List(ctx, &pods, client.InNamespace(s.namespace), client.MatchingLabels{kafkav1alpha1.LabelStorageCheck: s.name}); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]string{}
	for _, p := range pods.Items {
		idx := p.Annotations["batch.kubernetes.io/job-completion-index"]
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("check pod %s (index %s) is %s, want Succeeded", p.Name, idx, p.Status.Phase)
		}
		nodes[idx] = p.Spec.NodeName
		for _, cs := range p.Status.ContainerStatuses {
			if term := cs.State.Terminated; term != nil && idx == "0" {
				t.Logf("the checker's termination message:\n%s", term.Message)
				if results, ok := kafkav1alpha1.ParseStorageCheckResults(term.Message); !ok || len(results) < 7 {
					t.Errorf("the checker's message holds %d results", len(results))
				}
			}
		}
	}
	if len(nodes) != 2 || nodes["0"] == "" || nodes["1"] == "" || nodes["0"] == nodes["1"] {
		t.Fatalf("check pods ran on %v, want indexes 0 and 1 on two different nodes", nodes)
	}
	for _, n := range nodes {
		if !strings.Contains(cond.Message, n) {
			t.Errorf("StorageVerified does not name node %s: %s", n, cond.Message)
		}
	}
}
