package interop

import (
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/paddock-dev/paddock/internal/testkit"
)

// saramaConfig is an idempotent producer's config (acks=all, one request in flight, as
// sarama requires for idempotence) that also consumes.
func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_7_0_0
	cfg.ClientID = "interop-sarama"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Retry.Max = 20
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	return cfg
}

func saramaMessage(topic string, r record) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(r.Key), Value: sarama.ByteEncoder(r.Value)}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: []byte(h.Value)})
	}
	return m
}

// TestSaramaSyncProducerAndPartitionConsumer: with each of sarama's compression codecs, on a
// topic of its own.
func TestSaramaSyncProducerAndPartitionConsumer(t *testing.T) {
	addrs := newCluster(t)
	for _, codec := range []sarama.CompressionCodec{sarama.CompressionNone, sarama.CompressionGZIP, sarama.CompressionSnappy, sarama.CompressionLZ4, sarama.CompressionZSTD} {
		t.Run(codec.String(), func(t *testing.T) {
			topic := "sarama-sync-" + codec.String()
			createTopic(t, addrs, topic, 3)
			cfg := saramaConfig()
			cfg.Producer.Compression = codec
			p, err := sarama.NewSyncProducer(addrs, cfg)
			if err != nil {
				t.Fatalf("sarama sync producer: %v", err)
			}
			defer func() { _ = p.Close() }()
			wrote := testRecords(topic, 60, true)
			for i := range wrote {
				partition, offset, err := p.SendMessage(saramaMessage(topic, wrote[i]))
				if err != nil {
					t.Fatalf("send %s: %v", wrote[i].Key, err)
				}
				wrote[i].Partition, wrote[i].Offset = partition, offset
			}
			checkReadBack(t, wrote, saramaConsume(t, addrs, saramaConfig(), topic, wrote))
		})
	}
}

func TestSaramaAsyncProducerAndPartitionConsumer(t *testing.T) {
	const topic = "sarama-async"
	addrs := newCluster(t)
	createTopic(t, addrs, topic, 3)
	p, err := sarama.NewAsyncProducer(addrs, saramaConfig())
	if err != nil {
		t.Fatalf("sarama async producer: %v", err)
	}
	defer func() { _ = p.Close() }()
	wrote := testRecords(topic, 200, true)
	for i := range wrote {
		m := saramaMessage(topic, wrote[i])
		m.Metadata = i
		p.Input() <- m
	}
	timeout := time.After(testkit.Deadline)
	for range wrote {
		select {
		case m := <-p.Successes():
			i := m.Metadata.(int)
			wrote[i].Partition, wrote[i].Offset = m.Partition, m.Offset
		case err := <-p.Errors():
			t.Fatalf("async produce: %v", err)
		case <-timeout:
			t.Fatal("timed out waiting for the async producer's acknowledgements")
		}
	}
	checkReadBack(t, wrote, saramaConsume(t, addrs, saramaConfig(), topic, wrote))
}

// saramaConsume reads, with one sarama PartitionConsumer per partition from the oldest
// offset, as many records from each partition as wrote says landed there.
func saramaConsume(t *testing.T, addrs []string, cfg *sarama.Config, topic string, wrote []record) []record {
	t.Helper()
	want := map[int32]int{}
	for _, r := range wrote {
		want[r.Partition]++
	}
	c, err := sarama.NewConsumer(addrs, cfg)
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer func() { _ = c.Close() }()
	var read []record
	for partition, n := range want {
		pc, err := c.ConsumePartition(topic, partition, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("consume partition %d: %v", partition, err)
		}
		timeout := time.After(testkit.Deadline)
		for got := 0; got < n; got++ {
			select {
			case m := <-pc.Messages():
				r := record{Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value}
				for _, h := range m.Headers {
					r.Headers = append(r.Headers, header{Key: string(h.Key), Value: string(h.Value)})
				}
				read = append(read, r)
			case err := <-pc.Errors():
				t.Fatalf("partition %d: %v", partition, err)
			case <-timeout:
				t.Fatalf("partition %d: read %d of %d records in %v", partition, got, n, testkit.Deadline)
			}
		}
		if err := pc.Close(); err != nil {
			t.Errorf("close partition consumer %d: %v", partition, err)
		}
	}
	return read
}

// sarama's ClusterAdmin on the admin keys: DeleteRecords moves the log start that the client
// then reads as the oldest offset, and DescribeLogDirs names each partition once, at its
// leader, with its bytes, over the one shared directory.
func TestSaramaClusterAdminDeletesRecordsAndDescribesLogDirs(t *testing.T) {
	const topic = "sarama-admin"
	addrs := newCluster(t)
	createTopic(t, addrs, topic, 2)
	cfg := saramaConfig()
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		t.Fatalf("sarama sync producer: %v", err)
	}
	defer func() { _ = p.Close() }()
	for i := range 20 {
		m := saramaMessage(topic, record{Key: []byte{byte(i)}, Value: []byte("admin keys")})
		m.Partition = int32(i % 2)
		if _, _, err := p.SendMessage(m); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	client, err := sarama.NewClient(addrs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Close() }()
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteRecords(topic, map[int32]int64{0: 4, 1: -1}); err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}
	for partition, want := range map[int32]int64{0: 4, 1: 10} {
		if got, err := client.GetOffset(topic, partition, sarama.OffsetOldest); err != nil || got != want {
			t.Errorf("partition %d: oldest offset %d %v, want %d", partition, got, err, want)
		}
	}
	var ids []int32
	for _, b := range client.Brokers() {
		ids = append(ids, b.ID())
	}
	dirs, err := admin.DescribeLogDirs(ids)
	if err != nil {
		t.Fatalf("DescribeLogDirs: %v", err)
	}
	seen := map[int32]int{}
	for broker, ds := range dirs {
		if len(ds) != 1 || ds[0].ErrorCode != 0 || ds[0].Path == "" {
			t.Fatalf("broker %d: log dirs %+v, want the one data directory", broker, ds)
		}
		for _, dt := range ds[0].Topics {
			for _, dp := range dt.Partitions {
				if dt.Topic != topic {
					continue
				}
				leader, err := client.Leader(topic, dp.PartitionID)
				if err != nil || leader.ID() != broker || dp.Size <= 0 {
					t.Errorf("partition %d on broker %d: size %d (leader %v %v)", dp.PartitionID, broker, dp.Size, leader, err)
				}
				seen[dp.PartitionID]++
			}
		}
	}
	if seen[0] != 1 || seen[1] != 1 {
		t.Errorf("partitions reported %v, want each once", seen)
	}
}
