package kafkacluster

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/kafkaconfig"
)

// observation is everything the provisioning conditions are computed from: what
// this reconcile found and what went wrong. Conditions never read the previous status.
type observation struct {
	// Generation is the KafkaCluster's metadata.generation.
	Generation int64
	// DesiredReplicas is spec.replicas.
	DesiredReplicas int32
	// Problem is why the spec was refused (invalid, or a storage change); nil when accepted.
	Problem *specProblem
	// ApplyErr is the error applying the children failed with; nil when they applied.
	ApplyErr error
	// ClaimProblem is why the data claim is not bound (pendingClaimProblem); nil when it is,
	// or still within its grace.
	ClaimProblem *specProblem
	// ClaimExpanding says the data claim is being expanded (claimExpanding); "" otherwise.
	ClaimExpanding string
	// StatefulSet is the broker StatefulSet as read this reconcile; nil when it does not exist.
	StatefulSet *appsv1.StatefulSet
	// ConfigProblems are the entries of spec.config the brokers do not apply.
	ConfigProblems []kafkaconfig.Problem
	// Counts are the registry's counts (status.counts, written by the registry reconciler).
	Counts kafkav1alpha1.BrokerCounts
	// MountRefused is each registered broker's mountRefused (its registry row), by id; only
	// brokers that refuse their data volume's mount are in it.
	MountRefused map[int32]string
	// StorageHold says why a failed storage check holds the brokers at zero replicas
	// (storageHold); "" when it does not.
	StorageHold string
}

// mountRefusals is what the registry rows say of refused mounts, by broker id.
func mountRefusals(rows []kafkav1alpha1.BrokerRow) map[int32]string {
	var out map[int32]string
	for _, row := range rows {
		if row.MountRefused != "" {
			if out == nil {
				out = map[int32]string{}
			}
			out[row.ID] = row.MountRefused
		}
	}
	return out
}

// mountRefusedMessage names the brokers that refuse their mount and why, lowest id first.
func mountRefusedMessage(refused map[int32]string) string {
	ids := slices.Sorted(maps.Keys(refused))
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("broker %d refuses its data volume's mount (%s)", id, refused[id])
	}
	return strings.Join(parts, "; ") + "; it serves nothing until the volume is mounted as docs/storage.md requires"
}

// rolloutPending says why the StatefulSet is not yet at the spec, or "" when it
// is: the controller has not seen its latest spec, pods are missing or of an old revision,
// or not every desired broker is ready yet.
func rolloutPending(o observation) string {
	sts := o.StatefulSet
	switch {
	case sts == nil:
		return "the broker StatefulSet does not exist yet"
	case sts.Status.ObservedGeneration < sts.Generation:
		return "the StatefulSet controller has not observed the latest spec yet"
	case sts.Spec.Replicas != nil && *sts.Spec.Replicas != o.DesiredReplicas:
		return fmt.Sprintf("scaling the StatefulSet to %d brokers", o.DesiredReplicas)
	case sts.Status.Replicas != o.DesiredReplicas:
		return fmt.Sprintf("%d of %d broker pods exist", sts.Status.Replicas, o.DesiredReplicas)
	case sts.Status.UpdatedReplicas < o.DesiredReplicas ||
		(sts.Status.UpdateRevision != "" && sts.Status.CurrentRevision != sts.Status.UpdateRevision):
		return fmt.Sprintf("%d of %d broker pods run the latest revision", sts.Status.UpdatedReplicas, o.DesiredReplicas)
	case sts.Status.ReadyReplicas < o.DesiredReplicas:
		return fmt.Sprintf("%d of %d brokers are ready", sts.Status.ReadyReplicas, o.DesiredReplicas)
	}
	return ""
}

