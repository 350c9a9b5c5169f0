package interop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func TestKafkaGoWriterAndPartitionReader(t *testing.T) {
	const topic, partitions = "kafka-go", 3
	addrs := newCluster(t)
	createTopic(t, addrs, topic, partitions)
	checkKafkaGo(t, addrs, topic, partitions, nil, nil)
}

// checkKafkaGo writes 150 records to topic (partitions partitions, existing) with a kafka-go
// Writer through transport, reads them all back with one Reader per partition through dialer
// and checks they are what was written; nil transport and dialer are kafka-go's defaults
// (plaintext).
func checkKafkaGo(t *testing.T, addrs []string, topic string, partitions int, transport *kafka.Transport, dialer *kafka.Dialer) {
	t.Helper()
	ctx := testCtx(t)
	w := &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: 10 * time.Millisecond, MaxAttempts: 20, WriteBackoffMin: 50 * time.Millisecond}
	if transport != nil {
		w.Transport = transport
	}
	wrote := testRecords(topic, 150, true)
	msgs := make([]kafka.Message, len(wrote))
	for i, r := range wrote {
		msgs[i] = kafka.Message{Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: h.Key, Value: []byte(h.Value)})
		}
	}
	// In three calls, so some batches go out while others are being assembled.
	for _, part := range [][]kafka.Message{msgs[:10], msgs[10:100], msgs[100:]} {
		if err := w.WriteMessages(ctx, part...); err != nil {
			t.Fatalf("kafka-go write: %v", err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("kafka-go writer close: %v", err)
	}

	// One Reader per partition (no group), from the first offset, until every record is back.
	// The Writer does not report offsets, so the records are matched by key.
	readCtx, stop := context.WithCancel(ctx)
	defer stop()
	var mu sync.Mutex
	var read []record
	var wg sync.WaitGroup
	errs := make(chan error, partitions)
	for p := range partitions {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: addrs, Topic: topic, Partition: p, MaxWait: 200 * time.Millisecond, Dialer: dialer})
		wg.Go(func() {
			defer func() { _ = r.Close() }()
			for {
				m, err := r.ReadMessage(readCtx)
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						errs <- err
					}
					return
				}
				rec := record{Partition: int32(m.Partition), Offset: m.Offset, Key: m.Key, Value: m.Value}
				for _, h := range m.Headers {
					rec.Headers = append(rec.Headers, header{Key: h.Key, Value: string(h.Value)})
				}
				mu.Lock()
				read = append(read, rec)
				if len(read) == len(wrote) {
					stop()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("kafka-go reader: %v", err)
	}
	checkReadBack(t, wrote, read)
}
