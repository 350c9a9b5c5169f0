package topics

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/testkit"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

// cluster is one test's KafkaCluster with its in-process brokers (test/kubebrokers), and the
// topic helpers of this suite.
type cluster struct{ *kubebrokers.Cluster }

// newCluster creates the cluster with spec.config and n brokers (kubebrokers.NewCluster).
func newCluster(t *testing.T, n int, clusterConfig map[string]string) *cluster {
	t.Helper()
	return &cluster{kubebrokers.NewCluster(t, n, kubebrokers.Options{Config: clusterConfig, Namespace: "topics"})}
}

var (
	testCtx    = testkit.Context
	eventually = testkit.Eventually
)

// topicsOn is the names of the topics broker id serves, internal ones (__consumer_offsets)
// aside.
func (c *cluster) topicsOn(ctx context.Context, id int) []string {
	c.T.Helper()
	var names []string
	for _, t := range c.MetadataOn(ctx, id).Topics {
		if !t.IsInternal {
			names = append(names, *t.Topic)
		}
	}
	return names
}

// leadersOn is topic's leader by partition as broker id answers (-1 for a partition with an
// error), and the topic's error code.
func (c *cluster) leadersOn(ctx context.Context, id int, topic string) (map[int32]int32, int16) {
	c.T.Helper()
	mt := c.MetadataOn(ctx, id, topic).Topics[0]
	out := map[int32]int32{}
	for _, p := range mt.Partitions {
		out[p.Partition] = p.Leader
		if p.ErrorCode != 0 {
			out[p.Partition] = -1
		}
	}
	return out, mt.ErrorCode
}

// kadm is an admin client seeded with every broker.
func (c *cluster) kadm(opts ...kgo.Opt) *kadm.Client { return kadm.NewClient(c.Kgo(opts...)) }

// topicObject reads the KafkaTopic of Kafka name name (nil when there is none).
func (c *cluster) topicObject(name string) *v1alpha1.KafkaTopic {
	c.T.Helper()
	list := &v1alpha1.KafkaTopicList{}
	if err := kubebrokers.Env.Client.List(context.Background(), list, client.InNamespace(c.NS)); err != nil {
		c.T.Fatal(err)
	}
	for i := range list.Items {
		kt := &list.Items[i]
		if kt.Spec.TopicName == name || kt.Spec.TopicName == "" && kt.Name == name {
			return kt
		}
	}
	return nil
}

// kgoMaxVersion pins the version kgo uses for key.
func kgoMaxVersion(key int16, v int16) kgo.Opt {
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(key, v)
	return kgo.MaxVersions(versions)
}
