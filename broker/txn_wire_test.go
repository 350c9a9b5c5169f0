package broker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// transact runs one kgo transaction of n records (values prefix-0 … prefix-(n-1), spread
// over the topic's partitions) and ends it with commit.
func transact(ctx context.Context, t *testing.T, cl *kgo.Client, topic, prefix string, n int, commit bool) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin %s: %v", prefix, err)
	}
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", prefix, i), Partition: int32(i % 3)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %s: %v", prefix, err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end %s (commit %v): %v", prefix, commit, err)
	}
}

// readAll reads every record of topic's partitions from the start up to each partition's
// end offset (ListOffsets LATEST at the isolation level), with kgo at level.
func readAll(ctx context.Context, t *testing.T, c *brokertest.Cluster, topic string, level kgo.IsolationLevel, want int) []string {
	t.Helper()
	cl := c.Client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v (got %v)", len(got), want, err, got)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	return got
}

func values(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// TestKgoTransactionsCommitAndAbortAcrossBrokers: a kgo transactional producer on three
// brokers commits, aborts and commits again over a topic whose partitions are led by all
// three, so the coordinator writes markers on itself and sends WriteTxnMarkers to the other
// two. Every transaction completes (DescribeTransactions: CompleteCommit at the end), every
// partition holds the control batches, and a second producer with the same transactional id
// fences the first.
func TestKgoTransactionsCommitAndAbortAcrossBrokers(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 3})
	c.CreateTopic("tx", 3, nil)
	leaders := map[int32]bool{}
	for p := range int32(3) {
		id, _ := c.Leader("tx", p)
		leaders[id] = true
	}
	if len(leaders) != 3 {
		t.Fatalf("the topic's partitions are led by %v: want all three brokers", leaders)
	}
	ctx := testkit.Context(t)
	producer := c.Client(kgo.TransactionalID("tx-wire"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	transact(ctx, t, producer, "tx", "first", 12, true)
	transact(ctx, t, producer, "tx", "aborted", 12, false)
	transact(ctx, t, producer, "tx", "second", 12, true)

	adm := kadm.NewClient(c.Client())
	testkit.EventuallyDetail(t, "the last transaction completes", func() (bool, string) {
		d, err := adm.DescribeTransactions(ctx, "tx-wire")
		if err != nil {
			return false, err.Error()
		}
		s, ok := d["tx-wire"]
		return ok && s.Err == nil && s.State == "CompleteCommit" && len(s.Topics) == 0, fmt.Sprintf("%+v", s)
	})
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil || len(listed) != 1 || listed["tx-wire"].State != "CompleteCommit" {
		t.Fatalf("ListTransactions %v (%v): want tx-wire CompleteCommit", listed, err)
	}
	// The coordinator's series: three transactions over three partitions each, one of them
	// aborted by the client.
	coord := c.Broker(txnCoordinator(t, c, c.Addrs()[0], "tx-wire"))
	for series, want := range map[string]float64{
		`paddock_txn_aborts_total{reason="client"}`:              1,
		`paddock_txn_markers_total{outcome="written"}`:           9,
		`paddock_txn_transaction_seconds_count{result="commit"}`: 2,
		`paddock_txn_transaction_seconds_count{result="abort"}`:  1,
		`paddock_txn_transactional_ids{state="CompleteCommit"}`:  1,
		`paddock_txn_transactional_ids{state="Ongoing"}`:         0,
	} {
		if got := metric(t, coord, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}

	// Read uncommitted, every record of the three transactions is there (control batches are
	// not records), and each partition's end is past its three markers.
	want := append(append(values("aborted", 12), values("first", 12)...), values("second", 12)...)
	slices.Sort(want)
	if got := readAll(ctx, t, c, "tx", kgo.ReadUncommitted(), len(want)); !slices.Equal(got, want) {
		t.Fatalf("read uncommitted %v, want %v", got, want)
	}
	ends, err := adm.ListEndOffsets(ctx, "tx")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		// 4 records and one marker per transaction.
		if o.Err != nil || o.Offset != 15 {
			t.Errorf("partition %d ends at %d (%v), want 15: three transactions of four records and a marker each", o.Partition, o.Offset, o.Err)
		}
	})

	// A new producer with the same id fences the old one: its next transaction fails.
	successor := c.Client(kgo.TransactionalID("tx-wire"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	transact(ctx, t, successor, "tx", "successor", 3, true)
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	err = producer.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte("zombie")}).FirstErr()
	if err == nil {
		err = producer.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced producer's transaction: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
}

// TestTransactionalAPIsRouteToTheCoordinator: FindCoordinator names one broker for a
// transactional id; the others answer its requests NOT_COORDINATOR, and an empty id is
// INVALID_REQUEST.
func TestTransactionalAPIsRouteToTheCoordinator(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2})
	conn := brokertest.Dial(t, c.Addrs()[0])
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.Version, find.CoordinatorType, find.CoordinatorKeys = 4, 1, []string{"route-me", ""}
	fr := conn.Request(find).(*kmsg.FindCoordinatorResponse)
	if len(fr.Coordinators) != 2 || fr.Coordinators[0].ErrorCode != 0 || fr.Coordinators[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("FindCoordinator %+v: want a coordinator for route-me and INVALID_REQUEST for the empty id", fr.Coordinators)
	}
	owner := fr.Coordinators[0].NodeID
	other := 1 - owner
	init := func(addr string) *kmsg.InitProducerIDResponse {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = 4
		id := "route-me"
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
		return brokertest.Dial(t, addr).Request(req).(*kmsg.InitProducerIDResponse)
	}
	if r := init(c.Addrs()[other]); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("InitProducerId on broker %d (not the coordinator): %+v, want NOT_COORDINATOR", other, r)
	}
	first := init(c.Addrs()[owner])
	if first.ErrorCode != 0 || first.ProducerID < 0 || first.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId on the coordinator: %+v, want a producer id at epoch 0", first)
	}
	if again := init(c.Addrs()[owner]); again.ErrorCode != 0 || again.ProducerID != first.ProducerID || again.ProducerEpoch != 1 {
		t.Fatalf("InitProducerId again: %+v, want producer id %d at epoch 1", again, first.ProducerID)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.Version, end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = 3, "", 1, 0, true
	if r := brokertest.Dial(t, c.Addrs()[owner]).Request(end).(*kmsg.EndTxnResponse); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("EndTxn with an empty id: %+v, want INVALID_REQUEST", r)
	}
}

