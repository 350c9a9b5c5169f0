package groups

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

// TestAGroupsCoordinatorRestartingBeforeItIsDeclaredDeadServesItAgain: the coordinator of
// a group with committed offsets restarts (its process stops at once, a new one starts on
// the same volume, its row stays Alive with the next epoch). The assignment reconciler bumps
// the coordinator epoch for the new incarnation, so the new process — which may not claim
// the group's fence at the epoch its old process claimed — takes the group over, and a
// consumer of the group resumes at the committed offsets. The time from the restart until
// the group serves again is printed.
func TestAGroupsCoordinatorRestartingBeforeItIsDeclaredDeadServesItAgain(t *testing.T) {
	c := newCluster(t, 3)
	const topic, partitions, perPartition = "restart", 3, 20
	c.createTopic(topic, partitions)
	c.produce(topic, partitions, perPartition)
	group := groupCoordinatedBy("restart", 1)
	first := kgoRead(t, c, group, topic, kgo.RangeBalancer(), atLeast(partitions*perPartition/2))
	commit := c.committed(group, topic)
	before := c.coordinatorEpoch()

	start := time.Now()
	c.RestartBroker(1)
	eventually(t, "the coordinator epoch bumped for broker 1's new incarnation", func() bool { return c.coordinatorEpoch() > before })
	bumped := time.Since(start)
	second := kgoRead(t, c, group, topic, kgo.RangeBalancer(), theRest(commit, partitions*perPartition))
	t.Logf("coordinator epoch %d → %d %v after the restart; the group's consumer had read the rest %v after it", before, c.coordinatorEpoch(), bumped, time.Since(start))
	checkResumed(t, commit, first, second, partitions*perPartition)
}

// coordinatorEpoch is the cluster's status.coordinatorEpoch.
func (c *cluster) coordinatorEpoch() int64 {
	c.T.Helper()
	kc := &v1alpha1.KafkaCluster{}
	if err := kubebrokers.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: c.NS, Name: kubebrokers.ClusterName}, kc); err != nil {
		c.T.Fatal(err)
	}
	return kc.Status.CoordinatorEpoch
}
