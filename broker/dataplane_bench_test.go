package broker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/paddock-dev/paddock/broker/brokertest"
)

// randomValue is a 1 KiB record value that does not compress, so the bytes measured are the
// bytes stored (kgo compresses with snappy by default; zeros would measure its CPU).
func randomValue() []byte {
	v := make([]byte, 1024)
	for i := range v {
		v[i] = byte(rand.Uint32())
	}
	return v
}

// BenchmarkProduceKgo measures a kgo producer (idempotent, acks=all, 1 KiB incompressible
// records, no compression) against one in-process broker: MB/s of acknowledged records, for
// 1 and 16 partitions, 1 MiB (kgo's default) and 16 KiB (Java's default) batches, pipelined
// answers (PipelineDepth 0) and one request at a time (-1).
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
		kgo.MaxBufferedRecords(1<<16), kgo.ProducerBatchMaxBytes(batchBytes), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := randomValue()
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

// BenchmarkConsumeKgo measures a kgo consumer reading 1 KiB records back from one in-process
// broker with 16 partitions (written before the timer starts): MB/s of records consumed.
func BenchmarkConsumeKgo(b *testing.B) {
	discard := logr.Discard()
	c := brokertest.Start(b, brokertest.Options{Log: &discard})
	c.CreateTopic("bench", 16, nil)
	p := c.Client(kgo.DefaultProduceTopic("bench"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := randomValue()
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < b.N; i++ {
		wg.Add(1)
		p.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	cons := c.Client(kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	b.SetBytes(1024)
	b.ResetTimer()
	start := time.Now()
	for got := 0; got < b.N; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			b.Fatal(err)
		}
		got += fs.NumRecords()
	}
	b.ReportMetric(float64(b.N)*1024/1e6/time.Since(start).Seconds(), "MB/s_consumed")
}

// BenchmarkDrain measures SIGTERM → exit of a broker handing its partitions over to another
// (in-process, the harness playing the operator with the real balancer): for a topic of 0,
// 100 and 1000 partitions over two brokers, so the drained broker leads half.
func BenchmarkDrain(b *testing.B) {
	for _, partitions := range []int32{0, 100, 1000} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			var total time.Duration
			for range b.N {
				b.StopTimer()
				discard := logr.Discard()
				c := brokertest.Start(b, brokertest.Options{Brokers: 2, Log: &discard})
				if partitions > 0 {
					c.CreateTopic("drain", partitions, nil)
				}
				b.StartTimer()
				start := time.Now()
				c.Drain(0)
				err, exited := c.Broker(0).Wait(time.Minute)
				total += time.Since(start)
				if !exited || err != nil || c.Broker(0).B.Leading() != 0 {
					b.Fatalf("exited %v with %v, still leading %d", exited, err, c.Broker(0).B.Leading())
				}
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s_sigterm_to_exit")
		})
	}
}
