package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/testkit"
)

const (
	// eosIn and eosOut are scenario 19's input and output topics; eosTxnID and eosGroup its
	// pipeline's transactional id and consumer group.
	eosIn         = "e2e-eos-in"
	eosOut        = "e2e-eos-out"
	eosPartitions = 6
	eosTxnID      = "e2e-eos-pipeline"
	eosGroup      = "e2e-eos-pipeline"
)

// 19. Exactly once under faults: an idempotent acks=all producer keeps writing an input
// topic; a consume-transform-produce pipeline (a kgo GroupTransactSession: read committed,
// transactional, offsets committed in the transaction) copies each input record to the same
// partition of an output topic. Meanwhile the pipeline's transaction coordinator is killed
// (kill -9), the leader of an output partition is drained (pod delete), and the StatefulSet
// is rolled (kubectl rollout restart). Then: read committed, each output partition is exactly
// its input partition — every record once, in order, none from an aborted transaction — and
// no transaction is left Ongoing or deciding. It prints the transactions committed and
// aborted and how long the longest one stayed open.
func exactlyOnce(ctx context.Context, t *testing.T, s *suite) {
	const scenario = "19 exactly once under faults"
	admCl, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrapName()))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	createTopic(ctx, t, adm, eosPartitions, eosIn)
	createTopic(ctx, t, adm, eosPartitions, eosOut)
	defer func() {
		if _, err := adm.DeleteTopics(ctx, eosIn, eosOut); err != nil {
			t.Errorf("delete %s, %s: %v", eosIn, eosOut, err)
		}
	}()

	// The input: values "eos-<n>", round-robin over the partitions.
	prod, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrapName()), kgo.DefaultProduceTopic(eosIn),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var ackMu sync.Mutex
	acked := 0 // guarded by ackMu
	stopProducing := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stopProducing:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			prod.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "eos-%d", n)}, func(_ *kgo.Record, err error) {
				if err == nil {
					ackMu.Lock()
					acked++
					ackMu.Unlock()
				}
			})
		}
	}()

	// The pipeline.
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(s.bootstrapName()), kgo.TransactionalID(eosTxnID),
		kgo.TransactionTimeout(30*time.Second), kgo.ConsumerGroup(eosGroup), kgo.ConsumeTopics(eosIn),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var (
		statMu              sync.Mutex
		commits, aborts     int           // guarded by statMu
		longest             time.Duration // guarded by statMu
		pipelineErrs        []string      // guarded by statMu
		committedSinceFault int           // guarded by statMu
	)
	pctx, stopPipeline := context.WithCancel(ctx)
	piped := make(chan struct{})
	go func() {
		defer close(piped)
		for pctx.Err() == nil {
			fs := sess.PollFetches(pctx)
			if fs.Empty() {
				continue
			}
			began := time.Now()
			if err := sess.Begin(); err != nil {
				statMu.Lock()
				pipelineErrs = append(pipelineErrs, "begin: "+err.Error())
				statMu.Unlock()
				continue
			}
			fs.EachRecord(func(r *kgo.Record) {
				sess.Produce(pctx, &kgo.Record{Topic: eosOut, Partition: r.Partition, Value: r.Value}, nil)
			})
			committed, err := sess.End(pctx, kgo.TryCommit)
			statMu.Lock()
			longest = max(longest, time.Since(began))
			switch {
			case committed:
				commits++
				committedSinceFault++
			default:
				aborts++
				if err != nil && pctx.Err() == nil {
					pipelineErrs = append(pipelineErrs, "end: "+err.Error())
				}
			}
			statMu.Unlock()
		}
	}()
	defer func() {
		stopPipeline()
		<-piped
		sess.Close()
	}()
	// committing waits until the pipeline committed again after an event.
	committing := func(what string) {
		statMu.Lock()
		committedSinceFault = 0
		statMu.Unlock()
		start := time.Now()
		testkit.Within(t, "the pipeline committing again after "+what, 3*time.Minute, func() (bool, string) {
			statMu.Lock()
			defer statMu.Unlock()
			return committedSinceFault >= 3, fmt.Sprintf("%d commits, %d aborts so far; last errors %v", commits, aborts, pipelineErrs[max(len(pipelineErrs)-3, 0):])
		})
		measure(t, scenario, what+" → three transactions committed after it", time.Since(start))
	}
	committing("the pipeline's start")

	for _, ev := range []struct {
		name string
		do   func() (settled func() (bool, string))
	}{
		{"kill -9 of the transaction coordinator", func() func() (bool, string) {
			id := s.txnCoordinator(ctx, t, eosTxnID)
			t.Logf("%s: broker %d coordinates %s", scenario, id, eosTxnID)
			return s.killBroker(ctx, t, id)
		}},
		{"drain of an output partition's leader", func() func() (bool, string) {
			md, err := adm.Metadata(ctx, eosOut)
			if err != nil {
				t.Fatal(err)
			}
			id := md.Topics[eosOut].Partitions[0].Leader
			t.Logf("%s: broker %d leads %s/0", scenario, id, eosOut)
			return s.deleteBrokerPod(ctx, t, id)
		}},
		{"kubectl rollout restart", func() func() (bool, string) { return s.rolloutRestart(ctx, t) }},
	} {
		start := time.Now()
		settled := ev.do()
		testkit.Within(t, ev.name+": the cluster healthy again", 4*time.Minute, func() (bool, string) {
			if ok, detail := settled(); !ok {
				return false, detail
			}
			return s.healthy(ctx, 3)
		})
		measure(t, scenario, ev.name+" → healthy", time.Since(start))
		committing(ev.name)
	}

	close(stopProducing)
	<-produced
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := prod.Flush(fctx); err != nil {
		t.Fatalf("flush the input producer: %v", err)
	}

	// The input as it is now, every partition to its end.
	in := readPartitions(ctx, t, s, eosIn, kgo.ReadUncommitted(), nil)
	total := 0
	for _, vs := range in {
		total += len(vs)
	}
	ackMu.Lock()
	if total < acked {
		t.Errorf("the input holds %d records, fewer than the %d acknowledged", total, acked)
	}
	ackMu.Unlock()
	// The output catches up with it, read committed: each partition exactly its input's.
	var out map[int32][]string
	testkit.Within(t, "the output read committed equal to the input, partition by partition", 3*time.Minute, func() (bool, string) {
		out = readPartitions(ctx, t, s, eosOut, kgo.ReadCommitted(), in)
		for p := range int32(eosPartitions) {
			if len(out[p]) < len(in[p]) {
				return false, fmt.Sprintf("partition %d: %d of %d records copied", p, len(out[p]), len(in[p]))
			}
		}
		return true, ""
	})
	for p := range int32(eosPartitions) {
		if !slices.Equal(out[p], in[p]) {
			t.Errorf("output partition %d read committed (%d records) is not its input (%d records): duplicates, gaps or reordering; first difference at %d",
				p, len(out[p]), len(in[p]), firstDifference(out[p], in[p]))
		}
	}
	stopPipeline()
	<-piped

	// No transaction hangs: every transactional id the brokers list is Empty or Complete*.
	testkit.Within(t, "no transaction Ongoing or deciding", time.Minute, func() (bool, string) {
		ts, err := freshAdmin(ctx, s, func(adm *kadm.Client) (kadm.ListedTransactions, error) { return adm.ListTransactions(ctx, nil, nil) })
		if err != nil {
			return false, err.Error()
		}
		for id, lt := range ts {
			switch lt.State {
			case "Empty", "CompleteCommit", "CompleteAbort":
			default:
				return false, fmt.Sprintf("%s is %s", id, lt.State)
			}
		}
		return len(ts) > 0, fmt.Sprintf("%d transactional ids listed", len(ts))
	})

	statMu.Lock()
	defer statMu.Unlock()
	t.Logf("%s: %d input records copied exactly once; %d transactions committed, %d aborted; the longest open %v; errors seen by the pipeline: %d",
		scenario, total, commits, aborts, longest.Round(time.Millisecond), len(pipelineErrs))
	count(scenario, "input records, each copied exactly once", total)
	count(scenario, "transactions committed", commits)
	count(scenario, "transactions aborted (retried)", aborts)
	measure(t, scenario, "longest time a transaction stayed open", longest)
}

