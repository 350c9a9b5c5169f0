package cluster

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// Admin is the broker's write access to its cluster's KafkaTopics and KafkaUsers, the only API
// writes a broker makes besides its heartbeat Lease (docs/topics.md, "Admin APIs";
// docs/security.md, "Authorization"): CreateTopics and Metadata auto-creation create
// KafkaTopics, DeleteTopics deletes them, CreatePartitions and the AlterConfigs APIs update
// their spec, and the broker removing a deleted topic's data drops its finalizer; CreateAcls
// and DeleteAcls change KafkaUsers (admin_users.go). Its verbs are exactly the broker Role's
// on kafkatopics (get, list, watch, create, update, delete) and kafkausers (get, list, watch,
// create, update). Reads on the request path come from the view, never from here: a Get (or
// DeleteAcls' List) is made only inside a write, to change the current object.
//
// Its errors are the API server's (k8s.io/apimachinery/pkg/api/errors tells them apart).
type Admin struct {
	// Client writes KafkaTopics of Namespace.
	Client    client.Client
	Namespace string
	// Cluster is the KafkaCluster whose topics the broker serves.
	Cluster string
}

// CreateTopic creates the KafkaTopic of Kafka topic name with partitions partitions and
// config. The Kafka name is always in spec.topicName; the object name derives from it
// (topicname.ObjectNameIn: "<cluster>.<name>"), so brokers creating one topic at once collide on the name (an
// AlreadyExists error) rather than create two. Both topic finalizers are set from the start,
// so no deletion can skip the data removal.
func (a *Admin) CreateTopic(ctx context.Context, name string, partitions int32, config map[string]string) error {
	return a.Client.Create(ctx, &v1alpha1.KafkaTopic{
		ObjectMeta: metav1.ObjectMeta{
			Name:       topicname.ObjectNameIn(a.Cluster, name),
			Namespace:  a.Namespace,
			Labels:     v1alpha1.ClusterLabels(a.Cluster),
			Finalizers: []string{v1alpha1.FinalizerAssignment, v1alpha1.FinalizerData},
		},
		Spec: v1alpha1.KafkaTopicSpec{Cluster: a.Cluster, TopicName: name, Partitions: partitions, Config: config},
	})
}

// DeleteTopic deletes KafkaTopic object if its uid is still uid: a topic deleted and
// re-created meanwhile answers a Conflict error, and is left alone.
func (a *Admin) DeleteTopic(ctx context.Context, object string, uid types.UID) error {
	kt := &v1alpha1.KafkaTopic{}
	kt.Name, kt.Namespace = object, a.Namespace
	return a.Client.Delete(ctx, kt, client.Preconditions{UID: &uid})
}

// UpdateSpec applies change to the current KafkaTopic object (whose uid must be uid) and
// writes it back, retrying a few times on a conflict. A topic that is being deleted (no
// longer served) or was replaced is refused as not found; an error from change is returned
// as is and nothing is written. It returns the object written.
func (a *Admin) UpdateSpec(ctx context.Context, object string, uid types.UID, change func(*v1alpha1.KafkaTopic) error) (*v1alpha1.KafkaTopic, error) {
	return a.updateTopic(ctx, object, uid, func(kt *v1alpha1.KafkaTopic) (bool, error) {
		if !kt.DeletionTimestamp.IsZero() {
			return false, errTopicGone(kt.Name)
		}
		return true, change(kt)
	})
}

// DropDataFinalizer removes the data finalizer of KafkaTopic object, if it is still the one
// of uid; a topic that is gone already (another broker finished first) is success.
func (a *Admin) DropDataFinalizer(ctx context.Context, object string, uid types.UID) error {
	_, err := a.updateTopic(ctx, object, uid, func(kt *v1alpha1.KafkaTopic) (bool, error) {
		return controllerutil.RemoveFinalizer(kt, v1alpha1.FinalizerData), nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// updateTopic reads KafkaTopic object (whose uid must be uid: a topic deleted and re-created
// meanwhile is not the one the client meant), applies change to it and, when change reports a
// change, writes it back, retrying a few times on a conflict. An error from change is returned
// as is and nothing is written.
func (a *Admin) updateTopic(ctx context.Context, object string, uid types.UID, change func(*v1alpha1.KafkaTopic) (bool, error)) (*v1alpha1.KafkaTopic, error) {
	var err error
	for range 4 {
		kt := &v1alpha1.KafkaTopic{}
		if err = a.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: object}, kt); err != nil {
			return nil, err
		}
		if kt.UID != uid {
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

// errTopicGone is the not-found error of a KafkaTopic that was deleted (or replaced).
func errTopicGone(object string) error {
	return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("kafkatopics").GroupResource(), object)
}
