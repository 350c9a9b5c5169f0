package broker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
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
	produceLoad(b, c.Addrs(), batchBytes)
}

// produceLoad produces b.N 1 KiB records to topic "bench" of the cluster at seeds with an
// idempotent kgo producer (acks=all, no linger, no compression), timing from the first record
// after a warm-up to the last acknowledgement, and reports MB/s_acked (and MB/s, b.SetBytes).
func produceLoad(b *testing.B, seeds []string, batchBytes int32, opts ...kgo.Opt) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("bench"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(1 << 16), kgo.ProducerBatchMaxBytes(batchBytes), kgo.ProducerBatchCompression(kgo.NoCompression())}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
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
	consumeLoad(b, c.Addrs())
}

// consumeLoad writes b.N 1 KiB records to topic "bench" of the cluster at seeds (acks=1,
// untimed), then times a kgo consumer reading them all from the start: MB/s_consumed (and
// MB/s, b.SetBytes).
func consumeLoad(b *testing.B, seeds []string, opts ...kgo.Opt) {
	p, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("bench"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression())}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
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
	cons, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
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

// BenchmarkCompare is `make bench`'s load on two servers in the same run: one in-process
// paddock broker (storage with fsync) and franz-go's kfake (one in-memory broker, no fsync),
// each with a 16-partition topic — produce (kgo, idempotent, acks=all, 1 KiB records, 1 MiB
// batches) and consume (kgo reading everything from the start). hack/benchreport prints the
// ratios; each sub-benchmark starts a fresh server, so b.N records are all it holds. Consume
// runs against the broker twice: records sent from the segment files (sendfile, the default)
// and through memory with the vectored write. Both also run against a broker whose listener
// is TLS with SCRAM-SHA-512 (server=paddock-tls), the cost of a secured listener.
func BenchmarkCompare(b *testing.B) {
	discard := logr.Discard()
	paddock := func(b *testing.B) []string {
		c := brokertest.Start(b, brokertest.Options{Log: &discard})
		c.CreateTopic("bench", 16, nil)
		return c.Addrs()
	}
	servers := []struct {
		name  string
		start func(*testing.B) []string
	}{{"paddock", paddock}, {"kfake", startKfake}}
	for _, s := range servers {
		b.Run("produce/server="+s.name, func(b *testing.B) { produceLoad(b, s.start(b), 1<<20) })
	}
	// Consume also through the vectored write from memory (CopyFetchData), the path taken
	// where sendfile is not (a file system that gives no *os.File; TLS copies from the file
	// through a buffer instead).
	vectored := func(b *testing.B) []string {
		c := brokertest.Start(b, brokertest.Options{Log: &discard, CopyFetchData: true})
		c.CreateTopic("bench", 16, nil)
		return c.Addrs()
	}
	for _, s := range append(servers, struct {
		name  string
		start func(*testing.B) []string
	}{"paddock-vectored", vectored}) {
		b.Run("consume/server="+s.name, func(b *testing.B) { consumeLoad(b, s.start(b)) })
	}
	b.Run("produce/server=paddock-tls", func(b *testing.B) {
		seeds, opts := startSecuredBench(b)
		produceLoad(b, seeds, 1<<20, opts...)
	})
	b.Run("consume/server=paddock-tls", func(b *testing.B) {
		seeds, opts := startSecuredBench(b)
		consumeLoad(b, seeds, opts...)
	})
}

// startSecuredBench is one broker whose listener is TLS with SCRAM-SHA-512 and a
// 16-partition topic "bench", and the kgo options that reach it.
func startSecuredBench(b *testing.B) ([]string, []kgo.Opt) {
	discard := logr.Discard()
	c := brokertest.Start(b, brokertest.Options{Log: &discard,
		Secured: &brokertest.Secured{Authentication: v1alpha1.AuthenticationScramSHA512, User: "bench", Password: "bench-password"}})
	c.CreateTopic("bench", 16, nil)
	return c.Addrs(), []kgo.Opt{kgo.DialTLSConfig(c.ClientTLS), kgo.SASL(kscram.Auth{User: "bench", Pass: "bench-password"}.AsSha512Mechanism())}
}

// BenchmarkConnect measures what a new connection costs before its first answer: a kgo
// client's dial, then ApiVersions and Metadata (Ping), on a plaintext listener, a TLS one
// and a TLS one with SCRAM-SHA-512 (SaslHandshake, two SaslAuthenticate round trips and the
// server's PBKDF2-derived keys checked; 4096 iterations are the client's cost, paid once per
// connection). hack/benchreport prints each against plaintext.
func BenchmarkConnect(b *testing.B) {
	discard := logr.Discard()
	for _, kind := range []string{"plaintext", "tls", "tls+scram-sha-512"} {
		b.Run("listener="+kind, func(b *testing.B) {
			opts := brokertest.Options{Log: &discard}
			switch kind {
			case "tls":
				opts.Secured = &brokertest.Secured{}
			case "tls+scram-sha-512":
				opts.Secured = &brokertest.Secured{Authentication: v1alpha1.AuthenticationScramSHA512, User: "bench", Password: "bench-password"}
			}
			c := brokertest.Start(b, opts)
			var clientOpts []kgo.Opt
			if c.ClientTLS != nil {
				clientOpts = append(clientOpts, kgo.DialTLSConfig(c.ClientTLS))
			}
			if opts.Secured != nil && opts.Secured.Authentication != "" {
				clientOpts = append(clientOpts, kgo.SASL(kscram.Auth{User: "bench", Pass: "bench-password"}.AsSha512Mechanism()))
			}
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...)}, clientOpts...)...)
				if err != nil {
					b.Fatal(err)
				}
				if err := cl.Ping(ctx); err != nil {
					b.Fatal(err)
				}
				cl.Close()
			}
		})
	}
}

// startKfake runs a one-broker kfake cluster with a 16-partition topic "bench", listening on
// a loopback port below 32768, until the benchmark ends.
func startKfake(b *testing.B) []string {
	b.Helper()
	listen := func(network, _ string) (net.Listener, error) {
		var err error
		for range 100 {
			var ln net.Listener
			if ln, err = net.Listen(network, net.JoinHostPort("127.0.0.1", strconv.Itoa(20000+rand.IntN(12000)))); err == nil {
				return ln, nil
			}
		}
		return nil, err
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(16, "bench"), kfake.ListenFn(listen))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c.ListenAddrs()
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