// securedCondition is True when every listener authenticates its clients without a password
// in the clear (Listener.Secured: TLS with any authentication, or SCRAM); False names each
// open listener and why (docs/security.md, "Unsecured clusters").
func securedCondition(generation int64, listeners []kafkav1alpha1.Listener) metav1.Condition {
	c := metav1.Condition{Type: kafkav1alpha1.ConditionSecured, ObservedGeneration: generation}
	var open, notes []string
	for _, l := range listeners {
		switch {
		case l.Authentication == nil:
			open = append(open, fmt.Sprintf("listener %s lets anyone in unauthenticated", l.Name))
		case !l.Secured():
			open = append(open, fmt.Sprintf("listener %s takes passwords over plaintext", l.Name))
		case !l.TLS:
			notes = append(notes, fmt.Sprintf("listener %s authenticates with SCRAM but carries records unencrypted", l.Name))
		}
	}
	if len(open) > 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, kafkav1alpha1.ReasonOpenListener, strings.Join(append(open, notes...), "; ")
		return c
	}
	c.Status, c.Reason, c.Message = metav1.ConditionTrue, kafkav1alpha1.ReasonAllListenersSecured, "every listener authenticates its clients"
	if len(notes) > 0 {
		c.Message += "; " + strings.Join(notes, "; ")
	}
	return c
}

// readyCondition is True when every desired broker is ready.
func readyCondition(o observation) metav1.Condition {
	c := metav1.Condition{Type: kafkav1alpha1.ConditionReady, ObservedGeneration: o.Generation}
	if o.StorageHold != "" {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, kafkav1alpha1.ReasonStorageCheckFailed, o.StorageHold
		return c
	}
	ready := int32(0)
	if o.StatefulSet != nil {
		ready = o.StatefulSet.Status.ReadyReplicas
	}
	if o.StatefulSet != nil && ready >= o.DesiredReplicas {
		c.Status, c.Reason = metav1.ConditionTrue, kafkav1alpha1.ReasonAllBrokersReady
		c.Message = fmt.Sprintf("%d of %d brokers are ready", ready, o.DesiredReplicas)
		return c
	}
	c.Status, c.Reason = metav1.ConditionFalse, kafkav1alpha1.ReasonBrokersNotReady
	c.Message = fmt.Sprintf("%d of %d brokers are ready", ready, o.DesiredReplicas)
	return c
}

// progressingCondition is True while the StatefulSet is moving towards the spec;
// False when it is there, or when the spec was refused (nothing will move until it is fixed).
func progressingCondition(o observation) metav1.Condition {
	c := metav1.Condition{Type: kafkav1alpha1.ConditionProgressing, ObservedGeneration: o.Generation}
	if o.Problem != nil {
		c.Status, c.Reason = metav1.ConditionFalse, o.Problem.Reason
		c.Message = "the spec was refused; see the Degraded condition"
		return c
	}
	pending := rolloutPending(o)
	if o.ClaimExpanding != "" { // the rarer news leads; a rollout at the same time is told too
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, kafkav1alpha1.ReasonExpandingStorage, o.ClaimExpanding
		if pending != "" {
			c.Message += "; " + pending
		}
		return c
	}
	if pending != "" {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, kafkav1alpha1.ReasonRollingOut, pending
		return c
	}
	c.Status, c.Reason = metav1.ConditionFalse, kafkav1alpha1.ReasonUpToDate
	c.Message = "the broker StatefulSet matches the spec"
	return c
}

