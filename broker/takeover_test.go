package broker_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// ledger is what a numbered producer learns: which records each partition acknowledged, in
// order, and when.
type ledger struct {
	mu      sync.Mutex
	acked   map[int32][]int       // record numbers acknowledged, by partition, in ack order
	ackedAt map[int32][]time.Time // when
	failed  []error
}

// numberedProducer writes records numbered 0, 1, 2, … round robin over partitions with an
// idempotent acks=all kgo producer until stop is called, which waits for every record's
// outcome and returns the ledger.
func numberedProducer(t *testing.T, c *brokertest.Cluster, topic string, partitions int32) (stop func() *ledger) {
	t.Helper()
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	l := &ledger{acked: map[int32][]int{}, ackedAt: map[int32][]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for range partitions {
				r := &kgo.Record{Partition: int32(n) % partitions, Value: []byte(strconv.Itoa(n))}
				num := n
				cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
					l.mu.Lock()
					defer l.mu.Unlock()
					if err != nil {
						l.failed = append(l.failed, err)
						return
					}
					l.acked[r.Partition] = append(l.acked[r.Partition], num)
					l.ackedAt[r.Partition] = append(l.ackedAt[r.Partition], time.Now())
				})
				n++
			}
		}
	}()
	return func() *ledger {
		cancel()
		<-done
		fctx, fcancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer fcancel()
		if err := cl.Flush(fctx); err != nil {
			t.Fatalf("flush: %v", err)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		return l
	}
}

// checkNothingLost reads topic back and checks the ledger's promise: every acknowledged
// record is there exactly once, each partition in the order it was written; nothing is
// there twice.
func checkNothingLost(t *testing.T, c *brokertest.Cluster, topic string, l *ledger) {
	t.Helper()
	total := 0
	for part, nums := range l.acked {
		total += len(nums)
		if !slices.IsSorted(nums) {
			t.Errorf("partition %d acknowledged out of order", part)
		}
	}
	read := map[int32][]int{}
	cons := c.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	deadline := time.Now().Add(60 * time.Second)
	got := 0
	// Read until everything acknowledged is in and one more second brings nothing (so any
	// duplicate beyond the acknowledged count would be seen too).
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cons.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			v, _ := strconv.Atoi(string(r.Value))
			read[r.Partition] = append(read[r.Partition], v)
			n++
		})
		fs.EachError(func(topic string, part int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("consume %s/%d: %v", topic, part, err)
			}
		})
		got += n
		if n == 0 && got >= total {
			break
		}
	}
	lost, dup := 0, 0
	for part, nums := range l.acked {
		have := read[part]
		seen := map[int]int{}
		for _, v := range have {
			seen[v]++
		}
		for _, n := range nums {
			if seen[n] == 0 {
				lost++
			}
		}
		for _, k := range seen {
			if k > 1 {
				dup += k - 1
			}
		}
		if !slices.IsSorted(have) {
			t.Errorf("partition %d read out of order", part)
		}
	}
	t.Logf("acknowledged %d, read %d, lost %d, duplicated %d, failed %d", total, got, lost, dup, len(l.failed))
	if lost != 0 || dup != 0 {
		t.Fatalf("lost %d acknowledged records and read %d twice", lost, dup)
	}
}

// gapAround is the longest time partition part went without an acknowledgement around at:
// what a producer feels of a move.
func (l *ledger) gapAround(part int32, at time.Time) time.Duration {
	var longest time.Duration
	times := l.ackedAt[part]
	for i := 1; i < len(times); i++ {
		if times[i].After(at) && times[i-1].Before(at.Add(5*time.Second)) {
			longest = max(longest, times[i].Sub(times[i-1]))
		}
	}
	return longest
}

// TestMovingPartitionsUnderAKgoProducerLosesNoAcknowledgedRecord: two brokers on one data
// directory; the partitions of a topic move back and forth between them (a new epoch each
// time) while an idempotent acks=all producer writes; every acknowledged record is read back
// exactly once, in order. It logs the longest time each move left its partition without an
// acknowledgement (KIP-951 hints let the client follow at once).
func TestMovingPartitionsUnderAKgoProducerLosesNoAcknowledgedRecord(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2})
	const partitions = 4
	c.CreateTopic("t", partitions, nil)
	stop := numberedProducer(t, c, "t", partitions)
	type move struct {
		part int32
		at   time.Time
	}
	var moves []move
	time.Sleep(300 * time.Millisecond)
	for round := range 3 {
		for part := range int32(partitions) {
			leader, _ := c.Leader("t", part)
			moves = append(moves, move{part, time.Now()})
			c.Move("t", part, 1-leader)
			time.Sleep(150 * time.Millisecond)
		}
		_ = round
	}
	time.Sleep(500 * time.Millisecond)
	l := stop()
	if len(l.failed) > 0 {
		t.Errorf("%d records failed; first: %v", len(l.failed), l.failed[0])
	}
	var gaps []time.Duration
	for _, m := range moves {
		gaps = append(gaps, l.gapAround(m.part, m.at))
	}
	slices.Sort(gaps)
	t.Logf("client-side gap per move (longest time without an acknowledgement on the moved partition): median %s, max %s, all %v",
		gaps[len(gaps)/2], gaps[len(gaps)-1], gaps)
	checkNothingLost(t, c, "t", l)
}

