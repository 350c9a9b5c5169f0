package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/cluster"
)

// page is one DescribeTopicPartitions answer in short: "a:0,1,2 b:0" plus its cursor
// ("b/1", or "" for none); errors as "zz!UNKNOWN_TOPIC_OR_PARTITION".
func page(resp *kmsg.DescribeTopicPartitionsResponse) (string, string) {
	var parts []string
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 {
			parts = append(parts, *t.Topic+"!"+kerr.ErrorForCode(t.ErrorCode).(*kerr.Error).Message)
			continue
		}
		var ps []string
		for _, p := range t.Partitions {
			s := fmt.Sprint(p.Partition)
			if p.ErrorCode != 0 {
				s += "!" + kerr.ErrorForCode(p.ErrorCode).(*kerr.Error).Message
			}
			ps = append(ps, s)
		}
		parts = append(parts, *t.Topic+":"+strings.Join(ps, ","))
	}
	cursor := ""
	if resp.NextCursor != nil {
		cursor = fmt.Sprintf("%s/%d", resp.NextCursor.Topic, resp.NextCursor.Partition)
	}
	return strings.Join(parts, " "), cursor
}

// DescribeTopicPartitions pages through topics sorted by name, at most the asked number of
// partitions per answer, and resumes at the cursor (Apache 3.8's rules, KIP-966).
func TestDescribeTopicPartitionsPagesByNameFromTheCursor(t *testing.T) {
	tc := newTestCluster(t, 2)
	parts := func(n int32, leader int32) []cluster.Partition {
		var out []cluster.Partition
		for i := range n {
			out = append(out, cluster.Partition{Index: i, Leader: leader, LeaderEpoch: 1})
		}
		return out
	}
	tc.publish([]cluster.Topic{
		{Name: "a", ID: [16]byte{1}, Partitions: parts(3, 0)},
		{Name: "b", ID: [16]byte{2}, Partitions: parts(2, 1)},
		{Name: "c", ID: [16]byte{3}, Partitions: parts(1, 5)}, // its leader is not a broker
	})
	c := dialKafka(t, tc.addrs[0])
	ask := func(limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, names ...string) *kmsg.DescribeTopicPartitionsResponse {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.ResponsePartitionLimit, req.Cursor = limit, cursor
		for _, n := range names {
			req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: n})
		}
		return roundTrip(t, c, req).(*kmsg.DescribeTopicPartitionsResponse)
	}
	cur := func(topic string, p int32) *kmsg.DescribeTopicPartitionsRequestCursor {
		return &kmsg.DescribeTopicPartitionsRequestCursor{Topic: topic, Partition: p}
	}
	for _, tt := range []struct {
		rule       string
		resp       *kmsg.DescribeTopicPartitionsResponse
		want, next string
	}{
		// Listing every topic starts with the internal one ("__" sorts first); the paging
		// cases below start at a's cursor past it.
		{"every topic: __consumer_offsets first", ask(1, nil), "__consumer_offsets:0", "__consumer_offsets/1"},
		{"every topic within the limit", ask(2000, cur("a", 0)), "a:0,1,2 b:0,1 c:0!LEADER_NOT_AVAILABLE", ""},
		{"a topic cut short: the cursor is its next partition", ask(4, cur("a", 0)), "a:0,1,2 b:0", "b/1"},
		{"resumed at the cursor", ask(4, cur("b", 1)), "b:1 c:0!LEADER_NOT_AVAILABLE", ""},
		{"the limit reached at a topic's end: the next topic's partition 0", ask(3, cur("a", 0)), "a:0,1,2", "b/0"},
		{"a limit below one answers one", ask(0, cur("a", 0)), "a:0", "a/1"},
		{"named topics: sorted, each once, an unknown one answered", ask(2000, nil, "c", "zz", "a", "a"), "a:0,1,2 c:0!LEADER_NOT_AVAILABLE zz!UNKNOWN_TOPIC_OR_PARTITION", ""},
		{"a name Kafka refuses", ask(2000, nil, "bad/name"), "bad/name!INVALID_TOPIC_EXCEPTION", ""},
		{"a cursor on a topic the request does not name", ask(2000, cur("b", 0), "a", "c"), "a!INVALID_REQUEST c!INVALID_REQUEST", ""},
		{"a negative cursor partition", ask(2000, cur("a", -1)), "", ""},
	} {
		if got, next := page(tt.resp); got != tt.want || next != tt.next {
			t.Errorf("%s: %q next %q, want %q next %q", tt.rule, got, next, tt.want, tt.next)
		}
	}
	resp := ask(1, nil, "b")
	if tp := resp.Topics[0]; tp.TopicID != [16]byte{2} || tp.IsInternal || tp.Partitions[0].LeaderID != 1 || len(tp.Partitions[0].Replicas) != 1 || tp.AuthorizedOperations != topicAuthorizedOps {
		t.Errorf("topic b: %+v", tp)
	}
}
