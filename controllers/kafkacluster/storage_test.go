package kafkacluster

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

func TestSharedStorageProblem(t *testing.T) {
	for _, tc := range []struct {
		rule     string
		replicas int32
		mode     corev1.PersistentVolumeAccessMode
		storage  kafkav1alpha1.StorageType
		refused  bool
	}{
		{"ReadWriteMany serves any number of brokers", 3, corev1.ReadWriteMany, kafkav1alpha1.StoragePersistentClaim, false},
		{"ReadWriteOnce with three brokers is refused", 3, corev1.ReadWriteOnce, kafkav1alpha1.StoragePersistentClaim, true},
		{"ReadWriteOncePod with two brokers is refused", 2, corev1.ReadWriteOncePod, kafkav1alpha1.StoragePersistentClaim, true},
		{"ReadWriteOnce with one broker is accepted", 1, corev1.ReadWriteOnce, kafkav1alpha1.StoragePersistentClaim, false},
		{"Ephemeral storage has no claim to share", 3, corev1.ReadWriteOnce, kafkav1alpha1.StorageEphemeral, false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			c := goldenCluster()
			c.Spec.Replicas, c.Spec.Storage.AccessMode, c.Spec.Storage.Type = tc.replicas, tc.mode, tc.storage
			p := sharedStorageProblem(c)
			if (p != nil) != tc.refused {
				t.Fatalf("refused = %v, want %v (%v)", p != nil, tc.refused, p)
			}
			if p != nil && (p.Reason != kafkav1alpha1.ReasonStorageNotShared || !strings.Contains(p.Message, "ReadWriteMany")) {
				t.Fatalf("want StorageNotShared saying to use ReadWriteMany, got %v", p)
			}
		})
	}
}

func TestPendingClaimProblem(t *testing.T) {
	created := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	claim := desiredDataClaim(goldenCluster())
	claim.CreationTimestamp = metav1.NewTime(created)
	claim.Status.Phase = corev1.ClaimPending
	bound := claim.DeepCopy()
	bound.Status.Phase = corev1.ClaimBound
	event := func(typ, reason, message string, at time.Duration) corev1.Event {
		return corev1.Event{Type: typ, Reason: reason, Message: message, LastTimestamp: metav1.NewTime(created.Add(at))}
	}
	noClass := event(corev1.EventTypeWarning, "ProvisioningFailed", `storageclass.storage.k8s.io "nfs" not found`, 2*time.Second)
	waiting := event(corev1.EventTypeNormal, "ExternalProvisioning", "Waiting for a volume to be created by the external provisioner 'nfs.csi.k8s.io'", time.Second)
	later := event(corev1.EventTypeNormal, "ExternalProvisioning", "Waiting again", 30*time.Second)

	for _, tc := range []struct {
		rule   string
		claim  *corev1.PersistentVolumeClaim
		events []corev1.Event
		after  time.Duration
		want   string // substring of the Degraded message; "" means no problem
	}{
		{"a bound claim is no problem", bound, []corev1.Event{noClass}, time.Hour, ""},
		{"no claim is no problem", nil, nil, time.Hour, ""},
		{"a Warning event makes a Pending claim Degraded at once, with the provider's words", claim, []corev1.Event{waiting, noClass}, 3 * time.Second, `ProvisioningFailed: storageclass.storage.k8s.io "nfs" not found`},
		{"Normal events only: no problem within the grace", claim, []corev1.Event{waiting}, 10 * time.Second, ""},
		{"Normal events only: Degraded after the grace, with the latest event", claim, []corev1.Event{later, waiting}, 2 * time.Minute, "ExternalProvisioning: Waiting again"},
		{"no event at all: Degraded after the grace, saying so", claim, nil, 2 * time.Minute, "no event of the claim says why"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			p := pendingClaimProblem(tc.claim, tc.events, created.Add(tc.after))
			switch {
			case tc.want == "" && p != nil:
				t.Fatalf("want no problem, got %v", p)
			case tc.want != "" && p == nil:
				t.Fatalf("want DataClaimPending with %q, got none", tc.want)
			case tc.want != "" && (p.Reason != kafkav1alpha1.ReasonDataClaimPending || !strings.Contains(p.Message, tc.want)):
				t.Fatalf("want DataClaimPending with %q, got %v", tc.want, p)
			}
		})
	}
}

func TestClaimExpanding(t *testing.T) {
	claim := desiredDataClaim(goldenCluster())
	claim.Status.Phase = corev1.ClaimBound
	claim.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("20Gi")
	claim.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
	if got := claimExpanding(claim); !strings.Contains(got, "from 10Gi to 20Gi") {
		t.Fatalf("a bound claim smaller than it asks: %q, want it reported as expanding", got)
	}
	claim.Status.Capacity[corev1.ResourceStorage] = resource.MustParse("20Gi")
	if got := claimExpanding(claim); got != "" {
		t.Fatalf("an expanded claim: %q, want nothing", got)
	}
}
