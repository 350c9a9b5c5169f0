package broker_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// commitOffset commits offset for group on topic/partition as a simple (member-less)
// consumer does, and fails the test on any error code.
func commitOffset(t *testing.T, conn *brokertest.Conn, group, topic string, partition int32, offset int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := conn.Request(req).(*kmsg.OffsetCommitResponse)
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("commit %s %s/%d at %d: error %d", group, topic, partition, offset, c)
	}
}

// scrape returns b's /metrics text.
func scrape(t *testing.T, b *brokertest.Broker) string {
	t.Helper()
	resp, err := http.Get("http://" + b.HealthAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// countSeries counts the samples of one metric name in a scrape.
func countSeries(text, name string) int {
	return len(regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+`[{ ]`).FindAllString(text, -1))
}

// A dashboard's partition and lag panels read what the broker serves: the offsets and size of
// each partition it leads, and for a group it coordinates the committed offset and the lag
// behind that partition's high watermark.
func TestMetricsShowEachPartitionsOffsetsAndAGroupsLag(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{GroupConfig: fastGroups})
	c.CreateTopic("m", 1, nil)
	c.WaitServed()
	b := c.Broker(0)
	conn := brokertest.Dial(t, b.Addr)
	for i := 0; i < 3; i++ {
		if p, _ := produceOne(t, conn, 10, "m", 0, brokertest.Plain([]byte("a"), []byte("b")).Bytes()); p.ErrorCode != 0 {
			t.Fatal(p)
		}
	}
	commitOffset(t, conn, "g", "m", 0, 2)
	for series, want := range map[string]float64{
		`paddock_partition_log_start_offset{partition="0",topic="m"}`:               0,
		`paddock_partition_high_watermark{partition="0",topic="m"}`:                 6,
		`paddock_partition_log_end_offset{partition="0",topic="m"}`:                 6,
		`paddock_partition_segments{partition="0",topic="m"}`:                       1,
		`paddock_group_committed_offset{group="g",partition="0",topic="m"}`:         2,
		`paddock_group_lag{group="g",partition="0",topic="m"}`:                      4,
		`paddock_group_members{group="g"}`:                                          0,
		`paddock_group_state{group="g",state="Empty"}`:                              1,
		`paddock_broker_partitions{state="serving"}`:                                1,
		`paddock_broker_partitions{state="failed"}`:                                 0,
		`paddock_broker_storage_healthy`:                                            1,
		`paddock_broker_takeovers_total{result="served"}`:                           1,
		`paddock_broker_fence_checks_total{result="fenced"}`:                        0,
		`paddock_broker_fence_checks_total{result="error"}`:                         0,
		`paddock_broker_metrics_series_dropped{kind="partition"}`:                   0,
		`paddock_broker_request_duration_seconds_count{api="Produce",version="10"}`: 3,
	} {
		if got := metric(t, b, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	for _, series := range []string{`paddock_partition_size_bytes{partition="0",topic="m"}`, `paddock_broker_log_size_bytes`,
		`paddock_volume_size_bytes`, `paddock_volume_available_bytes`, `paddock_volume_used_bytes`,
		`paddock_broker_fence_checks_total{result="ok"}`, `paddock_broker_fence_check_duration_seconds_count`} {
		if got := metric(t, b, series); got <= 0 {
			t.Errorf("%s = %v, want > 0", series, got)
		}
	}
	text := scrape(t, b)
	for _, name := range []string{"paddock_build_info", "go_goroutines", "process_resident_memory_bytes"} {
		if countSeries(text, name) == 0 {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// Each error code in an answer is counted under its Kafka name, per API key: a producer
// writing to a partition that does not exist shows as UNKNOWN_TOPIC_OR_PARTITION on Produce.
func TestMetricsCountAnswerErrorsByKafkaName(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{})
	c.CreateTopic("e", 1, nil)
	c.WaitServed()
	b := c.Broker(0)
	conn := brokertest.Dial(t, b.Addr)
	for i := 0; i < 2; i++ {
		produceOne(t, conn, 10, "e", 7, brokertest.Plain([]byte("nowhere")).Bytes())
	}
	if got := metric(t, b, `paddock_broker_response_errors_total{api="Produce",error="UNKNOWN_TOPIC_OR_PARTITION"}`); got != 2 {
		t.Errorf("Produce UNKNOWN_TOPIC_OR_PARTITION = %v, want 2", got)
	}
	if got := metric(t, b, `paddock_broker_response_errors_total{api="Produce",error="NONE"}`); got != -1 {
		t.Errorf("a zero error code was counted: %v", got)
	}
}

// --metrics-partition-limit bounds the per-partition series, not the totals: past the limit a
// broker still reports how many partitions it serves, their bytes, and how many series it
// left out.
func TestMetricsPartitionLimitDropsPerPartitionSeriesNotTotals(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{MetricsPartitionLimit: 1})
	c.CreateTopic("many", 3, nil)
	c.WaitServed()
	b := c.Broker(0)
	conn := brokertest.Dial(t, b.Addr)
	for p := int32(0); p < 3; p++ {
		if r, _ := produceOne(t, conn, 10, "many", p, brokertest.Plain([]byte("x")).Bytes()); r.ErrorCode != 0 {
			t.Fatal(r)
		}
	}
	var text string
	testkit.Eventually(t, "the three partitions served", func() bool {
		text = scrape(t, b)
		return strings.Contains(text, `paddock_broker_partitions{state="serving"} 3`)
	})
	if n := countSeries(text, "paddock_partition_high_watermark"); n != 1 {
		t.Errorf("%d high-watermark series with a limit of 1, want 1", n)
	}
	if got := metric(t, b, `paddock_broker_metrics_series_dropped{kind="partition"}`); got != 2 {
		t.Errorf("dropped = %v, want 2", got)
	}
	one := metric(t, b, `paddock_partition_size_bytes{partition="0",topic="many"}`)
	if total := metric(t, b, "paddock_broker_log_size_bytes"); total != 3*one {
		t.Errorf("log size total %v, want the three partitions' %v", total, 3*one)
	}
}