// txnCoordinator is the broker FindCoordinator names for the transactional id.
func txnCoordinator(t *testing.T, c *brokertest.Cluster, addr, id string) int32 {
	t.Helper()
	var node int32 = -1
	testkit.EventuallyDetail(t, "a transaction coordinator for "+id, func() (bool, string) {
		find := kmsg.NewPtrFindCoordinatorRequest()
		find.Version, find.CoordinatorType, find.CoordinatorKeys = 4, 1, []string{id}
		fr := brokertest.Dial(t, addr).Request(find).(*kmsg.FindCoordinatorResponse)
		node = fr.Coordinators[0].NodeID
		return fr.Coordinators[0].ErrorCode == 0, fmt.Sprintf("%+v", fr.Coordinators[0])
	})
	return node
}

// TestATransactionSurvivesItsCoordinatorsDrain: a transaction is Ongoing when its
// coordinator's broker drains (SIGTERM: it leaves the alive set, the coordinator epoch
// moves on). The producer's EndTxn reaches the new coordinator, which loaded the
// transaction's partitions from the shared volume, and the commit completes with a marker on
// every partition, including those that moved with the drain.
func TestATransactionSurvivesItsCoordinatorsDrain(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 3})
	c.CreateTopic("tx", 3, nil)
	ctx := testkit.Context(t)
	const id = "tx-drain"
	old := txnCoordinator(t, c, c.Addrs()[0], id)
	survivor := c.Addrs()[(old+1)%3]
	producer, err := kgo.NewClient(kgo.SeedBrokers(survivor), kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 9 {
		recs = append(recs, &kgo.Record{Topic: "tx", Value: fmt.Appendf(nil, "drained-%d", i), Partition: int32(i % 3)})
	}
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if n := c.Broker(old).B.OngoingTransactions(); n != 1 {
		t.Fatalf("broker %d counts %d ongoing transactions, want 1", old, n)
	}
	c.Drain(old)
	if _, ok := c.Broker(old).Wait(testkit.Deadline); !ok {
		t.Fatalf("broker %d did not exit after its drain", old)
	}
	now := txnCoordinator(t, c, survivor, id)
	if now == old {
		t.Fatalf("the coordinator is still broker %d after its drain", old)
	}
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the coordinator moved from %d to %d: %v", old, now, err)
	}
	adm := kadm.NewClient(c.Client(kgo.SeedBrokers(survivor)))
	testkit.EventuallyDetail(t, "the transaction completes on the new coordinator", func() (bool, string) {
		d, err := adm.DescribeTransactions(ctx, id)
		if err != nil {
			return false, err.Error()
		}
		s := d[id]
		return s.Err == nil && s.State == "CompleteCommit", fmt.Sprintf("%+v", s)
	})
	if n := c.Broker(now).B.OngoingTransactions(); n != 0 {
		t.Errorf("broker %d counts %d ongoing transactions once the commit completed, want 0", now, n)
	}
	ends, err := adm.ListEndOffsets(ctx, "tx")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 4 {
			t.Errorf("partition %d ends at %d (%v), want 4: three records and the commit marker", o.Partition, o.Offset, o.Err)
		}
	})
}

