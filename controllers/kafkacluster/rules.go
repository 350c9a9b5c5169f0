package kafkacluster

import (
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// The rules the provisioning reconciler decides by. They are pure: plain inputs, no client,
// so each is pinned by a table test in rules_test.go.

// specProblem is why a spec cannot be acted on: a condition reason and a sentence
// for the user.
type specProblem struct {
	Reason  string
	Message string
}

func (p *specProblem) Error() string { return p.Reason + ": " + p.Message }

// checkSpec reports what schema validation cannot catch: a broker image
// nobody named, listeners that collide with the health port, and listeners asking for two
// different external Service types (one bootstrap Service has one type). Nil means valid.
func checkSpec(cluster *kafkav1alpha1.KafkaCluster, opts Options) *specProblem {
	var problems []string
	if brokerImage(cluster, opts) == "" {
		problems = append(problems, "spec.image is empty and the manager has no --default-broker-image")
	}
	external := map[kafkav1alpha1.ListenerType]bool{}
	for _, l := range cluster.Spec.Listeners {
		if l.Name == kafkav1alpha1.HealthPortName {
			problems = append(problems, fmt.Sprintf("listener name %q is reserved for the health port", l.Name))
		}
		if l.Port == kafkav1alpha1.HealthPort {
			problems = append(problems, fmt.Sprintf("listener %q uses port %d, which the health endpoints use", l.Name, l.Port))
		}
		if l.Type == kafkav1alpha1.ListenerNodePort || l.Type == kafkav1alpha1.ListenerLoadBalancer {
			external[l.Type] = true
		}
	}
	if len(external) > 1 {
		problems = append(problems, "listeners mix NodePort and LoadBalancer types; the bootstrap Service can have only one")
	}
	if len(problems) == 0 {
		return nil
	}
	return &specProblem{Reason: kafkav1alpha1.ReasonInvalidSpec, Message: strings.Join(problems, "; ")}
}

// storageChange reports a change of spec.storage against the storage the cluster already
// has, which paddock refuses: a claim's class and access mode cannot change, a claim cannot
// shrink, and switching between a claim and an emptyDir would lose the data. A larger size is
// an expansion (claimExpansion decides whether the class allows it). The existing storage is
// read from the objects themselves — the StatefulSet's data volume says which type, the claim
// says its class, access mode and size — so the check needs no memory of its own. sts and
// claim are nil when they do not exist yet; class is the claim's StorageClass, nil when it
// has none or it does not exist. A claim without a StatefulSet is a retained claim being
// adopted (or one whose StatefulSet is being put back): the spec must match it exactly, or
// the apply would resize or reclassify a claim the cluster has not started on yet.
func storageChange(want kafkav1alpha1.Storage, sts *appsv1.StatefulSet, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) *specProblem {
	advice := "storage of an existing cluster cannot change, set it back (the brokers keep their current volume)"
	adopting := sts == nil && claim != nil
	if adopting {
		advice = fmt.Sprintf("the existing claim %s is kept as it is: make spec.storage match it, or delete the claim (and its data) to start empty", claim.Name)
	}
	refuse := func(format string, args ...any) *specProblem {
		return &specProblem{Reason: kafkav1alpha1.ReasonStorageImmutable, Message: fmt.Sprintf(format, args...) + "; " + advice}
	}
	wantType := want.Type
	if wantType == "" {
		wantType = kafkav1alpha1.StoragePersistentClaim
	}
	if sts != nil {
		if haveType := storageTypeOf(sts); haveType != "" && haveType != wantType {
			return refuse("storage.type changed from %s to %s", haveType, wantType)
		}
	}
	if wantType != kafkav1alpha1.StoragePersistentClaim || claim == nil {
		return nil
	}
	if want.StorageClassName != nil && *want.StorageClassName != deref(claim.Spec.StorageClassName) {
		return refuse("storage.storageClassName changed from %q to %q", deref(claim.Spec.StorageClassName), *want.StorageClassName)
	}
	if want.AccessMode != "" && (len(claim.Spec.AccessModes) != 1 || claim.Spec.AccessModes[0] != want.AccessMode) {
		return refuse("storage.accessMode changed from %v to %s", claim.Spec.AccessModes, want.AccessMode)
	}
	wantSize := (&kafkav1alpha1.KafkaClusterSpec{Storage: want}).StorageSize()
	have, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	switch {
	case !ok || have.Cmp(wantSize) == 0:
		return nil
	case have.Cmp(wantSize) > 0:
		return refuse("storage.size shrank from %s to %s, and a claim can only grow", have.String(), wantSize.String())
	case adopting:
		return refuse("storage.size changed from %s to %s", have.String(), wantSize.String())
	}
	return claimExpansion(claim, class, have, wantSize)
}

// storageTypeOf reads the storage type from a StatefulSet's data volume; empty
// when it has none (not one of ours).
func storageTypeOf(sts *appsv1.StatefulSet) kafkav1alpha1.StorageType {
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.Name != kafkav1alpha1.DataVolumeName {
			continue
		}
		switch {
		case v.PersistentVolumeClaim != nil:
			return kafkav1alpha1.StoragePersistentClaim
		case v.EmptyDir != nil:
			return kafkav1alpha1.StorageEphemeral
		}
	}
	return ""
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// newClusterID mints a Kafka cluster id the way Kafka's own tools do: a Kafka Uuid (16
// random bytes) written as unpadded base64url, 22 characters.
func newClusterID(random io.Reader) (string, error) {
	id, err := kafkav1alpha1.NewKafkaUUID(random)
	if err != nil {
		return "", fmt.Errorf("mint the cluster id: %w", err)
	}
	return id.String(), nil
}
