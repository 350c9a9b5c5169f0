package cluster

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// Heartbeat renews the broker's Lease (docs/registry.md, "Heartbeat Lease"): the registry's only evidence that the
// broker lives, whether it is healthy, and whether it is draining. Beats are serialized (one
// writer of the Lease), so a draining beat written out of band never interleaves with the loop.
type Heartbeat struct {
	Client         client.Client
	Cluster        string
	Identity       Identity
	Interval       time.Duration
	SessionTimeout time.Duration
	// Healthy and Draining are read at each beat.
	Healthy  func() bool
	Draining func() bool
	Log      logr.Logger
	// Now reads the clock; time.Now when nil.
	Now func() time.Time
	// Listeners returns the host and port the broker advertises on each listener that has an
	// address now, read at each beat and announced on the Lease (AnnotationListeners) for the
	// registry to copy into the broker's row; a listener without an address is left out, so
	// no broker names this one there. Broker sets it to its Addresses before the first beat;
	// nil announces nothing.
	Listeners func() []v1alpha1.ListenerAddress
	// Claims returns the partitions whose fence the broker holds, read at each beat and
	// announced on the Lease (AnnotationClaimed, as FormatClaims writes them) for the
	// recovery reconciler. Broker sets it before the first beat; nil announces nothing.
	Claims func() []v1alpha1.PartitionClaim
	// Failed returns the partitions whose storage failed here recently, announced on the
	// Lease (AnnotationFailed, as FormatFailures writes them) for the assignment reconciler
	// to take them over again or move them. Nil announces nothing.
	Failed func() []v1alpha1.PartitionFailure
	// Uncleanable returns the compacted partitions whose last cleaning pass failed here,
	// announced on the Lease (AnnotationUncleanable, as FormatUncleanable writes them) for
	// the KafkaTopic's status and a Warning Event. Nil announces nothing.
	Uncleanable func() []v1alpha1.UncleanablePartition
	// MountRefused returns why the data volume's mount is refused ("option: reason" each),
	// announced on the Lease (AnnotationMountRefused) for the KafkaCluster's Degraded
	// condition. Nil announces nothing.
	MountRefused func() []string
	// Groups counts the consumer groups the broker coordinates and serves, by protocol and
	// state, announced on the Lease (AnnotationGroups, as FormatGroupCounts writes them) for
	// the KafkaCluster's status. Read at each beat, so a count is as fresh as the last beat.
	// Nil announces nothing.
	Groups func() []v1alpha1.GroupCount
	// OngoingTransactions counts the transactions the broker's transaction coordinator holds
	// open (Ongoing, PrepareCommit, PrepareAbort), announced on the Lease
	// (AnnotationOngoingTransactions, as FormatOngoingTransactions writes it) for the
	// KafkaCluster's status. Read at each beat, as Groups is. Nil announces nothing.
	OngoingTransactions func() int32

	mu    sync.Mutex
	lease *coordinationv1.Lease // last lease written; nil forces a fresh read. Guarded by mu.
	// acquired is true once this process has written the Lease. Until then every write is
	// this incarnation's first and bumps the epoch. Guarded by mu.
	acquired bool
	// acquiredAt is the acquireTime this incarnation stamps on its first write, made once: a
	// Lease read back with this holder and this acquireTime was written by this incarnation,
	// even when the write answered with an error. Guarded by mu.
	acquiredAt *metav1.MicroTime
	// epoch is the leaseTransitions this incarnation last wrote. Guarded by mu.
	epoch int32

	// lastRenew is when the last successful beat was sent (before its write, not at its
	// answer); nil before the first. From time.Now it carries a monotonic reading, so Age is
	// not moved by a step of the wall clock.
	lastRenew atomic.Pointer[time.Time]
}

func (h *Heartbeat) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// Age is the time since the last successful beat was sent, or -1 before the first one.
func (h *Heartbeat) Age() time.Duration {
	if h == nil {
		return -1
	}
	last := h.lastRenew.Load()
	if last == nil {
		return -1
	}
	return h.now().Sub(*last)
}

