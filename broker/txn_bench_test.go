package broker_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/paddock-dev/paddock/broker/brokertest"
)

// txnBench is what one BenchmarkTransactions mode measured, for the ratios printed at its
// end (modes run in order, idempotent first).
var txnBench struct {
	sync.Mutex
	mbps map[string]float64
}

// BenchmarkTransactions measures transactional produce (kgo, acks=all, 1 KiB incompressible
// records, 16 partitions, one in-process broker that is also the transaction coordinator)
// against idempotent produce in the same run: b.N records per mode; a transaction is
// committed every 100 ms or every 10,000 records. It reports MB/s of committed records and
// the commit latency (EndTransaction after the transaction's records are flushed: the
// EndTxn round trip, durable PrepareCommit included) p50 and p99, and prints
// each transactional mode's throughput as a ratio of the idempotent one.
//
//	go test -run '^$' -bench '^BenchmarkTransactions$' -benchtime 50000x ./broker/
func BenchmarkTransactions(b *testing.B) {
	txnBench.mbps = map[string]float64{}
	for _, mode := range []string{"idempotent", "commit=every-100ms", "commit=every-10000-records"} {
		b.Run("mode="+mode, func(b *testing.B) { benchTxnMode(b, mode) })
	}
	txnBench.Lock()
	defer txnBench.Unlock()
	base := txnBench.mbps["idempotent"]
	for _, mode := range []string{"commit=every-100ms", "commit=every-10000-records"} {
		if v, ok := txnBench.mbps[mode]; ok && base > 0 {
			fmt.Printf("transactions: %s %.1f MB/s = %.2f× idempotent (%.1f MB/s)\n", mode, v, v/base, base)
		}
	}
}

func benchTxnMode(b *testing.B, mode string) {
	discard := logr.Discard()
	c := brokertest.Start(b, brokertest.Options{Log: &discard})
	c.CreateTopic("bench", 16, nil)
	opts := []kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic("bench"), kgo.RequiredAcks(kgo.AllISRAcks()),
		// 4 MiB buffered at most, so a 100 ms transaction holds about 100 ms of acknowledged
		// produce rather than whatever fits in the client's buffer.
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1 << 12), kgo.ProducerBatchCompression(kgo.NoCompression())}
	if mode != "idempotent" {
		opts = append(opts, kgo.TransactionalID("bench-"+mode))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	value := randomValue()
	// Warm up: metadata, the producer id (and the transactional id's first transaction).
	if mode != "idempotent" {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	if mode != "idempotent" {
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
	}

	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	produce := func(i int) {
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
	var commits []time.Duration
	b.SetBytes(1024)
	b.ResetTimer()
	start := time.Now()
	if mode == "idempotent" {
		for i := range b.N {
			produce(i)
		}
		wg.Wait()
	} else {
		for i := 0; i < b.N; {
			if err := cl.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
			began := time.Now()
			for n := 0; i < b.N; n++ {
				if mode == "commit=every-10000-records" && n == 10000 || mode == "commit=every-100ms" && time.Since(began) >= 100*time.Millisecond {
					break
				}
				produce(i)
				i++
			}
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			ending := time.Now()
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				b.Fatal(err)
			}
			commits = append(commits, time.Since(ending))
			wg.Wait()
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	mbps := float64(b.N) * 1024 / 1e6 / elapsed.Seconds()
	b.ReportMetric(mbps, "MB/s_committed")
	if len(commits) > 0 {
		slices.Sort(commits)
		b.ReportMetric(float64(commits[len(commits)/2].Microseconds())/1000, "ms_commit_p50")
		b.ReportMetric(float64(commits[min(len(commits)-1, len(commits)*99/100)].Microseconds())/1000, "ms_commit_p99")
		b.ReportMetric(float64(len(commits)), "transactions")
	}
	txnBench.Lock()
	txnBench.mbps[mode] = mbps
	txnBench.Unlock()
}
