package broker_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// What a broker's heartbeat announces of its groups (Broker.GroupCounts, the Lease's
// AnnotationGroups) counts each group once, at its coordinator, by protocol and state: a
// real classic group and a real consumer-protocol group, on two brokers, sum to one Stable
// group of each.
func TestTheBrokersCountEachRealGroupOnceByProtocolAndState(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2, GroupConfig: fastConsumerGroups})
	c.CreateTopic("counted", 2, nil)
	ctx := testkit.Context(t)
	if err := c.Client(kgo.DefaultProduceTopic("counted")).ProduceSync(ctx, &kgo.Record{Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consume := func(group string, opts ...kgo.Opt) {
		cl := c.Client(append([]kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics("counted"), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
		for cl.PollFetches(ctx).NumRecords() == 0 {
			if ctx.Err() != nil {
				t.Fatal(ctx.Err())
			}
		}
	}
	consume("classic-group")
	consume("consumer-group", kgo.ServerSideBalancer())
	want := []v1alpha1.GroupCount{{Protocol: "classic", State: "Stable", Count: 1}, {Protocol: "consumer", State: "Stable", Count: 1}}
	testkit.EventuallyDetail(t, "one Stable group of each protocol counted across the brokers", func() (bool, string) {
		got, _ := v1alpha1.SumGroupCounts(c.Broker(0).B.GroupCounts(), c.Broker(1).B.GroupCounts())
		return slices.Equal(got, want), fmt.Sprintf("counted %+v, want %+v", got, want)
	})
}