// Run beats every Interval until ctx ends. A failed beat is logged and retried sooner, with an
// exponential backoff capped at Interval; failures never stop the broker serving.
func (h *Heartbeat) Run(ctx context.Context) {
	failures := 0
	for {
		beatCtx, cancel := context.WithTimeout(ctx, h.SessionTimeout/2)
		err := h.Beat(beatCtx)
		cancel()
		next := h.Interval
		if err != nil && ctx.Err() == nil {
			failures++
			next = min(50*time.Millisecond<<min(failures, 10), h.Interval)
			h.Log.Error(err, "Heartbeat failed; retrying", "failures", failures, "retryIn", next)
		} else {
			failures = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// Beat writes one renewal now. Conflicts (someone else wrote the Lease, or it was created
// concurrently) are retried at once from a fresh read, a few times.
func (h *Heartbeat) Beat(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		// The self-fence clock starts when the renewal is sent, not when its answer returns
		// (which may be seconds later): the registry counts from when it observes the write,
		// never before the send, so the broker never thinks its Lease younger than the
		// registry does (docs/dataplane.md "Self-fence").
		sent := h.now()
		if err = h.beatLocked(ctx); err == nil {
			h.lastRenew.Store(&sent)
			return nil
		}
		h.lease = nil
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return err
}

func (h *Heartbeat) beatLocked(ctx context.Context) error {
	name := v1alpha1.LeaseName(h.Cluster, h.Identity.ID)
	if h.lease == nil {
		l := &coordinationv1.Lease{}
		err := h.Client.Get(ctx, client.ObjectKey{Namespace: h.Identity.Namespace, Name: name}, l)
		switch {
		case apierrors.IsNotFound(err):
			return h.createLocked(ctx, name)
		case err != nil:
			return fmt.Errorf("get lease %s: %w", name, err)
		}
		if h.writtenByThisIncarnation(l) {
			h.acquired = true // an earlier write landed although it answered with an error
		}
		h.lease = l
	}
	l := h.lease.DeepCopy()
	h.renew(l)
	if err := h.Client.Update(ctx, l); err != nil {
		return fmt.Errorf("update lease %s: %w", name, err)
	}
	h.wroteLocked(l)
	return nil
}

// writtenByThisIncarnation reports whether l carries this process's holder and acquireTime.
func (h *Heartbeat) writtenByThisIncarnation(l *coordinationv1.Lease) bool {
	return h.acquiredAt != nil && l.Spec.AcquireTime != nil && l.Spec.AcquireTime.Equal(h.acquiredAt) &&
		ptr.Deref(l.Spec.HolderIdentity, "") == h.Identity.HolderIdentity()
}

// wroteLocked records a write of l that succeeded.
func (h *Heartbeat) wroteLocked(l *coordinationv1.Lease) {
	h.lease, h.acquired, h.epoch = l, true, ptr.Deref(l.Spec.LeaseTransitions, 0)
}

func (h *Heartbeat) createLocked(ctx context.Context, name string) error {
	kc := &v1alpha1.KafkaCluster{}
	if err := h.Client.Get(ctx, client.ObjectKey{Namespace: h.Identity.Namespace, Name: h.Cluster}, kc); err != nil {
		return fmt.Errorf("get kafkacluster %s for the lease owner: %w", h.Cluster, err)
	}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name:      name,
		Namespace: h.Identity.Namespace,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: v1alpha1.GroupVersion.String(),
			Kind:       "KafkaCluster",
			Name:       kc.Name,
			UID:        kc.UID,
		}},
	}}
	epoch, err := h.epochForNewLease(ctx)
	if err != nil {
		return err
	}
	l.Spec.LeaseTransitions = &epoch
	if !h.acquired {
		// The epoch is already this incarnation's; renew must not count it again.
		holder := h.Identity.HolderIdentity()
		l.Spec.HolderIdentity = &holder
		l.Spec.AcquireTime = h.acquireTime()
		h.acquired = true
		defer func() {
			if h.lease != l {
				h.acquired = false // the create did not land (or did not say so); the next read decides
			}
		}()
	}
	h.renew(l)
	if err := h.Client.Create(ctx, l); err != nil {
		return fmt.Errorf("create lease %s: %w", name, err)
	}
	h.wroteLocked(l)
	return nil
}

// epochForNewLease is the leaseTransitions of a Lease this broker creates: never below the
// epoch its Broker object shows — a deleted Lease must not reset the epoch — and one above it
// for a new incarnation; 0 for a broker that never had one.
func (h *Heartbeat) epochForNewLease(ctx context.Context) (int32, error) {
	b := &v1alpha1.Broker{}
	key := client.ObjectKey{Namespace: h.Identity.Namespace, Name: v1alpha1.BrokerObjectName(h.Cluster, h.Identity.ID)}
	var shown int32
	switch err := h.Client.Get(ctx, key, b); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return 0, fmt.Errorf("get broker %s for its epoch: %w", key.Name, err)
	case b.Status.State != "":
		shown = int32(min(b.Status.Epoch, math.MaxInt32-1))
		if !h.acquired {
			shown++ // a new incarnation after the one the Broker shows
		}
	}
	if h.acquired {
		return max(shown, h.epoch), nil
	}
	return shown, nil
}

