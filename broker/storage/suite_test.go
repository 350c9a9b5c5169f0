package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// simIterations is how many iterations go test runs of each seeded simulation per backend:
// enough to meet every interleaving family within a few runs, few enough for the package's
// race-detector run to stay within two minutes on a busy machine (make soak-storage runs
// them for as long as asked).
func simIterations() int {
	switch {
	case testing.Short():
		return 3
	case raceEnabled:
		return 8
	}
	return 25
}

var simBackends = []string{"local", "nfs"}

// TestTwoRacingTakeoversAndADeposedWriter: the partition moves twice in quick succession
// (epochs 5 and 6 take over at random moments, racing each other) while the deposed epoch-4
// leader goes on appending, with faults at random: the deposed leader's node dies, the racer
// at 5 gets EIO, the whole site loses power (NFS). After each iteration a takeover on a fresh
// node at epoch 7 must succeed and serve every acknowledged batch at its offset, byte for
// byte (acks=1 ones on the local disk only: simLedger.lossyAcksOne), and every batch any
// leader served; so must a takeover at 8 after 7 stops.
func TestTwoRacingTakeoversAndADeposedWriter(t *testing.T) {
	for _, b := range simBackends {
		runSeeded(t, simRun{test: "TestTwoRacingTakeoversAndADeposedWriter", backend: b, scenario: func(t *testing.T, seed uint64, be *simBackend) simStats {
			return takeoverRace(t, seed, be, 4, 2, false)
		}}, simIterations())
	}
}

// TestADeposedLeadersCleanerRacingTwoTakeovers is the race above on a compacted topic: every
// leader also runs cleaning passes at random moments — the deposed one's swaps racing the
// newer claims, the racers' racing their own appends and reads. Every key is unique, so a
// clean removes nothing and every acknowledged and served batch must still read byte for
// byte, from whichever copy of its segment the journals name.
func TestADeposedLeadersCleanerRacingTwoTakeovers(t *testing.T) {
	for _, b := range simBackends {
		runSeeded(t, simRun{test: "TestADeposedLeadersCleanerRacingTwoTakeovers", backend: b, scenario: func(t *testing.T, seed uint64, be *simBackend) simStats {
			return takeoverRaceCompacted(t, seed, be, 4, 2)
		}}, simIterations())
	}
	if n := simCleanedPasses.Load(); n == 0 {
		t.Fatal("no cleaning pass was swapped in: the race never exercised a swap")
	} else {
		t.Logf("%d cleaning passes swapped in", n)
	}
}

// TestTwoLogsAtEpochs5And6NeverLoseAnAcknowledgedAppend is the safety core: whatever the
// interleaving of an epoch-5 leader that keeps appending and an epoch-6 leader taking over
// (mid-append, mid-roll, mid-fsync), every append the epoch-5 log acknowledged (acks=all or
// acks=1) is served by the epoch-6 log with its exact bytes, and by later takeovers.
func TestTwoLogsAtEpochs5And6NeverLoseAnAcknowledgedAppend(t *testing.T) {
	for _, b := range simBackends {
		runSeeded(t, simRun{test: "TestTwoLogsAtEpochs5And6NeverLoseAnAcknowledgedAppend", backend: b, scenario: func(t *testing.T, seed uint64, be *simBackend) simStats {
			return takeoverRace(t, seed, be, 5, 1, false)
		}}, simIterations())
	}
}

// simLedger records what the leaders acknowledged and served, and fails at once if two of them
// ever put different bytes at one offset.
type simLedger struct {
	t        *testing.T
	mu       sync.Mutex
	deleteTo int64            // the largest offset a DeleteRecords asked for (acknowledged or not)
	ackAll   map[int64][]byte // acks=all: durable and fence-checked
	ackOne   map[int64][]byte // acks=1: fence-checked, durable at the next round
	// lossyAcksOne: acks=1 batches are not recorded. On a network file system an acks=1
	// batch is acknowledged once written and fence-checked while it may still be only in its
	// node's cache: the node dying, or a takeover before the node flushes it, takes it back
	// (as Kafka's acks=1 loses what a leader had only written when leadership moves). acks=all
	// and served batches survive everything.
	lossyAcksOne bool
	served       map[int64][]byte // batches a read returned (below the high watermark)
}

func newSimLedger(t *testing.T) *simLedger {
	return &simLedger{t: t, ackAll: map[int64][]byte{}, ackOne: map[int64][]byte{}, served: map[int64][]byte{}}
}

