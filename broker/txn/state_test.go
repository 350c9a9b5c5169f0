package txn

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

var lim = Limits{MaxTimeoutMs: DefaultMaxTimeoutMs}

func txn(state State, pid int64, epoch int16) Txn {
	t := Txn{ID: "t", ProducerID: pid, ProducerEpoch: epoch, LastPID: NoProducerID, LastEpoch: NoEpoch,
		TimeoutMs: 60000, State: state, StartMs: -1}
	if state == Ongoing || state.preparing() {
		t.Partitions, t.StartMs = []TopicPartition{{"a", 0}}, 100
	}
	return t
}

func TestInitRules(t *testing.T) {
	fresh := InitInput{TimeoutMs: 60000, ProducerID: NoProducerID, ProducerEpoch: NoEpoch, Version: 4}
	with := func(pid int64, e int16, v int16) InitInput {
		return InitInput{TimeoutMs: 60000, ProducerID: pid, ProducerEpoch: e, Version: v}
	}
	exhausted := txn(CompleteCommit, 7, 32766)
	rotated := txn(Empty, 8, 0)
	rotated.LastPID, rotated.LastEpoch = 7, 32766
	for _, tc := range []struct {
		name             string
		cur              Txn
		exists           bool
		in               InitInput
		code             int16
		epoch, lastEpoch int16
		needsPID, fence  bool
		state            State
		lastPID          int64
		checkLastPID     bool
	}{
		{name: "timeout zero is invalid", in: InitInput{TimeoutMs: 0, ProducerID: -1, ProducerEpoch: -1}, code: kerr.InvalidTransactionTimeout.Code},
		{name: "timeout above max is invalid", in: InitInput{TimeoutMs: DefaultMaxTimeoutMs + 1, ProducerID: -1, ProducerEpoch: -1}, code: kerr.InvalidTransactionTimeout.Code},
		{name: "pid without epoch is an invalid request", in: with(5, -1, 4), code: kerr.InvalidRequest.Code},
		{name: "unknown id gets a new pid at epoch 0", in: fresh, needsPID: true, epoch: 0, lastEpoch: -1, state: Empty},
		{name: "dead id starts over with a new pid", cur: txn(Dead, 5, 3), exists: true, in: fresh, needsPID: true, epoch: 0, lastEpoch: -1, state: Empty},
		{name: "empty id bumps the epoch", cur: txn(Empty, 5, 3), exists: true, in: fresh, epoch: 4, lastEpoch: -1, state: Empty},
		{name: "complete commit bumps the epoch", cur: txn(CompleteCommit, 5, 3), exists: true, in: fresh, epoch: 4, lastEpoch: -1, state: Empty},
		{name: "complete abort bumps the epoch", cur: txn(CompleteAbort, 5, 3), exists: true, in: fresh, epoch: 4, lastEpoch: -1, state: Empty},
		{name: "prepare commit is concurrent", cur: txn(PrepareCommit, 5, 3), exists: true, in: fresh, code: kerr.ConcurrentTransactions.Code},
		{name: "prepare abort is concurrent", cur: txn(PrepareAbort, 5, 3), exists: true, in: fresh, code: kerr.ConcurrentTransactions.Code},
		{name: "ongoing is fenced: epoch+1 and abort", cur: txn(Ongoing, 5, 3), exists: true, in: fresh, fence: true, epoch: 4, lastEpoch: -1, state: PrepareAbort},
		{name: "exhausted epoch rotates to a new pid", cur: exhausted, exists: true, in: fresh, needsPID: true, epoch: 0, lastEpoch: -1, state: Empty, lastPID: 7, checkLastPID: true},
		{name: "exhausted epoch with the current epoch rotates and records it", cur: exhausted, exists: true, in: with(7, 32766, 4), needsPID: true, epoch: 0, lastEpoch: 32766, state: Empty, lastPID: 7, checkLastPID: true},
		{name: "supplied current pid and epoch bumps and records the last", cur: txn(Empty, 5, 3), exists: true, in: with(5, 3, 4), epoch: 4, lastEpoch: 3, state: Empty},
		{name: "retry with the last epoch returns the current without a bump", cur: func() Txn { x := txn(Empty, 5, 4); x.LastEpoch = 3; return x }(), exists: true, in: with(5, 3, 4), epoch: 4, lastEpoch: 3, state: Empty},
		{name: "supplied old epoch is fenced", cur: txn(Empty, 5, 9), exists: true, in: with(5, 3, 4), code: kerr.ProducerFenced.Code},
		{name: "supplied old epoch before v4 is an invalid epoch", cur: txn(Empty, 5, 9), exists: true, in: with(5, 3, 3), code: kerr.InvalidProducerEpoch.Code},
		{name: "supplied other pid is fenced", cur: txn(Empty, 5, 3), exists: true, in: with(6, 3, 4), code: kerr.ProducerFenced.Code},
		{name: "previous pid with exhausted epoch is a retry of a rotation: the rotated pid again", cur: rotated, exists: true, in: with(7, 32766, 4), epoch: 0, lastEpoch: 32766, state: Empty},
		{name: "previous pid with an unexhausted epoch is fenced", cur: rotated, exists: true, in: with(7, 100, 4), code: kerr.ProducerFenced.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cur.ID == "" {
				tc.cur.ID = "t"
			}
			out := Init(tc.cur, tc.exists, tc.in, lim, 1000)
			if out.Code != tc.code {
				t.Fatalf("code %d, want %d", out.Code, tc.code)
			}
			if tc.code != 0 {
				return
			}
			n := out.Next
			if out.NeedsPID != tc.needsPID || out.Fence != tc.fence || n.ProducerEpoch != tc.epoch || n.LastEpoch != tc.lastEpoch || n.State != tc.state {
				t.Fatalf("got needsPID=%v fence=%v epoch=%d last=%d state=%v, want %v %v %d %d %v",
					out.NeedsPID, out.Fence, n.ProducerEpoch, n.LastEpoch, n.State, tc.needsPID, tc.fence, tc.epoch, tc.lastEpoch, tc.state)
			}
			if tc.checkLastPID && n.LastPID != tc.lastPID {
				t.Fatalf("last pid %d, want %d", n.LastPID, tc.lastPID)
			}
			if n.TimeoutMs != tc.in.TimeoutMs || (!tc.fence && (n.StartMs != -1 || len(n.Partitions) != 0)) {
				t.Fatalf("init did not reset the transaction: %+v", n)
			}
		})
	}
}

