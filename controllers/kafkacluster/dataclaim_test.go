package kafkacluster

import (
	"crypto/rand"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// Ids the data-claim tables use: goldenCluster's own, and another cluster's.
const (
	ownID   = "cZ4mKx7zQd2cWq0b3nT9fA"
	otherID = "AAECAwQFBgcICQoLDA0ODw"
)

// retainedClaim is the claim goldenCluster's builder makes with deleteClaim false, carrying
// the cluster id id ("" for none): what an earlier cluster of the same name leaves behind.
func retainedClaim(id string) *corev1.PersistentVolumeClaim {
	c := goldenCluster()
	c.Status.ClusterID = id
	return desiredDataClaim(c)
}

// ownedClaim is the claim goldenCluster's builder makes with deleteClaim true.
func ownedClaim() *corev1.PersistentVolumeClaim { return desiredDataClaim(goldenDeleteClaimCluster()) }

func TestDataClaimVerdict(t *testing.T) {
	withStatusID := func(id string) func(*kafkav1alpha1.KafkaCluster) {
		return func(c *kafkav1alpha1.KafkaCluster) { c.Status.ClusterID = id }
	}
	noOp := func(*kafkav1alpha1.KafkaCluster) {}
	unlabelled := retainedClaim(ownID)
	unlabelled.Labels = nil
	otherCluster := retainedClaim(ownID)
	otherCluster.Labels[kafkav1alpha1.LabelCluster] = "other"
	ownedNoAnnotation := ownedClaim()
	ownedNoAnnotation.Annotations = nil
	ownedWrongAnnotation := ownedClaim()
	ownedWrongAnnotation.Annotations[kafkav1alpha1.AnnotationClusterID] = otherID
	earlier := ownedClaim()
	earlier.OwnerReferences[0].UID = "11111111-2222-3333-4444-555555555555"
	byOther := retainedClaim(ownID)
	byOther.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "u", Controller: ptr.To(true)}}
	mereOwner := retainedClaim(ownID)
	mereOwner.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: "u"}}
	ephemeral := func(c *kafkav1alpha1.KafkaCluster) { c.Spec.Storage.Type = kafkav1alpha1.StorageEphemeral }

	cases := []struct {
		rule    string
		mutate  func(*kafkav1alpha1.KafkaCluster)
		claim   *corev1.PersistentVolumeClaim
		wantID  string
		refusal string // reason, "" when the claim may be used
		message string // substring of the refusal's message
	}{
		{"a cluster with no claim yet may create one", noOp, nil, "", "", ""},
		{"an Ephemeral cluster ignores any claim of its name", ephemeral, unlabelled, "", "", ""},
		{"a claim this cluster controls is its own, with the id it carries", noOp, ownedClaim(), ownID, "", ""},
		{"a claim this cluster controls from before the annotation existed is its own, with no id", withStatusID(ownID), ownedNoAnnotation, "", "", ""},
		{"a claim this cluster controls is its own even with a wrong id (the apply puts status.clusterID back)", withStatusID(ownID), ownedWrongAnnotation, otherID, "", ""},
		{"a retained claim is adopted by a new cluster of its name, with its id", withStatusID(""), retainedClaim(ownID), ownID, "", ""},
		{"a retained claim carrying this cluster's own id is its own", withStatusID(ownID), retainedClaim(ownID), ownID, "", ""},
		{"a non-controller owner reference does not stop an adoption", withStatusID(""), mereOwner, ownID, "", ""},
		{"a claim carrying another cluster's id is refused", withStatusID(ownID), retainedClaim(otherID), "",
			kafkav1alpha1.ReasonDataClaimOfAnotherCluster, "holds the data of cluster id " + otherID + ", and this cluster's id is " + ownID},
		{"a claim without paddock's labels is foreign", withStatusID(""), unlabelled, "",
			kafkav1alpha1.ReasonDataClaimForeign, "paddock did not make it for this cluster"},
		{"a claim labelled for another cluster is foreign", withStatusID(""), otherCluster, "",
			kafkav1alpha1.ReasonDataClaimForeign, "kafka.paddock.dev/cluster=demo"},
		{"a paddock claim without a cluster id is foreign (whose data it holds is unknown)", withStatusID(""), retainedClaim(""), "",
			kafkav1alpha1.ReasonDataClaimForeign, "no valid kafka.paddock.dev/cluster-id annotation"},
		{"a cluster-id annotation that is no cluster id is foreign", withStatusID(""), withAnnotation(retainedClaim(""), "../../etc"), "",
			kafkav1alpha1.ReasonDataClaimForeign, `got "../../etc"`},
		{"the claim of an earlier cluster of this name with deleteClaim is foreign until it is garbage-collected", withStatusID(""), earlier, "",
			kafkav1alpha1.ReasonDataClaimForeign, "belongs to an earlier KafkaCluster demo"},
		{"a claim another object controls is foreign", withStatusID(""), byOther, "",
			kafkav1alpha1.ReasonDataClaimForeign, "controlled by StatefulSet db"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			c := goldenCluster()
			tc.mutate(c)
			id, p := dataClaimVerdict(c, tc.claim)
			switch {
			case tc.refusal == "" && p != nil:
				t.Fatalf("want the claim accepted, got %v", p)
			case tc.refusal != "" && p == nil:
				t.Fatalf("want %s, got the claim accepted with id %q", tc.refusal, id)
			case tc.refusal != "" && (p.Reason != tc.refusal || !strings.Contains(p.Message, tc.message)):
				t.Fatalf("want %s with %q, got %v", tc.refusal, tc.message, p)
			case id != tc.wantID:
				t.Fatalf("want cluster id %q, got %q", tc.wantID, id)
			}
		})
	}
}