// TestADeposedLeaderAcknowledgesNothingOnceTheNewOneClaimed: the old leader's view lags, so
// it still believes it leads; once the new leader has claimed the partition, the old one
// answers every append NOT_LEADER_OR_FOLLOWER (its fence check fails after the write), and
// nothing it wrote is ever served.
func TestADeposedLeaderAcknowledgesNothingOnceTheNewOneClaimed(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2})
	tp := c.CreateTopic("t", 1, nil)
	old, _ := c.Leader("t", 0)
	next := 1 - old
	oldConn := brokertest.Dial(t, c.Addrs()[old])
	if p, _ := produceOne(t, oldConn, 10, "t", 0, brokertest.Plain([]byte("before")).Bytes()); p.ErrorCode != 0 {
		t.Fatal(p)
	}
	c.Lag(old, true)
	c.Move("t", 0, next)
	c.WaitServed()
	for _, acks := range []int16{-1, 1} {
		resp := oldConn.Request(produceReq(10, acks, "t", 0, brokertest.Plain([]byte("deposed")).Bytes())).(*kmsg.ProduceResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("acks=%d on the deposed leader: %+v, want NOT_LEADER_OR_FOLLOWER", acks, p)
		}
	}
	nextConn := brokertest.Dial(t, c.Addrs()[next])
	if p, _ := produceOne(t, nextConn, 10, "t", 0, brokertest.Plain([]byte("after")).Bytes()); p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("the new leader: %+v, want offset 1", p)
	}
	c.Lag(old, false)
	c.WaitServed()
	// The log is "before" (epoch 1's segment) then "after" (epoch 2's): reads stop at a
	// segment's end, so read both offsets.
	for offset, want := range []string{"before", "after"} {
		f := fetchOne(t, nextConn, fetchReq(16, "t", tp.ID, 0, int64(offset)))
		bs := batches(t, f.RecordBatches)
		if f.HighWatermark != 2 || len(bs) != 1 || !bytes.Contains(bs[0].Records, []byte(want)) || bytes.Contains(f.RecordBatches, []byte("deposed")) {
			t.Fatalf("offset %d: %d batches %q, high watermark %d; want only %q, and never the deposed leader's writes", offset, len(bs), f.RecordBatches, f.HighWatermark, want)
		}
	}
}

// TestASIGTERMedBrokerHandsItsPartitionsOverAndExitsZero: the operator (the harness, with
// the real balancer) moves a draining broker's partitions away; the broker relinquishes each,
// leads nothing and exits 0, while a producer keeps writing and loses nothing acknowledged.
func TestASIGTERMedBrokerHandsItsPartitionsOverAndExitsZero(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2})
	const partitions = 6
	c.CreateTopic("t", partitions, nil)
	led := 0
	for part := range int32(partitions) {
		if l, _ := c.Leader("t", part); l == 0 {
			led++
		}
	}
	if led == 0 {
		t.Fatal("broker 0 leads nothing to hand over")
	}
	stop := numberedProducer(t, c, "t", partitions)
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	c.Drain(0)
	b := c.Broker(0)
	err, exited := b.Wait(30 * time.Second)
	if !exited {
		t.Fatalf("broker 0 still running 30s after SIGTERM, leading %d partitions", b.B.Leading())
	}
	if err != nil {
		t.Fatalf("broker 0 exited with %v, want nil (exit 0)", err)
	}
	if n := b.B.Leading(); n != 0 {
		t.Fatalf("broker 0 exited holding %d partition logs", n)
	}
	t.Logf("SIGTERM → exit with %d partitions to hand over: %s", led, time.Since(start))
	for part := range int32(partitions) {
		if l, _ := c.Leader("t", part); l != 1 {
			t.Fatalf("partition %d still led by %d after the drain", part, l)
		}
	}
	time.Sleep(300 * time.Millisecond)
	l := stop()
	if len(l.failed) > 0 {
		t.Errorf("%d records failed; first: %v", len(l.failed), l.failed[0])
	}
	checkNothingLost(t, c, "t", l)
}

