package interop

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/testkit"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

// TestACompactedTopicReadsTheLatestValueOfEveryKeyAcrossItsGaps: on a topic with
// cleanup.policy=compact, 300 records over 20 keys (tombstones among them) are cleaned by the
// broker's cleaner; kgo, sarama, kcat (librdkafka) and kafkajs then read it from the beginning across
// the offset gaps to its end, each seeing every key's latest record at its offset and only
// records that were produced there. DescribeConfigs reads back exactly "compact" (what Kafka
// Connect checks), and a keyless record is refused with INVALID_RECORD, appending nothing.
func TestACompactedTopicReadsTheLatestValueOfEveryKeyAcrossItsGaps(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed: run `make kcat` (hack/install-kcat.sh)")
	}
	c := kubebrokers.NewCluster(t, 2, kubebrokers.Options{Namespace: "compact", Config: map[string]string{"log.cleaner.backoff.ms": "100"}})
	addrs := c.Addrs
	ctx := testCtx(t)
	const topic = "changelog"
	str := func(s string) *string { return &s }
	adm := kadm.NewClient(kgoClient(t, addrs))
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": str("compact"), "segment.ms": str("300"), "min.cleanable.dirty.ratio": str("0.01"),
	}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	waitLeaders(t, addrs, topic, 1)

	producer := kgoClient(t, addrs, kgo.DefaultProduceTopic(topic))
	produced := map[int64]record{}
	latest := map[string]int64{}
	produce := func(key string, value []byte) int64 {
		r, err := producer.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: value}).First()
		if err != nil {
			t.Fatalf("produce %s: %v", key, err)
		}
		produced[r.Offset] = record{Offset: r.Offset, Key: []byte(key), Value: value}
		latest[key] = r.Offset
		return r.Offset
	}
	// A second idempotent producer writes key-0 once, first. Its only batch is superseded by
	// key-0's later records, and the cleaner keeps it as a batch without records (a
	// producer's last batch keeps its sequence), so every client below reads across one.
	early := kgoClient(t, addrs, kgo.DefaultProduceTopic(topic))
	if err := early.ProduceSync(ctx, &kgo.Record{Key: []byte("key-0"), Value: []byte("early")}).FirstErr(); err != nil {
		t.Fatalf("produce the early key-0: %v", err)
	}
	for i := range 300 {
		var v []byte
		if i%13 != 12 {
			v = fmt.Appendf(nil, "value-%d", i)
		}
		produce(fmt.Sprint("key-", i%20), v)
	}
	time.Sleep(400 * time.Millisecond) // past segment.ms: the next record rolls the segment
	last := produce("roll", []byte("roll"))

	// The cleaner runs every 100 ms: wait until a read from the start shows it cleaned.
	var got []record
	testkit.Eventually(t, "the cleaner to clean the closed segment", func() bool {
		got = kgoReadAll(t, addrs, topic, last)
		return len(got) < 100
	})
	check := func(client string, read []record) {
		t.Helper()
		prev := int64(-1)
		seen := map[int64]bool{}
		for _, r := range read {
			want, ok := produced[r.Offset]
			switch {
			case r.Offset <= prev:
				t.Fatalf("%s: offset %d after %d", client, r.Offset, prev)
			case !ok || !bytes.Equal(want.Key, r.Key) || !bytes.Equal(want.Value, r.Value) || (want.Value == nil) != (r.Value == nil):
				t.Fatalf("%s: offset %d reads key %q value %q; produced %v", client, r.Offset, r.Key, r.Value, want)
			}
			prev, seen[r.Offset] = r.Offset, true
		}
		for key, off := range latest {
			if !seen[off] {
				t.Fatalf("%s: key %s's latest record (offset %d) was not read", client, key, off)
			}
		}
		if prev != last || len(read) >= 100 {
			t.Fatalf("%s: read %d records ending at %d; want the cleaned log (fewer than 100) up to %d", client, len(read), prev, last)
		}
	}
	if n := emptyBatches(t, addrs, topic); n < 1 {
		t.Fatalf("the cleaned log holds %d batches without records, want the early producer's", n)
	}
	check("kgo", got)
	check("sarama", saramaReadAll(t, addrs, topic, last))
	out, err := exec.CommandContext(ctx, "kcat", "-C", "-b", addrs[0], "-t", topic, "-o", "beginning", "-e", "-q", "-f", kcatConsumeFormat).Output()
	if err != nil {
		t.Fatalf("kcat -C: %v", err)
	}
	read, err := parseKcat(out)
	if err != nil {
		t.Fatalf("kcat output: %v", err)
	}
	check("kcat", read)
	check("kafkajs", kafkajsReadAll(t, addrs, topic, last))

	// What Kafka Connect's TopicAdmin.verifyTopicCleanupPolicyOnlyCompact reads.
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := rcs.On(topic, nil); err != nil || !hasConfig(rc.Configs, "cleanup.policy", "compact") {
		t.Fatalf("kadm DescribeConfigs cleanup.policy: %+v, %v; want exactly compact", rc, err)
	}
	sa := saramaAdmin(t, addrs)
	described, err := sa.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"cleanup.policy"}}},
		sarama.DescribeConfigsOptions{})
	if err != nil || len(described) != 1 || len(described[0].Configs) != 1 || described[0].Configs[0].Value != "compact" {
		t.Fatalf("sarama DescribeConfigs cleanup.policy: %+v, %v; want exactly compact", described, err)
	}

	// A keyless record: INVALID_RECORD, nothing appended.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := ends.Lookup(topic, 0)
	keyless := kgoClient(t, addrs, kgo.DefaultProduceTopic(topic), kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	if err := keyless.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("a keyless record on a compacted topic: %v, want INVALID_RECORD", err)
	}
	ends, err = adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := ends.Lookup(topic, 0); after.Offset != before.Offset {
		t.Fatalf("the high watermark moved from %d to %d after a refused record", before.Offset, after.Offset)
	}
}