// withAnnotation sets claim's cluster-id annotation to id.
func withAnnotation(claim *corev1.PersistentVolumeClaim, id string) *corev1.PersistentVolumeClaim {
	claim.Annotations = map[string]string{kafkav1alpha1.AnnotationClusterID: id}
	return claim
}

func TestEveryMintedClusterIDCanBeAdopted(t *testing.T) {
	for range 100 {
		id, err := newClusterID(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if !isClusterID(id) {
			t.Fatalf("minted %q, which an adoption would refuse", id)
		}
	}
	for _, bad := range []string{"", "short", ownID + "A", "cZ4mKx7zQd2cWq0b3nT9f=", "cZ4mKx7zQd2cWq0b3nT9f/"} {
		if isClusterID(bad) {
			t.Fatalf("%q accepted as a cluster id", bad)
		}
	}
}

func TestDataClaimEvent(t *testing.T) {
	retain, own := goldenCluster(), goldenDeleteClaimCluster()
	ephemeral := goldenEphemeralCluster()
	cases := []struct {
		rule    string
		cluster *kafkav1alpha1.KafkaCluster
		before  *corev1.PersistentVolumeClaim
		adopted bool
		want    string // reason, "" for no Event
		note    string // substring of the note
	}{
		{"creating the claim by default says it outlives the cluster", retain, nil, false,
			kafkav1alpha1.EventDataClaimRetained, "retained, with its data, when this cluster is deleted (spec.storage.deleteClaim is false)"},
		{"creating the claim with deleteClaim says it is deleted with the cluster", own, nil, false,
			kafkav1alpha1.EventDataClaimOwned, "deleted, with its data, when this cluster is deleted"},
		{"removing the owner reference says the claim outlives the cluster", retain, ownedClaim(), false,
			kafkav1alpha1.EventDataClaimRetained, "Claim demo-data has no owner"},
		{"adding the owner reference says the claim is deleted with the cluster", own, retainedClaim(ownID), false,
			kafkav1alpha1.EventDataClaimOwned, "Claim demo-data is owned by this cluster"},
		{"a retained claim that stays retained says nothing", retain, retainedClaim(ownID), false, "", ""},
		{"an owned claim that stays owned says nothing", own, ownedClaim(), false, "", ""},
		{"adopting a retained claim names the id and the claim's fate", retain, retainedClaim(ownID), true,
			kafkav1alpha1.EventDataClaimAdopted, "Adopted the existing claim demo-data and its cluster id " + ownID + "; it is retained"},
		{"adopting into ownership says the claim is now deleted with the cluster", own, retainedClaim(ownID), true,
			kafkav1alpha1.EventDataClaimAdopted, "; it is deleted, with its data"},
		{"Ephemeral storage has no claim to talk about", ephemeral, nil, false, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			reason, action, note := dataClaimEvent(tc.cluster, tc.before, tc.adopted)
			if reason != tc.want || !strings.Contains(note, tc.note) {
				t.Fatalf("want %q with %q, got %q: %q", tc.want, tc.note, reason, note)
			}
			if reason != "" && action == "" {
				t.Fatal("an Event needs an action (events.k8s.io requires one)")
			}
		})
	}
}

func TestStorageChangeOfARetainedClaim(t *testing.T) {
	claim := retainedClaim(ownID)
	if p := storageChange(goldenCluster().Spec.Storage, nil, claim, nil); p != nil {
		t.Fatalf("a spec matching the retained claim is refused: %v", p)
	}
	bigger := goldenCluster().Spec.Storage
	bigger.Size = ptr.To(resource.MustParse("20Gi"))
	p := storageChange(bigger, nil, claim, expandable)
	if p == nil || p.Reason != kafkav1alpha1.ReasonStorageImmutable ||
		!strings.Contains(p.Message, "size changed from 10Gi to 20Gi; the existing claim demo-data is kept as it is") {
		t.Fatalf("a re-created cluster asking another size than its retained claim: want StorageImmutable naming the claim, got %v", p)
	}
	flipped := goldenCluster().Spec.Storage
	flipped.DeleteClaim = true
	if p := storageChange(flipped, desiredStatefulSet(goldenCluster(), goldenOptions), claim, nil); p != nil {
		t.Fatalf("deleteClaim is no storage change, and may be flipped: %v", p)
	}
}

func TestClaimToClusterMapsADataClaimByItsClusterLabel(t *testing.T) {
	data := retainedClaim(ownID)
	other := retainedClaim(ownID)
	other.Name = "demo-scratch"
	unlabelled := retainedClaim(ownID)
	unlabelled.Labels = nil
	cases := []struct {
		rule  string
		claim client.Object
		want  []reconcile.Request
	}{
		{"a retained data claim maps to its cluster", data, []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: "kafka", Name: "demo"}}}},
		{"a labelled claim that is not the data claim maps to nothing", other, nil},
		{"an unlabelled claim maps to nothing", unlabelled, nil},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got := claimToCluster(t.Context(), tc.claim)
			if len(got) != len(tc.want) || (len(got) == 1 && got[0] != tc.want[0]) {
				t.Fatalf("want %v, got %v", tc.want, got)
			}
		})
	}
}