// degradedCondition is True when a human must act: the spec was refused, a child could not
// be applied, the data claim is not bound (with the storage provider's reason), spec.config has entries the brokers do not apply, a broker refuses its data volume's mount, or brokers are registered but
// none is alive (then partition leaders and coordinators are kept as they were). This
// reconciler is the one writer of the KafkaCluster's conditions; the assignment reconciler's
// "no alive broker" is folded in here from the registry's counts (docs/topics.md, "Who
// writes what").
func degradedCondition(o observation) metav1.Condition {
	c := metav1.Condition{Type: kafkav1alpha1.ConditionDegraded, ObservedGeneration: o.Generation}
	switch {
	case o.Problem != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, o.Problem.Reason, o.Problem.Message
	case o.ApplyErr != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, kafkav1alpha1.ReasonApplyFailed, o.ApplyErr.Error()
	case o.StorageHold != "":
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, kafkav1alpha1.ReasonStorageCheckFailed, o.StorageHold
	case o.ClaimProblem != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, o.ClaimProblem.Reason, o.ClaimProblem.Message
	case len(o.ConfigProblems) > 0:
		c.Status, c.Reason = metav1.ConditionTrue, kafkav1alpha1.ReasonInvalidConfig
		c.Message = "spec.config entries not applied: " + kafkaconfig.Summary(o.ConfigProblems)
	case len(o.MountRefused) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, kafkav1alpha1.ReasonMountRefused, mountRefusedMessage(o.MountRefused)
	case noAliveBroker(o.Counts):
		c.Status, c.Reason = metav1.ConditionTrue, kafkav1alpha1.ReasonNoAliveBrokers
		c.Message = fmt.Sprintf("%d brokers are registered and none is alive (%d draining, %d dead); partition leaders and group coordinators are kept as they were",
			o.Counts.Registered, o.Counts.Draining, o.Counts.Dead)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected, "nothing is wrong"
	}
	return c
}

// noAliveBroker is true when brokers are registered and none of them is alive. A cluster
// whose brokers have not registered yet (just created) is not degraded by it.
func noAliveBroker(c kafkav1alpha1.BrokerCounts) bool { return c.Registered > 0 && c.Alive == 0 }

// listenerStatuses gives each listener's bootstrap address, from the bootstrap
// Service as observed (nil when it does not exist yet):
//   - Internal: the cluster DNS name of its bootstrap Service — c-bootstrap, or
//     c-bootstrap-internal in a cluster that also has external listeners — and the
//     listener port;
//   - NodePort: ":<nodePort>", i.e. that port on any node's address;
//   - LoadBalancer: the load balancer's first ingress address and the listener port, empty
//     until the load balancer is provisioned.
func listenerStatuses(cluster *kafkav1alpha1.KafkaCluster, bootstrap *corev1.Service) []kafkav1alpha1.ListenerStatus {
	out := make([]kafkav1alpha1.ListenerStatus, 0, len(cluster.Spec.Listeners))
	for _, l := range cluster.Spec.Listeners {
		internal := fmt.Sprintf("%s.%s.svc", cluster.BootstrapServiceOf(l.Name), cluster.Namespace)
		typ := l.Type
		if typ == "" {
			typ = kafkav1alpha1.ListenerInternal
		}
		s := kafkav1alpha1.ListenerStatus{Name: l.Name, Type: typ}
		switch typ {
		case kafkav1alpha1.ListenerInternal:
			s.Bootstrap = net.JoinHostPort(internal, strconv.Itoa(int(l.Port)))
		case kafkav1alpha1.ListenerNodePort:
			if p := servicePort(bootstrap, l.Name); p != nil && p.NodePort != 0 {
				s.Bootstrap = ":" + strconv.Itoa(int(p.NodePort))
			}
		case kafkav1alpha1.ListenerLoadBalancer:
			if bootstrap != nil && len(bootstrap.Status.LoadBalancer.Ingress) > 0 {
				in := bootstrap.Status.LoadBalancer.Ingress[0]
				host := in.Hostname
				if host == "" {
					host = in.IP
				}
				if host != "" {
					s.Bootstrap = net.JoinHostPort(host, strconv.Itoa(int(l.Port)))
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// servicePort is svc's port called name, or nil.
func servicePort(svc *corev1.Service, name string) *corev1.ServicePort {
	if svc == nil {
		return nil
	}
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == name {
			return &svc.Spec.Ports[i]
		}
	}
	return nil
}