// TestABrokerClaimsExactlyThePartitionsItTookOver: what a broker announces on its Lease
// (kafka.paddock.dev/claimed) is the digest of the partitions the assignment gives it, at
// their epochs, once it has taken them over — and it follows a move, which the recovery
// reconciler waits for before deleting a lost broker's pod.
func TestABrokerClaimsExactlyThePartitionsItTookOver(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2})
	c.CreateTopic("t", 4, nil)
	c.WaitServed()
	assigned := func(id int32) string {
		tp := c.Topic("t")
		var claims []v1alpha1.PartitionClaim
		for _, p := range tp.Partitions {
			if p.Leader == id {
				claims = append(claims, v1alpha1.PartitionClaim{TopicID: brokertest.TopicID(tp.ID), Partition: p.Index, Epoch: p.LeaderEpoch})
			}
		}
		return v1alpha1.FormatClaims(claims)
	}
	for id := range int32(2) {
		if got, want := v1alpha1.FormatClaims(c.Broker(id).B.Claims()), assigned(id); got != want {
			t.Fatalf("broker %d claims %s, the assignment gives it %s", id, got, want)
		}
	}
	from, _ := c.Leader("t", 0)
	c.Move("t", 0, 1-from)
	c.WaitServed()
	testkit.Eventually(t, "the new leader's claims follow the move", func() bool {
		return v1alpha1.FormatClaims(c.Broker(1-from).B.Claims()) == assigned(1-from) &&
			v1alpha1.FormatClaims(c.Broker(from).B.Claims()) == assigned(from)
	})
}

// A Produce that reaches the new leader while it is still taking over waits for the
// takeover and is acknowledged, instead of being answered NOT_LEADER_OR_FOLLOWER naming the
// broker it asked (which costs kgo its 250 ms retry backoff); one whose takeover outlasts
// the wait's bound (2 s) is refused as before.
func TestAProduceDuringATakeoverWaitsForItInsteadOfBeingRefused(t *testing.T) {
	var mu sync.Mutex
	var gate chan struct{} // nil: broker 1's fence is not held
	hold := func() {
		mu.Lock()
		gate = make(chan struct{})
		mu.Unlock()
	}
	release := func() {
		mu.Lock()
		close(gate)
		gate = nil
		mu.Unlock()
	}
	fault := func(_ storage.Op, path string) error {
		mu.Lock()
		g := gate
		mu.Unlock()
		if g != nil && strings.Contains(path, string(filepath.Separator)+"fence") {
			<-g
		}
		return nil
	}
	c := brokertest.Start(t, brokertest.Options{Brokers: 2, StorageFS: func(id int32) storage.FS {
		if id == 1 {
			return storage.FaultFS{FS: storage.OSFS{}, Fault: fault}
		}
		return storage.OSFS{}
	}})
	c.CreateTopic("t", 1, nil)
	if leader, _ := c.Leader("t", 0); leader != 0 {
		c.Move("t", 0, 0)
	}
	c.WaitServed()
	conn := brokertest.Dial(t, c.Addrs()[1])
	moveToOneHeld := func() {
		t.Helper()
		hold()
		c.Move("t", 0, 1)
		testkit.Eventually(t, "broker 1 taking the partition over", func() bool {
			return metric(t, c.Broker(1), "paddock_broker_partitions_under_takeover") == 1
		})
	}
	type answer struct {
		code int16
		took time.Duration
	}
	produce := func() <-chan answer {
		out := make(chan answer, 1)
		go func() {
			start := time.Now()
			resp := conn.Request(produceReq(10, -1, "t", 0, brokertest.Plain([]byte("during")).Bytes())).(*kmsg.ProduceResponse)
			out <- answer{resp.Topics[0].Partitions[0].ErrorCode, time.Since(start)}
		}()
		return out
	}

	moveToOneHeld()
	answered := produce()
	select {
	case a := <-answered:
		release()
		t.Fatalf("answered during the takeover: code %d after %s; want it held until the takeover ends", a.code, a.took)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	select {
	case a := <-answered:
		if a.code != 0 {
			t.Fatalf("after the takeover: code %d, want the append acknowledged", a.code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer after the takeover ended")
	}

	c.Move("t", 0, 0)
	c.WaitServed()
	moveToOneHeld()
	a := <-produce()
	release()
	if a.code != kerr.NotLeaderForPartition.Code || a.took < 1900*time.Millisecond {
		t.Fatalf("a takeover held past the bound: code %d after %s; want NOT_LEADER_OR_FOLLOWER after the 2 s wait", a.code, a.took)
	}
	c.WaitServed()
	if p, _ := produceOne(t, conn, 10, "t", 0, brokertest.Plain([]byte("after")).Bytes()); p.ErrorCode != 0 {
		t.Fatalf("once taken over: %+v", p)
	}
}