// TestTransactionsOnASCRAMClusterMarkEveryBrokersPartitions: on a cluster whose only
// listener is SCRAM-SHA-512 over TLS, the coordinator reaches the other leaders with its own
// certificate (no broker holds a password) and the commit's markers land on every partition.
func TestTransactionsOnASCRAMClusterMarkEveryBrokersPartitions(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 3,
		Secured: &brokertest.Secured{Authentication: v1alpha1.AuthenticationScramSHA512, User: "app", Password: "app-password"}})
	c.CreateTopic("tx", 3, nil)
	ctx := testkit.Context(t)
	auth := []kgo.Opt{kgo.DialTLSConfig(c.ClientTLS), kgo.SASL(kscram.Auth{User: "app", Pass: "app-password"}.AsSha512Mechanism())}
	producer := c.Client(append(auth, kgo.TransactionalID("tx-scram"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	transact(ctx, t, producer, "tx", "secured", 12, true)
	adm := kadm.NewClient(c.Client(auth...))
	testkit.EventuallyDetail(t, "the commit completes", func() (bool, string) {
		d, err := adm.DescribeTransactions(ctx, "tx-scram")
		if err != nil {
			return false, err.Error()
		}
		s := d["tx-scram"]
		return s.Err == nil && s.State == "CompleteCommit", fmt.Sprintf("%+v", s)
	})
	ends, err := adm.ListEndOffsets(ctx, "tx")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 5 {
			t.Errorf("partition %d ends at %d (%v), want 5: four records and the commit marker", o.Partition, o.Offset, o.Err)
		}
	})
}

