package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/paddock-dev/paddock/internal/testkit"
)

// txnValues are the values one client's three transactions wrote: prefix-commit-a-<i> and
// prefix-commit-b-<i> committed, prefix-abort-<i> aborted, 30 each.
func txnValues(prefix string) (committed, aborted []string) {
	for i := range 30 {
		committed = append(committed, fmt.Sprintf("%s-commit-a-%d", prefix, i), fmt.Sprintf("%s-commit-b-%d", prefix, i))
		aborted = append(aborted, fmt.Sprintf("%s-abort-%d", prefix, i))
	}
	slices.Sort(committed)
	slices.Sort(aborted)
	return committed, aborted
}

// TestTransactionsOfEveryClientReadCommittedByEveryClient: sarama's, kafkajs's and kgo's
// transactional producers each commit, abort and commit a transaction of 30 records on a
// topic of their own (3 partitions over two brokers). Read committed by kgo, sarama, kcat
// (librdkafka, to the end of each partition) and, for its own topic, kafkajs: exactly the 60
// committed records, none of the aborted ones; read uncommitted by kgo: all 90.
func TestTransactionsOfEveryClientReadCommittedByEveryClient(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed: run `make kcat` (hack/install-kcat.sh)")
	}
	addrs := newCluster(t)
	ctx := testCtx(t)

	createTopic(t, addrs, "txn-sarama", 3)
	cfg := saramaConfig()
	cfg.Producer.Transaction.ID = "interop-sarama-txn"
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		t.Fatalf("sarama transactional producer: %v", err)
	}
	for _, step := range []struct {
		prefix string
		commit bool
	}{{"sarama-commit-a", true}, {"sarama-abort", false}, {"sarama-commit-b", true}} {
		if err := p.BeginTxn(); err != nil {
			t.Fatalf("sarama begin %s: %v", step.prefix, err)
		}
		for i := range 30 {
			m := &sarama.ProducerMessage{Topic: "txn-sarama", Partition: int32(i % 3), Value: sarama.StringEncoder(fmt.Sprintf("%s-%d", step.prefix, i))}
			if _, _, err := p.SendMessage(m); err != nil {
				t.Fatalf("sarama send %s-%d: %v", step.prefix, i, err)
			}
		}
		end := p.CommitTxn
		if !step.commit {
			end = p.AbortTxn
		}
		if err := end(); err != nil {
			t.Fatalf("sarama end %s (commit %v): %v", step.prefix, step.commit, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Errorf("close the sarama producer: %v", err)
	}

	createTopic(t, addrs, "txn-kgo", 3)
	kp := kgoClient(t, addrs, kgo.TransactionalID("interop-kgo-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, step := range []struct {
		prefix string
		commit bool
	}{{"kgo-commit-a", true}, {"kgo-abort", false}, {"kgo-commit-b", true}} {
		if err := kp.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			if err := kp.ProduceSync(ctx, &kgo.Record{Topic: "txn-kgo", Partition: int32(i % 3), Value: fmt.Appendf(nil, "%s-%d", step.prefix, i)}).FirstErr(); err != nil {
				t.Fatalf("kgo produce %s-%d: %v", step.prefix, i, err)
			}
		}
		if err := kp.EndTransaction(ctx, kgo.TransactionEndTry(step.commit)); err != nil {
			t.Fatalf("kgo end %s: %v", step.prefix, err)
		}
	}

	kafkajsConsumed := runKafkajsTransactions(t, addrs, "txn-kafkajs")

	for _, client := range []string{"sarama", "kgo", "kafkajs"} {
		topic := "txn-" + client
		committed, aborted := txnValues(client)
		t.Run(client, func(t *testing.T) {
			check := func(reader string, got []string) {
				t.Helper()
				slices.Sort(got)
				if !slices.Equal(got, committed) {
					var leaked []string
					for _, v := range got {
						if _, found := slices.BinarySearch(aborted, v); found {
							leaked = append(leaked, v)
						}
					}
					t.Errorf("%s read committed %d records (%d aborted ones among them, the first: %v), want the %d committed",
						reader, len(got), len(leaked), leaked[:min(len(leaked), 3)], len(committed))
				}
			}
			check("kgo", kgoRead(t, addrs, topic, kgo.ReadCommitted(), len(committed)))
			check("sarama", saramaReadCommitted(t, addrs, topic, len(committed)))
			check("kcat", kcatReadCommitted(t, addrs, topic))
			if client == "kafkajs" {
				check("kafkajs", kafkajsConsumed)
			}
			all := append(slices.Clone(committed), aborted...)
			slices.Sort(all)
			if got := kgoRead(t, addrs, topic, kgo.ReadUncommitted(), len(all)); !slices.Equal(got, all) {
				t.Errorf("kgo read uncommitted %d records, want all %d", len(got), len(all))
			}
		})
	}
}

// kgoRead reads topic from the start at level until it has n records, then for another
// second (so records past the n-th show), and returns the values sorted.
func kgoRead(t *testing.T, addrs []string, topic string, level kgo.IsolationLevel, n int) []string {
	t.Helper()
	ctx := testCtx(t)
	cl := kgoClient(t, addrs, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	var grace <-chan time.Time
	for {
		select {
		case <-grace:
			slices.Sort(got)
			return got
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("kgo read %d of %d records of %s: %v", len(got), n, topic, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		if len(got) >= n && grace == nil {
			grace = time.After(time.Second)
		}
	}
}

// saramaReadCommitted reads every partition of topic (3) read-committed from the oldest
// offset until n records in all, then for another second.
func saramaReadCommitted(t *testing.T, addrs []string, topic string, n int) []string {
	t.Helper()
	cfg := saramaConfig()
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	c, err := sarama.NewConsumer(addrs, cfg)
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer func() { _ = c.Close() }()
	values := make(chan string, 1024)
	for partition := range int32(3) {
		pc, err := c.ConsumePartition(topic, partition, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("sarama consume %s/%d: %v", topic, partition, err)
		}
		defer func() { _ = pc.Close() }()
		go func() {
			for m := range pc.Messages() {
				values <- string(m.Value)
			}
		}()
	}
	var got []string
	timeout := time.After(testkit.Deadline)
	var grace <-chan time.Time
	for {
		select {
		case v := <-values:
			got = append(got, v)
			if len(got) >= n && grace == nil {
				grace = time.After(time.Second)
			}
		case <-grace:
			return got
		case <-timeout:
			t.Fatalf("sarama read %d of %d records of %s", len(got), n, topic)
		}
	}
}

// kcatReadCommitted reads topic to the end of every partition with librdkafka at
// isolation.level=read_committed (-e: the end is the last stable offset).
func kcatReadCommitted(t *testing.T, addrs []string, topic string) []string {
	t.Helper()
	cmd := exec.CommandContext(testCtx(t), "kcat", "-C", "-b", strings.Join(addrs, ","), "-t", topic, "-o", "beginning", "-e",
		"-X", "isolation.level=read_committed", "-f", "%s\n", "-q")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -C read_committed: %v\n%s", err, out)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			got = append(got, line)
		}
	}
	return got
}

// runKafkajsTransactions runs js/transactions.js on topic and returns what its consumer
// read committed.
func runKafkajsTransactions(t *testing.T, addrs []string, topic string) []string {
	t.Helper()
	node := requireKafkajs(t)
	cmd := exec.CommandContext(testCtx(t), node, filepath.Join("js", "transactions.js"), strings.Join(addrs, ","), topic, "3", "interop-kafkajs-txn")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node js/transactions.js: %v\n%s", err, stderr.Bytes())
	}
	var res struct {
		Consumed []string `json:"consumed"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("js/transactions.js printed %q: %v", out, err)
	}
	return res.Consumed
}