func (g *simLedger) put(m map[int64][]byte, off int64, b []byte, what string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, other := range []map[int64][]byte{g.ackAll, g.ackOne, g.served} {
		if prev, ok := other[off]; ok && !sameBatch(prev, b) {
			g.t.Errorf("offset %d %s with bytes other than a batch recorded there before", off, what)
		}
	}
	m[off] = bytes.Clone(b)
}

func (g *simLedger) acked(off int64, b []byte, acks Acks) {
	switch {
	case acks == AcksAll:
		g.put(g.ackAll, off, b, "acknowledged")
	case !g.lossyAcksOne:
		g.put(g.ackOne, off, b, "acknowledged")
	}
}

func (g *simLedger) read(records []byte) {
	for len(records) >= batchHeaderSize {
		h := parseHeader(records)
		if h.size() > int64(len(records)) {
			g.t.Errorf("a read returned a partial batch at offset %d", h.BaseOffset)
			return
		}
		g.put(g.served, h.BaseOffset, records[:h.size()], "served")
		records = records[h.size():]
	}
}

// sameBatch compares a batch as a producer sent it with the same batch as the log stores it:
// the log stamps the base offset and leader epoch (outside the CRC); the rest is verbatim.
func sameBatch(a, b []byte) bool {
	return len(a) == len(b) && bytes.Equal(a[offLength:offLeaderEpoch], b[offLength:offLeaderEpoch]) && bytes.Equal(a[offMagic:], b[offMagic:])
}

// requireIn fails unless l serves every recorded batch.
func (g *simLedger) requireIn(t *testing.T, l *Log, who string) int {
	t.Helper()
	waitDurable(t, l)
	got := batchesByOffset(t, readAll(t, l))
	checks := []struct {
		what string
		m    map[int64][]byte
	}{{"acknowledged (acks=all)", g.ackAll}, {"served", g.served}, {"acknowledged (acks=1)", g.ackOne}}
	off0, err := l.Offsets()
	if err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	deleteTo := g.deleteTo
	g.mu.Unlock()
	if off0.LogStart > deleteTo {
		t.Fatalf("%s: the log starts at %d, past every DeleteRecords (%d)", who, off0.LogStart, deleteTo)
	}
	n := 0
	for _, c := range checks {
		for off, b := range c.m {
			if off+int64(parseHeader(b).LastOffsetDelta) < off0.LogStart {
				continue // deleted on request
			}
			n++
			if g, ok := got[off]; !ok || !sameBatch(g, b) {
				t.Fatalf("%s: the batch %s at offset %d is missing or different", who, c.what, off)
			}
		}
	}
	return n
}

// TestASeedReplaysTheSameSchedule: the same seed gives the same schedule, step for step — so
// the seed a failure prints reproduces it.
func TestASeedReplaysTheSameSchedule(t *testing.T) {
	for _, b := range simBackends {
		seed := rand.Uint64()
		var first simStats
		for run := range 3 {
			var st simStats
			t.Run(fmt.Sprintf("%s/seed=%d/run=%d", b, seed, run), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { st = takeoverRace(t, seed, newSimBackend(t, b, seed), 4, 2, true) })
			})
			if run == 0 {
				first = st
				continue
			}
			if st.trace != first.trace || st.grants != first.grants || st.acked != first.acked {
				for i := range min(len(st.keys), len(first.keys)) {
					if st.keys[i] != first.keys[i] {
						for j := max(0, i-8); j < min(i+3, len(st.keys), len(first.keys)); j++ {
							t.Logf("step %d:\n  run 0: %s\n  run %d: %s", j, first.keys[j], run, st.keys[j])
						}
						break
					}
				}
				t.Fatalf("%s seed %d: run %d scheduled %d steps (trace %x, %d acknowledged), run 0 %d (trace %x, %d)", b, seed, run, st.grants, st.trace, st.acked, first.grants, first.trace, first.acked)
			}
		}
	}
}

// takeoverRace is one iteration: a deposed leader at epoch deposed still appending while
// racers takeovers at the next epochs start at random moments.
func takeoverRace(t *testing.T, seed uint64, b *simBackend, deposed int32, racers int, record bool) simStats {
	return takeoverRaceWith(t, seed, b, deposed, racers, record, false)
}

// takeoverRaceCompacted is takeoverRace on a compacted topic with cleaners.
func takeoverRaceCompacted(t *testing.T, seed uint64, b *simBackend, deposed int32, racers int) simStats {
	return takeoverRaceWith(t, seed, b, deposed, racers, false, true)
}