// A rotation's retry returns the rotated pid, not a third one.
func TestInitRotationRetryKeepsTheRotatedPID(t *testing.T) {
	cur := txn(Empty, 8, 0)
	cur.LastPID, cur.LastEpoch = 7, 32766
	out := Init(cur, true, InitInput{TimeoutMs: 1000, ProducerID: 7, ProducerEpoch: 32766, Version: 4}, lim, 0)
	if out.Code != 0 || out.NeedsPID || out.Next.ProducerID != 8 || out.Next.ProducerEpoch != 0 {
		t.Fatalf("got %+v", out)
	}
}

// Exhaustion with the current epoch supplied rotates and remembers the old pid.
func TestInitExhaustedCurrentEpochRotates(t *testing.T) {
	cur := txn(Empty, 8, 32766) // rotated pid whose own epoch is exhausted too
	cur.LastPID = 7
	out := Init(cur, true, InitInput{TimeoutMs: 1000, ProducerID: 7, ProducerEpoch: 32766, Version: 4}, lim, 0)
	if out.Code != 0 || !out.NeedsPID || out.Next.LastPID != 8 {
		t.Fatalf("got %+v", out)
	}
}

func TestAddRules(t *testing.T) {
	p := Producer{ProducerID: 5, ProducerEpoch: 3, Version: 3}
	tps := []TopicPartition{{"b", 1}, {"a", 0}}
	for _, tc := range []struct {
		name   string
		cur    Txn
		exists bool
		p      Producer
		code   int16
		write  bool
	}{
		{name: "unknown id is an invalid pid mapping", p: p, code: kerr.InvalidProducerIDMapping.Code},
		{name: "dead id is an invalid pid mapping", cur: txn(Dead, 5, 3), exists: true, p: p, code: kerr.InvalidProducerIDMapping.Code},
		{name: "other pid is an invalid pid mapping", cur: txn(Empty, 6, 3), exists: true, p: p, code: kerr.InvalidProducerIDMapping.Code},
		{name: "old epoch is fenced", cur: txn(Empty, 5, 4), exists: true, p: p, code: kerr.ProducerFenced.Code},
		{name: "old epoch before v2 is an invalid epoch", cur: txn(Empty, 5, 4), exists: true, p: Producer{5, 3, 1}, code: kerr.InvalidProducerEpoch.Code},
		{name: "prepare commit is concurrent", cur: txn(PrepareCommit, 5, 3), exists: true, p: p, code: kerr.ConcurrentTransactions.Code},
		{name: "prepare abort is concurrent", cur: txn(PrepareAbort, 5, 3), exists: true, p: p, code: kerr.ConcurrentTransactions.Code},
		{name: "empty starts a transaction", cur: txn(Empty, 5, 3), exists: true, p: p, write: true},
		{name: "complete commit starts a transaction", cur: txn(CompleteCommit, 5, 3), exists: true, p: p, write: true},
		{name: "ongoing adds new partitions", cur: txn(Ongoing, 5, 3), exists: true, p: p, write: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := Add(tc.cur, tc.exists, tc.p, tps, 5000)
			if out.Code != tc.code || out.Write != tc.write {
				t.Fatalf("got code %d write %v, want %d %v", out.Code, out.Write, tc.code, tc.write)
			}
			if !tc.write {
				return
			}
			want := []TopicPartition{{"a", 0}, {"b", 1}}
			if out.Next.State != Ongoing || !slices.Equal(out.Next.Partitions, want) {
				t.Fatalf("next %+v", out.Next)
			}
			wantStart := int64(5000)
			if tc.cur.State == Ongoing {
				wantStart = tc.cur.StartMs // the timer runs from the first AddPartitions
			}
			if out.Next.StartMs != wantStart {
				t.Fatalf("start %d, want %d", out.Next.StartMs, wantStart)
			}
		})
	}
	t.Run("ongoing with every partition already added needs no write", func(t *testing.T) {
		cur := txn(Ongoing, 5, 3)
		out := Add(cur, true, p, []TopicPartition{{"a", 0}}, 0)
		if out.Code != 0 || out.Write {
			t.Fatalf("got %+v", out)
		}
	})
}