// TestKgoGroupTransactSessionCopiesATopicExactlyOnce: a kgo GroupTransactSession (read
// committed, offsets committed in the transaction through AddOffsetsToTxn and
// TxnOffsetCommit) copies a topic to another over three brokers; one transaction is aborted
// on purpose after producing its copies. Read committed, the output is the input, each
// partition in order and once; the group's committed offsets are the input's ends; the
// aborted copies are in the log (read uncommitted) but never read committed.
func TestKgoGroupTransactSessionCopiesATopicExactlyOnce(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 3, GroupConfig: fastGroups})
	c.CreateTopic("in", 3, nil)
	c.CreateTopic("out", 3, nil)
	ctx := testkit.Context(t)
	var recs []*kgo.Record
	for i := range 90 {
		recs = append(recs, &kgo.Record{Topic: "in", Value: fmt.Appendf(nil, "r-%d", i), Partition: int32(i % 3)})
	}
	if err := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.Addrs()...), kgo.TransactionalID("copier"), kgo.ConsumerGroup("copier"),
		kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.FetchMaxPartitionBytes(200))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	copied, aborted := 0, 0
	for copied < 90 {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("copied %d of 90: %v", copied, ctx.Err())
		}
		if fs.Empty() {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			sess.Produce(ctx, &kgo.Record{Topic: "out", Partition: r.Partition, Value: r.Value}, nil)
		})
		end := kgo.TryCommit
		if aborted == 0 && copied > 0 {
			end = kgo.TryAbort // once: its copies must never be read committed, its input read again
		}
		committed, err := sess.End(ctx, end)
		if err != nil {
			t.Fatalf("end: %v", err)
		}
		if committed {
			copied += n
		} else {
			aborted++
		}
	}
	if aborted != 1 {
		t.Fatalf("%d transactions aborted, want the one aborted on purpose", aborted)
	}
	want := make([][]string, 3)
	for i := range 90 {
		want[i%3] = append(want[i%3], fmt.Sprintf("r-%d", i))
	}
	got := make([][]string, 3)
	reader := c.Client(kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for total := 0; total < 90; {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 90 copies: %v", total, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], string(r.Value)); total++ })
	}
	for p := range 3 {
		if !slices.Equal(got[p], want[p]) {
			t.Errorf("out/%d read committed %v, want %v", p, got[p], want[p])
		}
	}
	adm := kadm.NewClient(c.Client())
	offs, err := adm.FetchOffsets(ctx, "copier")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if o, ok := offs.Lookup("in", p); !ok || o.At != 30 {
			t.Errorf("committed offset of in/%d = %+v, want 30", p, o)
		}
	}
	ends, err := adm.ListEndOffsets(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total <= 90 {
		t.Errorf("out holds %d offsets, want more than the 90 committed copies: the aborted copies and the markers", total)
	}
}

// TestDescribeProducersShowsAnOpenTransactionUntilItsMarker: kadm's DescribeProducers (what
// kafka-transactions.sh describe-producers sends) shows the transactional producer on the
// partition with the first offset of its open transaction, and after the commit no open
// transaction and the coordinator epoch of the marker.
func TestDescribeProducersShowsAnOpenTransactionUntilItsMarker(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{})
	c.CreateTopic("tx", 1, nil)
	ctx := testkit.Context(t)
	producer := c.Client(kgo.TransactionalID("tx-described"), kgo.DefaultProduceTopic("tx"))
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(c.Client())
	describe := func() kadm.DescribedProducer {
		t.Helper()
		ds, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"tx": {0: {}}})
		if err != nil {
			t.Fatal(err)
		}
		p, ok := ds["tx"].Partitions[0]
		if !ok || p.Err != nil || len(p.ActiveProducers) != 1 {
			t.Fatalf("DescribeProducers tx/0: %+v (%v), want one producer", p, ok)
		}
		for _, ap := range p.ActiveProducers {
			return ap
		}
		return kadm.DescribedProducer{}
	}
	if ap := describe(); ap.CurrentTxnStartOffset != 0 || ap.LastSequence != 0 || ap.ProducerEpoch != 0 {
		t.Fatalf("while open: %+v, want the transaction open at offset 0, last sequence 0, epoch 0", ap)
	}
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyDetail(t, "the marker closes the transaction", func() (bool, string) {
		ap := describe()
		return ap.CurrentTxnStartOffset == -1 && ap.CoordinatorEpoch >= 1, fmt.Sprintf("%+v", ap)
	})
}
