package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// Admin is the broker's write access to its cluster's KafkaTopics, the only API writes a
// broker makes besides its heartbeat Lease (DESIGN.md "Topics"): CreateTopics and Metadata
// auto-creation create KafkaTopics, DeleteTopics deletes them, CreatePartitions and the
// AlterConfigs APIs update their spec, and the broker removing a deleted topic's data drops its
// finalizer. Its verbs are exactly the broker Role's on kafkatopics (get, list, watch, create,
// update, delete). Reads on the request path come from the view, never from here: a Get is
// made only inside a write, to update the current object.
type Admin struct {
	// Client writes KafkaTopics of Namespace.
	Client    client.Client
	Namespace string
	// Cluster is the KafkaCluster whose topics the broker serves.
	Cluster string
}

// Bounds of an admin request's waiting, whatever timeout the client sent.
const (
	// maxAdminWait is the longest an admin request waits for the view to show its effect.
	maxAdminWait = 30 * time.Second
	// minWriteTimeout is the least time an API write is given, so a client timeout of 0
	// (answer at once, Apache's "do not wait") still gets its write attempted.
	minWriteTimeout = 5 * time.Second
)

// adminDeadlines splits a request's timeout into the context its API writes run under and
// the context its wait for the view runs under. Both end when the server closes. The wait ends
// timeoutMs after now (capped at maxAdminWait; at once for timeoutMs ≤ 0), the writes get at
// least minWriteTimeout.
func (rc *requestContext) adminDeadlines(timeoutMs int32) (write, wait context.Context, cancel func()) {
	budget := min(time.Duration(max(timeoutMs, 0))*time.Millisecond, maxAdminWait)
	write, cancelWrite := context.WithTimeout(rc.ctx, max(budget, minWriteTimeout))
	wait, cancelWait := context.WithTimeout(rc.ctx, budget)
	return write, wait, func() { cancelWrite(); cancelWait() }
}

// waitView waits until cond holds for the view's snapshot or ctx ends, and returns the last
// snapshot it read and whether cond held.
func waitView(ctx context.Context, v View, cond func(*Snapshot) bool) (*Snapshot, bool) {
	for {
		updated := v.Updated() // taken before the check, so no change slips between
		s := v.Snapshot()
		if cond(s) {
			return s, true
		}
		select {
		case <-updated:
		case <-ctx.Done():
			return v.Snapshot(), cond(v.Snapshot())
		}
	}
}

// leadersListed is true when every partition of t has a leader that Metadata, answering this
// request from s, would name (brokers): the answering broker, or a registered broker that is
// Serving and has an address on the request's listener. A client producing right after the
// topic was created then finds a leader.
func (rc *requestContext) leadersListed(s *Snapshot, t *Topic) bool {
	at := *rc
	at.view = s
	listed := map[int32]bool{}
	for _, b := range at.brokers(false) {
		listed[b.id] = true
	}
	for _, p := range t.Partitions {
		if !listed[p.Leader] {
			return false
		}
	}
	return true
}

// newTopicObject is the KafkaTopic a Kafka client's create asks for. The Kafka name is always
// in spec.topicName; the object name derives from it (topicname.ObjectName), so brokers
// creating one topic at once collide on the name rather than create two. Both topic
// finalizers are set from the start, so no deletion can skip the data removal.
func (a *Admin) newTopicObject(name string, partitions int32, config map[string]string) *v1alpha1.KafkaTopic {
	return &v1alpha1.KafkaTopic{
		ObjectMeta: metav1.ObjectMeta{
			Name:       topicname.ObjectName(name),
			Namespace:  a.Namespace,
			Labels:     v1alpha1.ClusterLabels(a.Cluster),
			Finalizers: []string{v1alpha1.FinalizerAssignment, v1alpha1.FinalizerData},
		},
		Spec: v1alpha1.KafkaTopicSpec{Cluster: a.Cluster, TopicName: name, Partitions: partitions, Config: config},
	}
}

// updateTopic reads KafkaTopic object (whose uid must be uid: a topic deleted and re-created
// meanwhile is not the one the client meant), applies change to it and, when change reports a
// change, writes it back, retrying a few times on a conflict. An error from change is returned
// as is and nothing is written.
func (a *Admin) updateTopic(ctx context.Context, object, uid string, change func(*v1alpha1.KafkaTopic) (bool, error)) (*v1alpha1.KafkaTopic, error) {
	var err error
	for range 4 {
		kt := &v1alpha1.KafkaTopic{}
		if err = a.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: object}, kt); err != nil {
			return nil, err
		}
		if string(kt.UID) != uid {
			return nil, errTopicGone(object)
		}
		changed, cerr := change(kt)
		if cerr != nil {
			return nil, cerr
		}
		if !changed {
			return kt, nil
		}
		if err = a.Client.Update(ctx, kt); err == nil || !apierrors.IsConflict(err) {
			return kt, err
		}
	}
	return nil, err
}

// liveTopic adapts a spec change for updateTopic: it always writes, and refuses a topic that
// is being deleted (it is no longer served) as not found.
func liveTopic(change func(*v1alpha1.KafkaTopic) error) func(*v1alpha1.KafkaTopic) (bool, error) {
	return func(kt *v1alpha1.KafkaTopic) (bool, error) {
		if !kt.DeletionTimestamp.IsZero() {
			return false, errTopicGone(kt.Name)
		}
		return true, change(kt)
	}
}

// errTopicGone is the not-found error of a KafkaTopic that was deleted (or replaced).
func errTopicGone(object string) error {
	return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("kafkatopics").GroupResource(), object)
}

// apiErrorCode is the Kafka error a failed KafkaTopic write answers with, and its message.
func apiErrorCode(err error) (int16, string) {
	switch {
	case apierrors.IsAlreadyExists(err):
		return kerr.TopicAlreadyExists.Code, err.Error()
	case apierrors.IsNotFound(err):
		return kerr.UnknownTopicOrPartition.Code, err.Error()
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return kerr.TopicAuthorizationFailed.Code, "the broker may not write KafkaTopics: " + err.Error()
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return kerr.InvalidRequest.Code, err.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return kerr.RequestTimedOut.Code, "the API server did not answer in time: " + err.Error()
	}
	return kerr.UnknownServerError.Code, err.Error()
}

// errNoAdmin is the message of every admin request to a server that has no Admin.
const errNoAdmin = "this broker runs without API access (no Admin); topics cannot be changed through it"

// countBy counts items by key: the duplicate check of every admin request (a name twice in
// one request is refused, every occurrence).
func countBy[T any](items []T, key func(T) string) map[string]int {
	n := make(map[string]int, len(items))
	for _, it := range items {
		n[key(it)]++
	}
	return n
}

// strptr returns a pointer to a copy of s.
func strptr(s string) *string { return &s }

// errorf is a formatted error message pointer, for the ErrorMessage fields.
func errorf(format string, args ...any) *string { return strptr(fmt.Sprintf(format, args...)) }