func TestVerifyRules(t *testing.T) {
	cur := txn(Ongoing, 5, 3)
	code, per := Verify(cur, true, Producer{5, 3, 4}, []TopicPartition{{"a", 0}, {"a", 1}})
	if code != 0 || !slices.Equal(per, []int16{0, kerr.InvalidTxnState.Code}) {
		t.Fatalf("got %d %v", code, per)
	}
	if code, _ := Verify(cur, true, Producer{5, 2, 4}, nil); code != kerr.ProducerFenced.Code {
		t.Fatalf("old epoch: %d", code)
	}
	if code, _ := Verify(Txn{}, false, Producer{5, 3, 4}, nil); code != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("unknown: %d", code)
	}
	for _, s := range []State{PrepareCommit, PrepareAbort} {
		if code, per := Verify(txn(s, 5, 3), true, Producer{5, 3, 4}, []TopicPartition{{"a", 0}}); code != kerr.ConcurrentTransactions.Code || per != nil {
			t.Fatalf("%v: got %d %v, want CONCURRENT_TRANSACTIONS for every partition (Apache)", s, code, per)
		}
	}
	_, per = Verify(txn(CompleteCommit, 5, 3), true, Producer{5, 3, 4}, []TopicPartition{{"a", 0}})
	if per[0] != kerr.InvalidTxnState.Code {
		t.Fatalf("completed txn verified a partition: %v", per)
	}
}