func takeoverRaceWith(t *testing.T, seed uint64, b *simBackend, deposed int32, racers int, record, compact bool) simStats {
	rng := rand.New(rand.NewPCG(seed, 1))
	s := newSimScheduler(seed)
	s.record = record
	var st simStats
	cfg := testConfig()
	if compact {
		cfg.Compact, cfg.MinCleanableDirtyRatio = true, 0
	}
	keys := func(r *rand.Rand) uint64 { // unique keys on a compacted topic, none otherwise
		if !compact {
			return 0
		}
		return r.Uint64() | 1
	}
	cfg.SegmentBytes = int64(2048 + rng.IntN(8192))
	cfg.IndexIntervalBytes = int32(64 + rng.IntN(1024))
	ledger := newSimLedger(t)
	ledger.lossyAcksOne = b.nfs != nil
	opts := func(node FS, actor string, fault func(Op, string) error) Options {
		o := s.options(FaultFS{FS: node, Fault: fault}, actor)
		if compact {
			o.Cleaner = NewCleaner(CleanerConfig{DedupeBufferBytes: 64 << 10})
		}
		return o
	}
	var logs []*Log
	defer func() {
		s.on.Store(false)
		for _, l := range logs {
			crash(t, l)
		}
	}()

	// Before the race: the deposed leader takes over (sometimes from a crashed predecessor)
	// and acknowledges a few batches, unscheduled.
	if rng.IntN(3) == 0 {
		node, _ := b.node()
		prev := openLog(t, b.dir, deposed-1, cfg, Options{FS: node})
		for i := range rng.IntN(12) {
			spec := plain(1+i%3, byte(i))
			spec.keySeed = keys(rng)
			res := mustAppend(t, prev, makeBatch(spec), AcksAll)
			ledger.acked(res.BaseOffset, stored(makeBatch(spec), res.BaseOffset, deposed-1), AcksAll)
		}
		crash(t, prev)
	}
	node4, kill4 := b.node()
	l4, err := Open(b.dir, cfg, opts(node4, fmt.Sprintf("e%d", deposed), nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := l4.Takeover(context.Background(), deposed); err != nil {
		t.Fatalf("takeover at %d: %v", deposed, err)
	}
	logs = append(logs, l4)
	for i := range 1 + rng.IntN(10) {
		spec := plain(1+i%4, byte(50+i))
		spec.keySeed = keys(rng)
		batch := makeBatch(spec)
		res := mustAppend(t, l4, bytes.Clone(batch), AcksAll)
		ledger.acked(res.BaseOffset, batch, AcksAll)
	}

	var wg sync.WaitGroup
	s.on.Store(true)
	var logsMu sync.Mutex
	lead := func(l *Log, epoch int32, actor string, prng *rand.Rand) {
		for p := range 1 + prng.IntN(3) {
			pseed := prng.Uint64()
			s.actor(&wg, func() {
				simProducer(t, s, l, ledger, fmt.Sprintf("%s-p%d", actor, p), int64(epoch)*100+int64(p), pseed, compact)
			})
		}
		rseed := prng.Uint64()
		s.actor(&wg, func() { simReader(t, s, l, ledger, actor+"-r", rseed) })
		if compact {
			cseed := prng.Uint64()
			s.actor(&wg, func() { simCleaner(t, s, l, actor+"-c", cseed) })
		}
	}
	lead(l4, deposed, fmt.Sprintf("e%d", deposed), rand.New(rand.NewPCG(seed, 2)))

	// The deposed leader's node may die at a random step.
	if rng.IntN(3) == 0 {
		after := rng.IntN(300)
		st.faults = append(st.faults, fmt.Sprintf("epoch %d's node died after %d steps", deposed, after))
		s.actor(&wg, func() {
			for range after {
				s.step("chaos wait")
			}
			kill4()
		})
	}
	for r := range racers {
		epoch := deposed + 1 + int32(r)
		actor := fmt.Sprintf("e%d", epoch)
		wait := rng.IntN(150)
		var fired atomic.Bool
		eio := -1
		if r == 0 && racers > 1 && rng.IntN(4) == 0 {
			eio = 1 + rng.IntN(120)
		}
		rseed := rng.Uint64()
		node, _ := b.node()
		s.actor(&wg, func() {
			for range wait {
				s.step(actor + " wait")
			}
			l, err := Open(b.dir, cfg, opts(node, actor, injectAt(eio, &fired)))
			if err != nil {
				t.Error(err)
				return
			}
			logsMu.Lock()
			logs = append(logs, l)
			logsMu.Unlock()
			err = l.Takeover(context.Background(), epoch)
			if fired.Load() {
				logsMu.Lock()
				st.faults = append(st.faults, fmt.Sprintf("epoch %d hit EIO", epoch))
				logsMu.Unlock()
			}
			if err != nil {
				if !errors.Is(err, ErrFenced) && (!fired.Load() || !errors.Is(err, ErrStorage)) {
					t.Errorf("takeover at %d: %v", epoch, err)
				}
				return
			}
			lead(l, epoch, actor, rand.New(rand.NewPCG(rseed, 3)))
		})
	}
	s.run()
	wg.Wait()
	s.on.Store(false)
	st.grants, st.trace, st.keys = s.grants, s.trace, s.keys
	if t.Failed() {
		return st
	}

	// A power loss of the whole site (NFS): the server and every node.
	powerLoss := b.nfs != nil && rng.IntN(3) == 0
	if powerLoss {
		for _, l := range logs {
			crash(t, l)
		}
		b.nfs.CrashServer()
		st.faults = append(st.faults, "the whole site lost power")
	}
	final := int32(deposed + int32(racers) + 1)
	node7, _ := b.node()
	l7 := openLog(t, b.dir, final, cfg, Options{FS: node7})
	st.acked = len(ledger.ackAll) + len(ledger.ackOne)
	st.served = len(ledger.served)
	ledger.requireIn(t, l7, fmt.Sprintf("epoch %d after the race", final))
	if rng.IntN(2) == 0 {
		relinquish(t, l7)
	} else {
		crash(t, l7)
	}
	node8, _ := b.node()
	l8 := openLog(t, b.dir, final+1, cfg, Options{FS: node8})
	ledger.requireIn(t, l8, fmt.Sprintf("epoch %d after epoch %d stopped", final+1, final))
	crash(t, l8)
	return st
}

// simProducer appends batches to l, one scheduled step each, recording what is acknowledged;
// now and then it retries its last idempotent batch, which must come back as the duplicate at
// the original offsets.
//
// With keyed, every record has a key of its own (a compacted topic whose cleaner removes
// nothing).
func simProducer(t *testing.T, s *simScheduler, l *Log, ledger *simLedger, actor string, pid int64, seed uint64, keyed bool) {
	rng := rand.New(rand.NewPCG(seed, 4))
	seq := int32(0)
	var last []byte
	var lastRes AppendResult
	for n := range 4 + rng.IntN(12) {
		s.step(actor + " append")
		acks := AcksAll
		if rng.IntN(3) == 0 {
			acks = AcksLeader
		}
		var batch []byte
		retry := last != nil && rng.IntN(5) == 0
		if retry {
			batch = bytes.Clone(last)
		} else {
			spec := idem(pid, 0, seq, 1+rng.IntN(4))
			spec.valueSize, spec.seed = rng.IntN(300), byte(n)
			if keyed {
				spec.keySeed = rng.Uint64() | 1
			}
			batch = makeBatch(spec)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		res, err := l.Append(ctx, bytes.Clone(batch), acks)
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			t.Errorf("%s: an append waited a minute for its acknowledgement", actor)
			return
		case errors.Is(err, ErrOutOfOrderSequence) && retry:
			continue // the original was not acknowledged: the retry is not a duplicate
		case err != nil:
			if !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrStorage) {
				t.Errorf("%s: %v", actor, err)
			}
			return
		}
		if retry {
			if !res.Duplicate || res.BaseOffset != lastRes.BaseOffset {
				t.Errorf("%s: a retry of the batch at %d answered %+v", actor, lastRes.BaseOffset, res)
			}
			continue
		}
		ledger.acked(res.BaseOffset, batch, acks)
		last, lastRes = batch, res
		seq += int32(parseHeader(batch).RecordCount)
	}
}

// simCleanedPasses counts the passes the simulations' cleaners swapped in (the compacted
// race checks it did clean).
var simCleanedPasses atomic.Int64

// simCleaner runs cleaning passes on l at random steps; it stops when the log does.
func simCleaner(t *testing.T, s *simScheduler, l *Log, actor string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 8))
	for range 2 + rng.IntN(5) {
		for range rng.IntN(30) {
			s.step(actor + " wait")
		}
		s.step(actor + " clean")
		res, err := l.Clean(context.Background())
		if res.Cleaned {
			simCleanedPasses.Add(1)
		}
		if err != nil {
			if !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrStorage) {
				t.Errorf("%s: clean: %v", actor, err)
			}
			return
		}
	}
}