// emptyBatches counts the record batches without records that a Fetch of topic's partition 0
// from offset 0 returns, read straight from the leader.
func emptyBatches(t *testing.T, addrs []string, topic string) int {
	t.Helper()
	cl := kgoClient(t, addrs)
	defer cl.Close()
	ctx := testCtx(t)
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	d := topics[topic]
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 0, 16<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, d.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, 0, 16<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(d.Partitions[0].Leader)))
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("fetch %s from offset 0: %+v, %v", topic, resp, err)
	}
	b, n := resp.Topics[0].Partitions[0].RecordBatches, 0
	for len(b) >= 61 { // a batch header: length at 8, the record count at 57
		size := 12 + int(binary.BigEndian.Uint32(b[8:12]))
		if size > len(b) {
			break // a partial batch at the end of the response
		}
		if binary.BigEndian.Uint32(b[57:61]) == 0 {
			n++
		}
		b = b[size:]
	}
	return n
}

func hasConfig(cs []kadm.Config, name, value string) bool {
	for _, c := range cs {
		if c.Key == name {
			return c.Value != nil && *c.Value == value
		}
	}
	return false
}

// kgoReadAll reads partition 0 of topic from its start up to offset last.
func kgoReadAll(t *testing.T, addrs []string, topic string, last int64) []record {
	t.Helper()
	cl := kgoClient(t, addrs, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(testCtx(t), testkit.Deadline)
	defer cancel()
	var out []record
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kgo read %d records, never reached offset %d: %v", len(out), last, ctx.Err())
		}
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("kgo fetch: %v", err)
		}
		for _, r := range fs.Records() {
			out = append(out, record{Offset: r.Offset, Key: r.Key, Value: r.Value})
			if r.Offset >= last {
				return out
			}
		}
	}
}

// saramaReadAll reads partition 0 of topic from the oldest offset up to offset last.
func saramaReadAll(t *testing.T, addrs []string, topic string, last int64) []record {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	c, err := sarama.NewConsumer(addrs, cfg)
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer func() { _ = c.Close() }()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pc.Close() }()
	timeout := time.After(testkit.Deadline)
	var out []record
	for {
		select {
		case m := <-pc.Messages():
			out = append(out, record{Offset: m.Offset, Key: m.Key, Value: m.Value})
			if m.Offset >= last {
				return out
			}
		case err := <-pc.Errors():
			t.Fatalf("sarama: %v", err)
		case <-timeout:
			t.Fatalf("sarama read %d records, never reached offset %d", len(out), last)
		}
	}
}

func saramaAdmin(t *testing.T, addrs []string) sarama.ClusterAdmin {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	a, err := sarama.NewClusterAdmin(addrs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// kafkajsReadAll runs js/compaction.js: kafkajs reads partition 0 of topic from the beginning
// up to offset last.
func kafkajsReadAll(t *testing.T, addrs []string, topic string, last int64) []record {
	t.Helper()
	node := requireKafkajs(t)
	var stderr bytes.Buffer
	cmd := exec.CommandContext(testCtx(t), node, filepath.Join("js", "compaction.js"), strings.Join(addrs, ","), topic, strconv.FormatInt(last, 10))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node js/compaction.js: %v\n%s", err, stderr.Bytes())
	}
	var read []record
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m struct {
			Offset     string
			Key, Value *string
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("kafkajs output %q: %v", line, err)
		}
		off, err := strconv.ParseInt(m.Offset, 10, 64)
		if err != nil {
			t.Fatalf("kafkajs offset %q: %v", m.Offset, err)
		}
		r := record{Offset: off}
		for _, f := range []struct {
			in  *string
			out *[]byte
		}{{m.Key, &r.Key}, {m.Value, &r.Value}} {
			if f.in == nil {
				continue
			}
			b, err := base64.StdEncoding.DecodeString(*f.in)
			if err != nil {
				t.Fatalf("kafkajs output %q: %v", line, err)
			}
			*f.out = append([]byte{}, b...)
		}
		read = append(read, r)
	}
	return read
}