func TestEndRules(t *testing.T) {
	p := Producer{ProducerID: 5, ProducerEpoch: 3, Version: 3}
	const none, concurrent, invalid = 0, 51, 48
	for _, tc := range []struct {
		state  State
		commit bool
		code   int16
		write  bool
		next   State
	}{
		{Ongoing, true, none, true, PrepareCommit},
		{Ongoing, false, none, true, PrepareAbort},
		{PrepareCommit, true, concurrent, false, 0},
		{PrepareCommit, false, invalid, false, 0},
		{PrepareAbort, true, invalid, false, 0},
		{PrepareAbort, false, concurrent, false, 0},
		{CompleteCommit, true, none, false, 0},
		{CompleteCommit, false, invalid, false, 0},
		{CompleteAbort, true, invalid, false, 0},
		{CompleteAbort, false, none, false, 0},
		{Empty, true, invalid, false, 0},
		{Empty, false, invalid, false, 0},
	} {
		t.Run(tc.state.String()+map[bool]string{true: " commit", false: " abort"}[tc.commit], func(t *testing.T) {
			out := End(txn(tc.state, 5, 3), true, p, tc.commit, 0)
			if out.Code != tc.code || out.Write != tc.write || (tc.write && out.Next.State != tc.next) {
				t.Fatalf("got %+v, want code %d write %v next %v", out, tc.code, tc.write, tc.next)
			}
		})
	}
	if out := End(txn(Ongoing, 5, 4), true, p, true, 0); out.Code != kerr.ProducerFenced.Code {
		t.Fatalf("zombie EndTxn: %d", out.Code)
	}
	if out := End(txn(Ongoing, 5, 4), true, Producer{5, 3, 1}, true, 0); out.Code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("zombie EndTxn v1: %d", out.Code)
	}
	if out := End(Txn{}, false, p, true, 0); out.Code != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("unknown id: %d", out.Code)
	}
}

func TestCompleteClearsPartitionsAndKeepsStart(t *testing.T) {
	for prep, want := range map[State]State{PrepareCommit: CompleteCommit, PrepareAbort: CompleteAbort} {
		n := Complete(txn(prep, 5, 3), 9)
		if n.State != want || len(n.Partitions) != 0 || n.StartMs != 100 || n.UpdateMs != 9 {
			t.Fatalf("%v: %+v", prep, n)
		}
	}
}

func TestTimeoutRules(t *testing.T) {
	on := txn(Ongoing, 5, 3) // start 100, timeout 60000
	if TimedOut(on, 100+60000) {
		t.Fatal("timed out at exactly start+timeout")
	}
	if !TimedOut(on, 100+60001) {
		t.Fatal("not timed out past start+timeout")
	}
	if TimedOut(txn(Empty, 5, 3), 1<<40) || TimedOut(txn(PrepareCommit, 5, 3), 1<<40) {
		t.Fatal("only Ongoing times out")
	}
	n := AbortTimedOut(on, 70000)
	if n.State != PrepareAbort || n.ProducerEpoch != 4 {
		t.Fatalf("abort of a timed-out txn: %+v", n)
	}
}

func TestExpiryRules(t *testing.T) {
	idle := txn(CompleteCommit, 5, 3)
	idle.UpdateMs = 1000
	if Expired(idle, 1000+DefaultExpirationMs-1, DefaultExpirationMs) || !Expired(idle, 1000+DefaultExpirationMs, DefaultExpirationMs) {
		t.Fatal("expiry boundary")
	}
	on := txn(Ongoing, 5, 3)
	if Expired(on, 1<<50, DefaultExpirationMs) {
		t.Fatal("an Ongoing id expired")
	}
}

func TestParseStateInvertsString(t *testing.T) {
	for s := Empty; s <= PrepareEpochFence; s++ {
		if got, ok := ParseState(s.String()); !ok || got != s {
			t.Fatalf("%v", s)
		}
	}
	if _, ok := ParseState("Bogus"); ok {
		t.Fatal("parsed a bogus state")
	}
}

// Fencing an Ongoing transaction at the last usable epoch spends the final epoch; the
// producer's retry then rotates to a new producer id instead of failing.
func TestFencingAtTheLastEpochThenRetryRotates(t *testing.T) {
	cur := txn(Ongoing, 5, 32766)
	out := Init(cur, true, InitInput{TimeoutMs: 1000, ProducerID: NoProducerID, ProducerEpoch: NoEpoch, Version: 4}, lim, 0)
	if out.Code != 0 || !out.Fence || out.Next.ProducerEpoch != 32767 {
		t.Fatalf("fence: %+v", out)
	}
	done := Complete(out.Next, 1)
	retry := Init(done, true, InitInput{TimeoutMs: 1000, ProducerID: NoProducerID, ProducerEpoch: NoEpoch, Version: 4}, lim, 2)
	if retry.Code != 0 || !retry.NeedsPID || retry.Next.ProducerEpoch != 0 || retry.Next.LastPID != 5 {
		t.Fatalf("retry: %+v", retry)
	}
}
