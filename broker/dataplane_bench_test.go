package broker_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/paddock-dev/paddock/broker/brokertest"
)

// BenchmarkProduceKgo measures a kgo producer (idempotent, acks=all, 1 KiB records) against
// one in-process broker with 16 partitions: MB/s of acknowledged records.
func BenchmarkProduceKgo(b *testing.B) {
	for _, bc := range []struct {
		partitions int32
		batchBytes int32
	}{{16, 1 << 20}, {1, 1 << 20}, {1, 16 << 10}, {16, 16 << 10}} {
		for _, depth := range []int{0, -1} {
			b.Run(fmt.Sprintf("partitions=%d/batch=%dKiB/pipeline=%d", bc.partitions, bc.batchBytes>>10, depth), func(b *testing.B) {
				benchProduce(b, bc.partitions, bc.batchBytes, depth)
			})
		}
	}
}

func benchProduce(b *testing.B, partitions, batchBytes int32, depth int) {
	discard := logr.Discard()
	c := brokertest.Start(b, brokertest.Options{Log: &discard, PipelineDepth: depth})
	c.CreateTopic("bench", partitions, nil)
	cl := c.Client(kgo.DefaultProduceTopic("bench"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(1<<16), kgo.ProducerBatchMaxBytes(batchBytes))
	value := make([]byte, 1024)
	ctx := context.Background()
	// Warm up: metadata, producer id.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(1024)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for i := 0; i < b.N; i++ {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)*1024/1e6/time.Since(start).Seconds(), "MB/s_acked")
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}