// simReader reads l at random offsets below its high watermark, recording what it served.
func simReader(t *testing.T, s *simScheduler, l *Log, ledger *simLedger, actor string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 5))
	for range 3 + rng.IntN(8) {
		s.step(actor + " read")
		off, err := l.Offsets()
		if err != nil {
			return
		}
		if off.HighWatermark == off.LogStart {
			continue
		}
		o := off.LogStart + rng.Int64N(off.HighWatermark-off.LogStart)
		if rng.IntN(8) == 0 {
			ledger.mu.Lock()
			ledger.deleteTo = max(ledger.deleteTo, o)
			ledger.mu.Unlock()
			if _, err := l.DeleteRecords(context.Background(), o); err != nil && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrStorage) {
				t.Errorf("%s: DeleteRecords(%d): %v", actor, o, err)
			}
			continue
		}
		res, err := l.Read(o, 1+rng.IntN(4096), true)
		if err != nil {
			if !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrStorage) && !errors.Is(err, ErrOffsetOutOfRange) {
				t.Errorf("%s: read at %d: %v", actor, o, err)
			}
			continue
		}
		ledger.read(res.Records)
	}
}

// TestAcknowledgedAppendsSurviveNodeCrashes: leader after leader takes the partition over on a
// node of its own and appends until its node dies at a random step (mid-append, mid-roll,
// mid-takeover, mid-checkpoint) or it relinquishes; on NFS the whole site sometimes loses
// power as well. After every one, a takeover must serve every batch acknowledged with
// acks=all and every batch served, byte for byte (acks=1 too on the local disk).
// The local disk keeps what a dead process wrote (its page cache), as with SIGKILL; the
// re-executed SIGKILL test (crash_test.go) does the same with real processes.
func TestAcknowledgedAppendsSurviveNodeCrashes(t *testing.T) {
	for _, b := range simBackends {
		runSeeded(t, simRun{test: "TestAcknowledgedAppendsSurviveNodeCrashes", backend: b, scenario: nodeCrashes}, simIterations())
	}
}