// readPartitions reads every partition of topic from its start to its end at level (the last
// stable offset read committed) and returns the values by partition. With want, a partition
// is done once it has as many records as want's (the caller compares them): a transactional
// partition ends with a control batch, past its last record. It reads for a minute at most.
func readPartitions(ctx context.Context, t *testing.T, s *suite, topic string, level kgo.IsolationLevel, want map[int32][]string) map[int32][]string {
	t.Helper()
	ends, err := freshAdmin(ctx, s, func(adm *kadm.Client) (kadm.ListedOffsets, error) {
		if level == kgo.ReadCommitted() {
			return adm.ListCommittedOffsets(ctx, topic)
		}
		return adm.ListEndOffsets(ctx, topic)
	})
	if err != nil {
		t.Fatalf("list the end offsets of %s: %v", topic, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrapName()), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[int32][]string{}
	pos := map[int32]int64{}
	done := func() bool {
		finished := true
		ends.Each(func(o kadm.ListedOffset) {
			if pos[o.Partition] < o.Offset && (want == nil || len(out[o.Partition]) < len(want[o.Partition])) {
				finished = false
			}
		})
		return finished
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for !done() && rctx.Err() == nil {
		fs := cl.PollFetches(rctx)
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], string(r.Value))
			pos[r.Partition] = r.Offset + 1
		})
	}
	return out
}

// firstDifference is the first index where a and b differ (len of the shorter if one is a
// prefix of the other).
func firstDifference(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// txnCoordinator asks for the transactional id's coordinator.
func (s *suite) txnCoordinator(ctx context.Context, t *testing.T, id string) int32 {
	t.Helper()
	var node int32
	testkit.EventuallyDetail(t, "FindCoordinator for transactional id "+id, func() (bool, string) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = 1, id, []string{id}
		resp, err := kafka(ctx, s.bootstrapName(), req)
		if err != nil {
			return false, err.Error()
		}
		r := resp.(*kmsg.FindCoordinatorResponse)
		if len(r.Coordinators) == 0 || r.Coordinators[0].ErrorCode != 0 {
			return false, fmt.Sprintf("%+v", r)
		}
		node = r.Coordinators[0].NodeID
		return true, ""
	})
	return node
}