// acquireTime is the acquireTime this incarnation stamps, fixed at its first write and kept
// in whole microseconds, as a MicroTime round-trips through the apiserver.
func (h *Heartbeat) acquireTime() *metav1.MicroTime {
	if h.acquiredAt == nil {
		t := metav1.NewMicroTime(h.now().Truncate(time.Microsecond))
		h.acquiredAt = &t
	}
	return h.acquiredAt.DeepCopy()
}

// renew sets everything a beat writes on l. This process's first write — a new pod, or the
// same pod's container restarted after a crash — and any holder change stamp acquireTime and
// bump leaseTransitions when there was a previous holder: that count is the broker's epoch,
// which grows with every incarnation as Kafka's broker epoch does. A restart in the same pod
// keeps holderIdentity (<pod>_<uid>), so the holder alone cannot tell incarnations apart.
func (h *Heartbeat) renew(l *coordinationv1.Lease) {
	now := metav1.NewMicroTime(h.now())
	holder := h.Identity.HolderIdentity()
	if !h.acquired || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
		if l.Spec.HolderIdentity != nil {
			l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
		} else if l.Spec.LeaseTransitions == nil {
			l.Spec.LeaseTransitions = ptr.To[int32](0)
		}
		l.Spec.HolderIdentity = &holder
		l.Spec.AcquireTime = h.acquireTime()
	}
	l.Spec.RenewTime = &now
	l.Spec.LeaseDurationSeconds = ptr.To(int32(h.SessionTimeout / time.Second))
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	maps.Copy(l.Labels, v1alpha1.BrokerLabels(h.Cluster, h.Identity.ID))
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[v1alpha1.AnnotationHealthy] = strconv.FormatBool(h.Healthy())
	l.Annotations[v1alpha1.AnnotationDraining] = strconv.FormatBool(h.Draining())
	if h.Listeners != nil {
		// Written even when empty: "no address on any listener" must replace an older
		// announcement, not leave it standing.
		l.Annotations[v1alpha1.AnnotationListeners] = v1alpha1.FormatListeners(h.Listeners())
	}
	if h.Claims != nil {
		// Written even when empty too: a broker that claims nothing must say so.
		l.Annotations[v1alpha1.AnnotationClaimed] = v1alpha1.FormatClaims(h.Claims())
	}
	// The storage announcements are removed when there is nothing to say, so a Lease of a
	// broker whose storage is fine carries neither.
	setOrDelete(l.Annotations, v1alpha1.AnnotationFailed, h.Failed, v1alpha1.FormatFailures)
	setOrDelete(l.Annotations, v1alpha1.AnnotationMountRefused, h.MountRefused, formatMountRefused)
	setOrDelete(l.Annotations, v1alpha1.AnnotationUncleanable, h.Uncleanable, v1alpha1.FormatUncleanable)
	// Removed when the broker coordinates no group, as the storage announcements are.
	setOrDelete(l.Annotations, v1alpha1.AnnotationGroups, h.Groups, v1alpha1.FormatGroupCounts)
	// Removed when no transaction is open, likewise.
	setOrDelete(l.Annotations, v1alpha1.AnnotationOngoingTransactions, h.OngoingTransactions, v1alpha1.FormatOngoingTransactions)
}

// setOrDelete sets annotation key to format(get()), or deletes it when that is empty. A nil
// get leaves the annotation alone.
func setOrDelete[T any](annotations map[string]string, key string, get func() T, format func(T) string) {
	if get == nil {
		return
	}
	if v := format(get()); v != "" {
		annotations[key] = v
	} else {
		delete(annotations, key)
	}
}

// formatMountRefused joins the reasons by "; ", cut at v1alpha1.MaxMountRefusedLength bytes
// and to printable ASCII (what the operator believes).
func formatMountRefused(reasons []string) string {
	b := []byte(strings.Join(reasons, "; "))
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b[:min(len(b), v1alpha1.MaxMountRefusedLength)])
}
