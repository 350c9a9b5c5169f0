package recovery

import (
	"fmt"
	"strings"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// The zombie claim (seed 003): a local volume dies with its node, but its claim stays Bound to
// a PersistentVolume whose node affinity names that node, so the broker pod can never be
// scheduled anywhere again. Deleting the claim lets the pod's controller make a new one that
// binds wherever the pod can run.

// NoProvisioner is the provisioner of StorageClasses for statically provisioned local volumes.
const NoProvisioner = "kubernetes.io/no-provisioner"

// ClaimFacts is one PersistentVolumeClaim a Pending broker pod mounts.
type ClaimFacts struct {
	// Name of the claim.
	Name string
	// DataClaim is true for the cluster's shared data claim, which is never deleted.
	DataClaim bool
	// Provisioner of the claim's StorageClass; empty when unknown.
	Provisioner string
	// AffinityNodes are the node names the bound volume's required node affinity allows
	// (kubernetes.io/hostname In [...]); empty when it names none.
	AffinityNodes []string
	// MissingNodes are those of AffinityNodes that do not exist.
	MissingNodes []string
}

// PendingFacts is a broker pod that is not running.
type PendingFacts struct {
	Broker int32
	Pod    string
	// Unschedulable is true when the pod is Pending with PodScheduled False, reason
	// Unschedulable; Message is the scheduler's message.
	Unschedulable bool
	Message       string
	Claims        []ClaimFacts
	// AutoRecover is false when the cluster opted out.
	AutoRecover bool
}

// ClaimVerdict is what to do about a Pending broker pod's claims.
type ClaimVerdict struct {
	// Reason is ReasonZombieClaimDeleted (Delete lists the claims), or
	// ReasonVolumeNodeAffinityConflict (reported only); empty when the pod is not stuck on a
	// volume.
	Reason  string
	Message string
	Delete  []string
}

// volumeAffinityMessage is what the scheduler says when a pod's volumes pin it to nodes it
// cannot use.
const volumeAffinityMessage = "volume node affinity conflict"

// DecideClaims says whether a Pending pod is stuck on a zombie claim and which claims to
// delete: local ones (StorageClass NoProvisioner, or bound to a volume whose node affinity
// names only nodes that are gone) whose node affinity the scheduler cannot meet — never the
// cluster's data claim.
func DecideClaims(p PendingFacts) ClaimVerdict {
	if !p.Unschedulable {
		return ClaimVerdict{}
	}
	conflict := strings.Contains(p.Message, volumeAffinityMessage)
	var zombies, kept []string
	for _, c := range p.Claims {
		gone := len(c.AffinityNodes) > 0 && len(c.MissingNodes) == len(c.AffinityNodes)
		pins := gone || conflict && len(c.AffinityNodes) > 0
		if !pins {
			continue // this claim does not pin the pod
		}
		local := c.Provisioner == NoProvisioner || gone
		switch {
		case c.DataClaim:
			kept = append(kept, c.Name+" (the cluster's data claim is never deleted)")
		case !local:
			kept = append(kept, c.Name+" (not a local volume)")
		case !p.AutoRecover:
			kept = append(kept, c.Name+" (the cluster is annotated "+kafkav1alpha1.AnnotationAutoRecover+": \"false\")")
		default:
			zombies = append(zombies, c.Name)
		}
	}
	switch {
	case len(zombies) > 0:
		return ClaimVerdict{Reason: kafkav1alpha1.ReasonZombieClaimDeleted, Delete: zombies, Message: fmt.Sprintf(
			"Broker %d's pod %s was Pending on local claims bound to lost nodes (%s): deleted them and the pod, so it starts on another node",
			p.Broker, p.Pod, strings.Join(zombies, ", "))}
	case len(kept) > 0:
		return ClaimVerdict{Reason: kafkav1alpha1.ReasonVolumeNodeAffinityConflict, Message: fmt.Sprintf(
			"Broker %d's pod %s cannot be scheduled because of its volumes' node affinity: %s; left alone: %s",
			p.Broker, p.Pod, p.Message, strings.Join(kept, ", "))}
	case conflict:
		return ClaimVerdict{Reason: kafkav1alpha1.ReasonVolumeNodeAffinityConflict, Message: fmt.Sprintf(
			"Broker %d's pod %s cannot be scheduled: %s", p.Broker, p.Pod, p.Message)}
	}
	return ClaimVerdict{}
}
