package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/paddock-dev/paddock/broker/cluster"
)

// topicRoom is what a cluster's spec.limits leave of its topics and partitions
// (docs/bounds.md, "Topics and partitions"), counted down by the topics and partitions one
// request creates, so a request of many topics cannot pass the limits together.
type topicRoom struct {
	cluster                  string
	topics, partitions       int // held now, this request's included
	maxTopics, maxPartitions int
}

func newTopicRoom(s *cluster.Snapshot, clusterName string) *topicRoom {
	topics, partitions := s.Held()
	return &topicRoom{cluster: clusterName, topics: topics, partitions: partitions, maxTopics: int(s.MaxTopics()), maxPartitions: int(s.MaxPartitions())}
}

// take counts topics new topics with partitions partitions against the limits; past either,
// it takes nothing and returns POLICY_VIOLATION with a message naming the limit.
func (r *topicRoom) take(what string, topics, partitions int) (int16, string) {
	switch {
	case r.topics+topics > r.maxTopics:
		return kerr.PolicyViolation.Code, fmt.Sprintf("%s would make the cluster hold %d topics, above spec.limits.maxTopics (%d) of KafkaCluster %s.", what, r.topics+topics, r.maxTopics, r.cluster)
	case r.partitions+partitions > r.maxPartitions:
		return kerr.PolicyViolation.Code, fmt.Sprintf("%s would make the cluster hold %d partitions, above spec.limits.maxPartitions (%d) of KafkaCluster %s.", what, r.partitions+partitions, r.maxPartitions, r.cluster)
	}
	r.topics += topics
	r.partitions += partitions
	return 0, ""
}

// topicRoom is the room the request's view leaves under the cluster's limits.
func (rc *requestContext) topicRoom() *topicRoom {
	name := ""
	if rc.h.Admin != nil {
		name = rc.h.Admin.Cluster
	}
	return newTopicRoom(rc.view, name)
}