func nodeCrashes(t *testing.T, seed uint64, b *simBackend) simStats {
	rng := rand.New(rand.NewPCG(seed, 6))
	s := newSimScheduler(seed)
	var st simStats
	cfg := crashConfig()
	cfg.SegmentBytes = int64(2048 + rng.IntN(4096)) // above the largest simProducer batch
	ledger := newSimLedger(t)
	ledger.lossyAcksOne = b.nfs != nil
	epoch := int32(1)
	for round := range 2 + rng.IntN(4) {
		node, kill := b.node()
		actor := fmt.Sprintf("e%d", epoch)
		l, err := Open(b.dir, cfg, s.options(node, actor))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		s.on.Store(true)
		e, lseed := epoch, rng.Uint64()
		s.actor(&wg, func() {
			if err := l.Takeover(context.Background(), e); err != nil {
				if !errors.Is(err, ErrStorage) && !errors.Is(err, ErrNotLeader) { // the node died under it, or it relinquished
					t.Errorf("takeover at %d: %v", e, err)
				}
				return
			}
			prng := rand.New(rand.NewPCG(lseed, 7))
			for p := range 1 + prng.IntN(3) {
				pseed := prng.Uint64()
				s.actor(&wg, func() {
					simProducer(t, s, l, ledger, fmt.Sprintf("%s-p%d", actor, p), int64(e)*100+int64(p), pseed, false)
				})
			}
			rseed := prng.Uint64()
			s.actor(&wg, func() { simReader(t, s, l, ledger, actor+"-r", rseed) })
		})
		after, clean := rng.IntN(400), rng.IntN(4) == 0
		s.actor(&wg, func() {
			for range after {
				s.step("chaos wait")
			}
			if clean {
				_ = l.Relinquish(context.Background())
				return
			}
			kill()
		})
		if !clean {
			st.faults = append(st.faults, fmt.Sprintf("round %d: the node died after %d steps", round, after))
		}
		s.run()
		wg.Wait()
		s.on.Store(false)
		crash(t, l)
		if t.Failed() {
			return st
		}
		if b.nfs != nil && rng.IntN(4) == 0 {
			b.nfs.CrashServer()
			st.faults = append(st.faults, fmt.Sprintf("round %d: the whole site lost power", round))
		}
		epoch++
		checker, _ := b.node()
		c := openLog(t, b.dir, epoch, cfg, Options{FS: checker})
		ledger.requireIn(t, c, fmt.Sprintf("epoch %d after round %d", epoch, round))
		crash(t, c)
		epoch++
	}
	st.grants, st.trace = s.grants, s.trace
	st.acked, st.served = len(ledger.ackAll)+len(ledger.ackOne), len(ledger.served)
	return st
}
