package txn

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/paddock-dev/paddock/broker/storage"
)

// memMarkers is an in-memory MarkerWriter: answer decides each call's codes (nil: all NONE);
// written records every marker answered NONE.
type memMarkers struct {
	mu      sync.Mutex
	answer  func(ctx context.Context, leader int32, ms []Marker) ([]int16, error)
	written []Marker
	calls   int
}

func (m *memMarkers) WriteMarkers(ctx context.Context, leader int32, ms []Marker) ([]int16, error) {
	m.mu.Lock()
	m.calls++
	answer := m.answer
	m.mu.Unlock()
	codes := make([]int16, len(ms))
	var err error
	if answer != nil {
		codes, err = answer(ctx, leader, ms)
	}
	if err == nil {
		m.mu.Lock()
		for i, c := range codes {
			if c == 0 {
				m.written = append(m.written, ms[i])
			}
		}
		m.mu.Unlock()
	}
	return codes, err
}

func (m *memMarkers) setAnswer(f func(ctx context.Context, leader int32, ms []Marker) ([]int16, error)) {
	m.mu.Lock()
	m.answer = f
	m.mu.Unlock()
}

func (m *memMarkers) writtenCopy() []Marker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Marker(nil), m.written...)
}

type harness struct {
	root    string
	fs      storage.FS
	clock   *clocktesting.FakeClock
	pids    *storage.ProducerIDs
	markers *memMarkers
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	dir := t.TempDir()
	pids, err := storage.OpenProducerIDs(storage.OSFS{}, filepath.Join(dir, "pids"), 1000)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{root: filepath.Join(dir, "cluster", "txn"), fs: storage.OSFS{},
		clock: clocktesting.NewFakeClock(time.UnixMilli(1_000_000)), pids: pids, markers: &memMarkers{}}
}

// leaderOf puts partition p of any topic on broker p%3.
func leaderOf(_ string, p int32) (int32, bool) { return p % 3, true }

func (h *harness) coordinator(t *testing.T, epoch int32) *Coordinator {
	t.Helper()
	c := New(Config{FS: h.fs, Root: h.root, Epoch: epoch, Clock: h.clock, ProducerIDs: h.pids,
		Markers: h.markers, Leader: leaderOf, Log: logr.Discard(), MarkerRetryBackoff: time.Millisecond})
	t.Cleanup(c.Close)
	return c
}

func initTxn(t *testing.T, c *Coordinator, id string) Producer {
	t.Helper()
	pid, epoch, code := c.InitProducerID(id, InitInput{TimeoutMs: 60000, ProducerID: NoProducerID, ProducerEpoch: NoEpoch, Version: 4})
	if code != 0 {
		t.Fatalf("InitProducerID(%s): %v", id, kerr.ErrorForCode(code))
	}
	return Producer{ProducerID: pid, ProducerEpoch: epoch, Version: 3}
}

