package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/broker/groups"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// fastConsumerGroups: a short consumer-protocol heartbeat, so reconciliation takes a few
// hundred milliseconds instead of Apache's 5 s rounds.
func fastConsumerGroups(cfg *groups.Config) {
	fastGroups(cfg)
	cfg.ConsumerHeartbeatInterval = 200 * time.Millisecond
}

// TestKgoUsesTheConsumerProtocolWhenTheBrokerOffersIt: kgo with ServerSideBalancer sees
// ConsumerGroupHeartbeat v1 advertised and joins through it; two members split a topic
// through the coordinator's assignment and read every record once between them.
func TestKgoUsesTheConsumerProtocolWhenTheBrokerOffersIt(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2, GroupConfig: fastConsumerGroups})
	c.CreateTopic("kip848", 4, nil)
	ctx := testkit.Context(t)
	var recs []*kgo.Record
	for i := range 80 {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprint(i)), Partition: int32(i % 4)})
	}
	if err := c.Client(kgo.DefaultProduceTopic("kip848"), kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	seen := make(chan string, 200)
	member := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumerGroup("g848"), kgo.ConsumeTopics("kip848"),
			kgo.ServerSideBalancer(), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		go func() {
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() {
					return
				}
				fs.EachRecord(func(r *kgo.Record) { seen <- string(r.Value) })
			}
		}()
		return cl
	}
	a, _ := member(), member()
	got := map[string]int{}
	for len(got) < 80 {
		select {
		case v := <-seen:
			got[v]++
		case <-ctx.Done():
			t.Fatalf("read %d of 80 records", len(got))
		}
	}
	desc := kmsg.NewPtrConsumerGroupDescribeRequest()
	desc.Groups = []string{"g848"}
	var last string
	testkit.Eventually(t, "a Stable consumer group of two members with two partitions each", func() bool {
		resp, err := desc.RequestWith(ctx, a)
		if err != nil {
			last = err.Error()
			return false
		}
		g := resp.Groups[0]
		last = fmt.Sprintf("%+v", g)
		if g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != 2 {
			return false
		}
		for _, m := range g.Members {
			if n := len(m.Assignment.TopicPartitions); n != 1 || len(m.Assignment.TopicPartitions[0].Partitions) != 2 {
				return false
			}
		}
		return true
	})
	t.Logf("group: %s", last)
}