// waitState waits (without a wall-clock bound: the test's own timeout is the bound) until
// Describe shows want.
func waitState(t *testing.T, c *Coordinator, id string, want State) Txn {
	t.Helper()
	for {
		got, code := c.Describe(id)
		if code == 0 && got.State == want {
			return got
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCommitWritesMarkersThenCompletes(t *testing.T) {
	h := newHarness(t)
	c := h.coordinator(t, 1)
	p := initTxn(t, c, "tx")
	tps := []TopicPartition{{"a", 0}, {"a", 1}, {"b", 2}}
	if code := c.AddPartitions("tx", p, tps); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := c.AddOffsets("tx", p, "group"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := c.EndTxn("tx", p, true); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	done := waitState(t, c, "tx", CompleteCommit)
	if len(done.Partitions) != 0 {
		t.Fatalf("complete kept partitions %v", done.Partitions)
	}
	got := h.markers.writtenCopy()
	if len(got) != 4 {
		t.Fatalf("%d markers written, want 4: %+v", len(got), got)
	}
	for _, m := range got {
		if !m.Commit || m.ProducerID != p.ProducerID || m.ProducerEpoch != p.ProducerEpoch || m.CoordinatorEpoch != 1 {
			t.Fatalf("bad marker %+v", m)
		}
	}
	// A retried commit is NONE; an abort now is INVALID_TXN_STATE.
	if code := c.EndTxn("tx", p, true); code != 0 {
		t.Fatalf("retried commit: %v", kerr.ErrorForCode(code))
	}
	if code := c.EndTxn("tx", p, false); code != kerr.InvalidTxnState.Code {
		t.Fatalf("abort after commit: %v", kerr.ErrorForCode(code))
	}
}

func TestZombieProducerIsFencedByEpoch(t *testing.T) {
	h := newHarness(t)
	c := h.coordinator(t, 1)
	old := initTxn(t, c, "tx")
	cur := initTxn(t, c, "tx")
	if cur.ProducerID != old.ProducerID || cur.ProducerEpoch != old.ProducerEpoch+1 {
		t.Fatalf("second init %+v after %+v", cur, old)
	}
	if code := c.AddPartitions("tx", old, []TopicPartition{{"a", 0}}); code != kerr.ProducerFenced.Code {
		t.Fatalf("zombie AddPartitions: %v", kerr.ErrorForCode(code))
	}
	old.Version = 1
	if code := c.EndTxn("tx", old, true); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("zombie EndTxn v1: %v", kerr.ErrorForCode(code))
	}
	if code := c.AddPartitions("tx", cur, []TopicPartition{{"a", 0}}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
}

func TestInitDuringOngoingAbortsWithABumpedEpochThenBumpsAgain(t *testing.T) {
	h := newHarness(t)
	c := h.coordinator(t, 1)
	p := initTxn(t, c, "tx")
	if code := c.AddPartitions("tx", p, []TopicPartition{{"a", 0}}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	_, _, code := c.InitProducerID("tx", InitInput{TimeoutMs: 60000, ProducerID: NoProducerID, ProducerEpoch: NoEpoch, Version: 4})
	if code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("init during ongoing: %v", kerr.ErrorForCode(code))
	}
	waitState(t, c, "tx", CompleteAbort)
	ms := h.markers.writtenCopy()
	if len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != p.ProducerEpoch+1 {
		t.Fatalf("fencing abort markers %+v", ms)
	}
	next := initTxn(t, c, "tx")
	if next.ProducerEpoch != p.ProducerEpoch+2 {
		t.Fatalf("retry epoch %d, want %d", next.ProducerEpoch, p.ProducerEpoch+2)
	}
}

func TestEpochExhaustionRotatesProducerID(t *testing.T) {
	h := newHarness(t)
	c := h.coordinator(t, 1)
	p := initTxn(t, c, "tx")
	// Drive the epoch to the edge through real InitProducerId calls would take 32766 calls;
	// persist the state the coordinator would have, through its own store, instead.
	e, _ := c.get("tx", false)
	x := e.t
	x.ProducerEpoch = 32766
	if code := c.persist("tx", e, x); code != 0 {
		t.Fatal(code)
	}
	e.mu.Unlock()
	next := initTxn(t, c, "tx")
	if next.ProducerID == p.ProducerID || next.ProducerEpoch != 0 {
		t.Fatalf("exhausted epoch gave %+v (old pid %d)", next, p.ProducerID)
	}
	d, _ := c.Describe("tx")
	if d.LastPID != p.ProducerID {
		t.Fatalf("last pid %d, want %d", d.LastPID, p.ProducerID)
	}
}

func TestTimedOutTransactionIsAbortedOnTheClock(t *testing.T) {
	h := newHarness(t)
	c := h.coordinator(t, 1)
	p := initTxn(t, c, "tx")
	if code := c.AddPartitions("tx", p, []TopicPartition{{"a", 0}}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	h.clock.Step(60 * time.Second)
	if n := c.AbortTimedOut(); n != 0 {
		t.Fatalf("aborted %d at exactly the timeout", n)
	}
	h.clock.Step(time.Millisecond)
	if n := c.AbortTimedOut(); n != 1 {
		t.Fatalf("aborted %d past the timeout, want 1", n)
	}
	waitState(t, c, "tx", CompleteAbort)
	if code := c.EndTxn("tx", p, true); code != kerr.ProducerFenced.Code {
		t.Fatalf("the timed-out producer's commit: %v", kerr.ErrorForCode(code))
	}
}

func TestRunAbortsOnTheScanInterval(t *testing.T) {
	h := newHarness(t)
	c := h.coordinator(t, 1)
	p := initTxn(t, c, "tx")
	if code := c.AddPartitions("tx", p, []TopicPartition{{"a", 0}}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	for !h.clock.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	h.clock.Step(61 * time.Second) // past the timeout and a scan interval
	waitState(t, c, "tx", CompleteAbort)
}

func TestIdleIDExpiresAndStartsOver(t *testing.T) {
	h := newHarness(t)
	c := h.coordinator(t, 1)
	p := initTxn(t, c, "tx")
	h.clock.Step(time.Duration(DefaultExpirationMs-1) * time.Millisecond)
	if n := c.ExpireIDs(); n != 0 {
		t.Fatalf("expired %d before the expiration", n)
	}
	h.clock.Step(time.Millisecond)
	if n := c.ExpireIDs(); n != 1 {
		t.Fatalf("expired %d, want 1", n)
	}
	if _, code := c.Describe("tx"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe of an expired id: %v", kerr.ErrorForCode(code))
	}
	// The expiry is durable: a new coordinator does not see the id either.
	c2 := h.coordinator(t, 2)
	if _, code := c2.Describe("tx"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe of an expired id after takeover: %v", kerr.ErrorForCode(code))
	}
	next := initTxn(t, c2, "tx")
	if next.ProducerID == p.ProducerID || next.ProducerEpoch != 0 {
		t.Fatalf("expired id reused %+v", next)
	}
}

func TestMarkerOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		first    int16 // the first answer for every marker; then NONE
		complete bool
	}{
		{"not leader is retried", kerr.NotLeaderForPartition.Code, true},
		{"unknown partition is retried", kerr.UnknownTopicOrPartition.Code, true},
		{"storage error is retried", kerr.KafkaStorageError.Code, true},
		{"unsupported message format drops the partition", kerr.UnsupportedForMessageFormat.Code, true},
		{"coordinator fenced stops sending", kerr.TransactionCoordinatorFenced.Code, false},
		{"producer epoch moved on stops sending", kerr.InvalidProducerEpoch.Code, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			c := h.coordinator(t, 1)
			first := true
			h.markers.setAnswer(func(_ context.Context, _ int32, ms []Marker) ([]int16, error) {
				codes := make([]int16, len(ms))
				if first {
					first = false
					codes[0] = tc.first
				}
				return codes, nil
			})
			p := initTxn(t, c, "tx")
			if code := c.AddPartitions("tx", p, []TopicPartition{{"a", 0}}); code != 0 {
				t.Fatal(kerr.ErrorForCode(code))
			}
			if code := c.EndTxn("tx", p, true); code != 0 {
				t.Fatal(kerr.ErrorForCode(code))
			}
			if tc.complete {
				waitState(t, c, "tx", CompleteCommit)
				return
			}
			// Wait until the driver has stopped, then the decision is still PrepareCommit.
			for {
				e, _ := c.get("tx", false)
				sending := e.sending
				e.mu.Unlock()
				if !sending {
					break
				}
				time.Sleep(time.Millisecond)
			}
			if d, _ := c.Describe("tx"); d.State != PrepareCommit {
				t.Fatalf("state %v after a refused marker, want PrepareCommit", d.State)
			}
		})
	}
}

// Markers to several leaders, answered out of order and some failing as transport errors,
// all end written exactly when the coordinator completes.
func TestMarkersReorderedAndFailingStillComplete(t *testing.T) {
	h := newHarness(t)
	c := h.coordinator(t, 1)
	var mu sync.Mutex
	fails := map[int32]int{0: 2, 1: 1}
	h.markers.setAnswer(func(_ context.Context, leader int32, ms []Marker) ([]int16, error) {
		time.Sleep(time.Duration(3-leader) * time.Millisecond) // leader 0 answers last
		mu.Lock()
		defer mu.Unlock()
		if fails[leader] > 0 {
			fails[leader]--
			return nil, context.DeadlineExceeded
		}
		return make([]int16, len(ms)), nil
	})
	p := initTxn(t, c, "tx")
	var tps []TopicPartition
	for i := int32(0); i < 9; i++ {
		tps = append(tps, TopicPartition{"a", i})
	}
	if code := c.AddPartitions("tx", p, tps); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := c.EndTxn("tx", p, false); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	waitState(t, c, "tx", CompleteAbort)
	seen := map[int32]int{}
	for _, m := range h.markers.writtenCopy() {
		seen[m.Partition]++
	}
	for i := int32(0); i < 9; i++ {
		if seen[i] != 1 {
			t.Fatalf("partition %d got %d markers: %v", i, seen[i], seen)
		}
	}
}

// A decision made durable by a coordinator that then dies (its markers hang) is finished by
// the coordinator that takes the id over at a higher epoch, with its own coordinator epoch.
func TestPrepareCommitSurvivesCrashAndCompletesOnTakeover(t *testing.T) {
	h := newHarness(t)
	c1 := New(Config{FS: h.fs, Root: h.root, Epoch: 1, Clock: h.clock, ProducerIDs: h.pids,
		Markers: h.markers, Leader: leaderOf, Log: logr.Discard(), MarkerRetryBackoff: time.Millisecond})
	hung := make(chan struct{})
	h.markers.setAnswer(func(ctx context.Context, _ int32, ms []Marker) ([]int16, error) {
		select {
		case hung <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	p := initTxn(t, c1, "tx")
	if code := c1.AddPartitions("tx", p, []TopicPartition{{"a", 0}, {"a", 1}}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := c1.EndTxn("tx", p, true); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	<-hung
	c1.Close() // the crash: nothing after the durable PrepareCommit happens
	h.markers.setAnswer(nil)

	c2 := h.coordinator(t, 2)
	// Any request claims the id; while the markers go out the producer sees CONCURRENT_TRANSACTIONS or NONE.
	if code := c2.EndTxn("tx", p, true); code != kerr.ConcurrentTransactions.Code && code != 0 {
		t.Fatalf("retried commit on the new coordinator: %v", kerr.ErrorForCode(code))
	}
	waitState(t, c2, "tx", CompleteCommit)
	ms := h.markers.writtenCopy()
	if len(ms) != 2 {
		t.Fatalf("markers %+v", ms)
	}
	for _, m := range ms {
		if !m.Commit || m.CoordinatorEpoch != 2 || m.ProducerEpoch != p.ProducerEpoch {
			t.Fatalf("takeover marker %+v", m)
		}
	}
	if code := c2.EndTxn("tx", p, true); code != 0 {
		t.Fatalf("retried commit after completion: %v", kerr.ErrorForCode(code))
	}
}

// A coordinator whose fence was taken answers NOT_COORDINATOR to everything, even what needs
// no write, and its late writes never reach the new owner's state.
func TestDeposedCoordinatorAcknowledgesNothing(t *testing.T) {
	h := newHarness(t)
	c1 := h.coordinator(t, 1)
	p := initTxn(t, c1, "tx")
	if code := c1.AddPartitions("tx", p, []TopicPartition{{"a", 0}}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	c2 := h.coordinator(t, 2)
	d, code := c2.Describe("tx")
	if code != 0 || d.State != Ongoing {
		t.Fatalf("new owner sees %+v %v", d, kerr.ErrorForCode(code))
	}
	if code := c1.AddPartitions("tx", p, []TopicPartition{{"a", 0}}); code != kerr.NotCoordinator.Code {
		t.Fatalf("deposed no-op AddPartitions: %v", kerr.ErrorForCode(code))
	}
	for name, code := range map[string]int16{
		"AddPartitions": c1.AddPartitions("tx", p, []TopicPartition{{"b", 0}}),
		"EndTxn":        c1.EndTxn("tx", p, true),
		"Init": func() int16 {
			_, _, c := c1.InitProducerID("tx", InitInput{TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1})
			return c
		}(),
		"Describe": func() int16 { _, c := c1.Describe("tx"); return c }(),
	} {
		if code != kerr.NotCoordinator.Code {
			t.Fatalf("deposed %s: %v", name, kerr.ErrorForCode(code))
		}
	}
	d, _ = c2.Describe("tx")
	if d.State != Ongoing || len(d.Partitions) != 1 {
		t.Fatalf("deposed writes leaked into the owner's state: %+v", d)
	}
	if len(h.markers.writtenCopy()) != 0 {
		t.Fatal("a deposed coordinator sent markers")
	}
}

// A takeover that loads its ids finishes a dead coordinator's decision with no request for
// the id, and lists what it loaded; ids it does not own stay unclaimed.
func TestLoadOwnedFinishesPrepareWithoutARequest(t *testing.T) {
	h := newHarness(t)
	c1 := New(Config{FS: h.fs, Root: h.root, Epoch: 1, Clock: h.clock, ProducerIDs: h.pids,
		Markers: h.markers, Leader: leaderOf, Log: logr.Discard(), MarkerRetryBackoff: time.Millisecond})
	h.markers.setAnswer(func(ctx context.Context, _ int32, _ []Marker) ([]int16, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	long := string(make([]byte, 300)) // a hashed directory name
	for _, id := range []string{"mine", "other", "with/slash", long} {
		p := initTxn(t, c1, id)
		if code := c1.AddPartitions(id, p, []TopicPartition{{"a", 0}}); code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
		if code := c1.EndTxn(id, p, false); code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
	}
	c1.Close()
	h.markers.setAnswer(nil)
	c2 := h.coordinator(t, 2)
	n, err := c2.LoadOwned(func(id string) bool { return id != "other" })
	if err != nil || n != 3 {
		t.Fatalf("LoadOwned: %d, %v", n, err)
	}
	for _, id := range []string{"mine", "with/slash", long} {
		for {
			txns, _ := c2.List([]string{"CompleteAbort"}, nil)
			found := false
			for _, x := range txns {
				found = found || x.ID == id
			}
			if found {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	if txns, _ := c2.List(nil, nil); len(txns) != 3 {
		t.Fatalf("listed %d ids, want the 3 owned", len(txns))
	}
	if holds(c2, "other") {
		t.Fatal("claimed an id it does not own")
	}
	_, unknown := c2.List([]string{"Ongoing", "Bogus"}, nil)
	if len(unknown) != 1 || unknown[0] != "Bogus" {
		t.Fatalf("unknown state filters %v", unknown)
	}
}

func TestDirNameRoundTrips(t *testing.T) {
	for _, id := range []string{"", "a", "tx-1.b_c", "with/slash", "%41", "ünï", string(make([]byte, 300))} {
		name := dirName(id)
		got, hashed, ok := parseDirName(name)
		if !ok || (!hashed && got != id) || hashed != (len(id) > 100) {
			t.Fatalf("%q → %q → %q hashed=%v ok=%v", id, name, got, hashed, ok)
		}
	}
	if _, _, ok := parseDirName("t-%4"); ok {
		t.Fatal("parsed a torn escape")
	}
	if _, _, ok := parseDirName("t-%61"); ok {
		t.Fatal("parsed a non-canonical escape")
	}
}

// A corrupt state file is never taken for "no state" (which would hand out a new producer
// id and forget a decision): the claim fails and the id answers COORDINATOR_NOT_AVAILABLE.
func TestCorruptStateFileIsNotTakenForNoState(t *testing.T) {
	h := newHarness(t)
	c1 := h.coordinator(t, 1)
	initTxn(t, c1, "tx")
	c1.Close()
	path := filepath.Join(h.root, dirName("tx"), stateName(1))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-2] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c2 := h.coordinator(t, 2)
	if _, _, code := c2.InitProducerID("tx", InitInput{TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1, Version: 4}); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("init over a corrupt state: %v", kerr.ErrorForCode(code))
	}
	if _, err := os.Stat(filepath.Join(h.root, dirName("tx"), stateName(2))); !os.IsNotExist(err) {
		t.Fatalf("a state was written over the corrupt one: %v", err)
	}
}

// A partition whose topic was deleted during the transaction (the leader lookup answers
// PartitionGone) gets no marker, and the decision completes: a deleted topic never leaves a
// transaction deciding.
func TestAMarkerForAGonePartitionIsDroppedAndTheDecisionCompletes(t *testing.T) {
	h := newHarness(t)
	c := New(Config{FS: h.fs, Root: h.root, Epoch: 1, Clock: h.clock, ProducerIDs: h.pids, Markers: h.markers,
		Leader: func(topic string, p int32) (int32, bool) {
			if topic == "deleted" {
				return PartitionGone, true
			}
			return leaderOf(topic, p)
		}, Log: logr.Discard(), MarkerRetryBackoff: time.Millisecond})
	t.Cleanup(c.Close)
	p := initTxn(t, c, "tx")
	if code := c.AddPartitions("tx", p, []TopicPartition{{"deleted", 0}, {"kept", 1}}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := c.EndTxn("tx", p, true); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	waitState(t, c, "tx", CompleteCommit)
	written := h.markers.writtenCopy()
	if len(written) != 1 || written[0].Topic != "kept" {
		t.Fatalf("markers written %+v, want only kept/1's", written)
	}
}

// StateCounts reads the published states without the ids' locks: a transition that holds
// one (through its fsync, on a hung volume for as long as that lasts) never holds the
// heartbeat that counts.
func TestStateCountsNeverWaitsForATransition(t *testing.T) {
	h := newHarness(t)
	c := h.coordinator(t, 1)
	p := initTxn(t, c, "tx")
	if code := c.AddPartitions("tx", p, []TopicPartition{{"a", 0}}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	e, code := c.get("tx", false)
	if code != 0 || e == nil {
		t.Fatalf("get: %d", code)
	}
	// e.mu is held here, as by a transition in the middle of its write.
	counts := c.StateCounts()
	e.mu.Unlock()
	if counts[Ongoing] != 1 || len(counts) != 1 {
		t.Fatalf("StateCounts %v, want one Ongoing", counts)
	}
}
