package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// segmentFault fails operation op on segment files once armed, after `after` more successes.
type segmentFault struct {
	op    Op
	err   error
	armed atomic.Bool
	after atomic.Int64
	fired atomic.Bool
}

func (s *segmentFault) fault(op Op, path string) error {
	if op != s.op || !strings.HasSuffix(path, segmentSuffix) || !s.armed.Load() {
		return nil
	}
	if s.fired.Load() || s.after.Add(-1) < 0 {
		s.fired.Store(true)
		return s.err
	}
	return nil
}

// TestStorageFailureAcknowledgesNothingAfterIt: an fsync error, EIO or ENOSPC (and a short
// write), injected at a random point under concurrent producers, is sticky: no append is
// acknowledged after it, the high watermark stops, and everything acknowledged before it is
// recovered intact by the next leader.
func TestStorageFailureAcknowledgesNothingAfterIt(t *testing.T) {
	cases := []struct {
		name string
		op   Op
		err  error
	}{
		{"fsync fails with EIO", OpSync, syscall.EIO},
		{"fsync fails with ENOSPC", OpSync, syscall.ENOSPC},
		{"short write then ENOSPC", OpWrite, syscall.ENOSPC},
		{"short write then EIO", OpWrite, syscall.EIO},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for iter := range 5 {
				storageFailure(t, tc.op, tc.err, uint64(iter))
			}
		})
	}
}

func storageFailure(t *testing.T, op Op, cause error, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	dir := partitionDir(t)
	sf := &segmentFault{op: op, err: cause}
	sf.after.Store(int64(rng.IntN(40)))
	cfg := testConfig()
	cfg.SegmentBytes = 8192
	l := openLog(t, dir, 1, cfg, Options{FS: FaultFS{FS: OSFS{}, Fault: sf.fault}})
	sf.armed.Store(true)
	var (
		mu       sync.Mutex
		ackedAll = map[int64][]byte{}
		acked1   = map[int64][]byte{}
		wg       sync.WaitGroup
	)
	for p := range 6 {
		wg.Go(func() {
			for n := 0; ; n++ {
				b := makeBatch(plain(1+n%4, byte(p*40+n)))
				acks := AcksAll
				if p%3 == 0 {
					acks = AcksLeader
				}
				res, err := l.Append(context.Background(), b, acks)
				if err != nil {
					if !isErr(err, ErrStorage) || !errors.Is(err, cause) {
						t.Errorf("append failed with %v, want a storage error caused by %v", err, cause)
					}
					return
				}
				mu.Lock()
				if acks == AcksAll {
					ackedAll[res.BaseOffset] = bytes.Clone(b)
				} else {
					acked1[res.BaseOffset] = bytes.Clone(b)
				}
				mu.Unlock()
			}
		})
	}
	waitOrFail(t, &wg, "producers never saw the storage failure")
	if !sf.fired.Load() {
		t.Fatal("the fault never fired")
	}
	if err := l.Err(); !isErr(err, ErrStorage) || !errors.Is(err, cause) {
		t.Fatalf("log stopped with %v", err)
	}
	hw, moved := l.HighWatermark()
	select {
	case <-moved:
	default:
		t.Fatal("the high-watermark channel is not closed on a stopped log")
	}
	for off := range ackedAll {
		if off >= hw {
			t.Fatalf("acks=all acknowledged offset %d at or above the last durable offset %d", off, hw)
		}
	}
	if _, err := l.Append(context.Background(), makeBatch(plain(1, 0)), AcksAll); !isErr(err, ErrStorage) {
		t.Fatalf("append after the failure: %v, want the sticky storage error", err)
	}
	if _, err := l.Read(0, 100, true); !isErr(err, ErrStorage) {
		t.Fatalf("read after the failure: %v, want the sticky storage error", err)
	}
	<-l.stopped
	// The disk is healthy again: the next leader cuts the torn write and keeps everything
	// acknowledged (acks=1 too: it reached the page cache).
	l2 := openLog(t, dir, 2, cfg, Options{})
	got := batchesByOffset(t, readAll(t, l2))
	for _, m := range []map[int64][]byte{ackedAll, acked1} {
		for off, b := range m {
			if !bytes.Equal(got[off], b) {
				t.Fatalf("acknowledged batch at %d lost after a storage failure", off)
			}
		}
	}
}

// gatedSync blocks fsyncs of segment files while closed is false.
type gatedSync struct {
	mu    sync.Mutex
	open  *sync.Cond
	gated bool
	syncs atomic.Int64
	delay time.Duration
}

func newGatedSync() *gatedSync {
	g := &gatedSync{}
	g.open = sync.NewCond(&g.mu)
	return g
}

func (g *gatedSync) fault(op Op, path string) error {
	if op != OpSync || !strings.HasSuffix(path, segmentSuffix) {
		return nil
	}
	g.syncs.Add(1)
	g.mu.Lock()
	for g.gated {
		g.open.Wait()
	}
	g.mu.Unlock()
	time.Sleep(g.delay)
	return nil
}

func (g *gatedSync) set(gated bool) {
	g.mu.Lock()
	g.gated = gated
	g.mu.Unlock()
	g.open.Broadcast()
}

func TestOneFsyncServesEveryWaitingAppend(t *testing.T) {
	g := newGatedSync()
	g.delay = 2 * time.Millisecond // a disk whose flushes take a while
	l := openLog(t, partitionDir(t), 1, testConfig(), Options{FS: FaultFS{FS: OSFS{}, Fault: g.fault}})
	g.syncs.Store(0)
	const producers, each = 32, 10
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for n := range each {
				mustAppend(t, l, makeBatch(plain(1, byte(p+n))), AcksAll)
			}
		})
	}
	wg.Wait()
	syncs := g.syncs.Load()
	t.Logf("%d acks=all appends took %d fsyncs", producers*each, syncs)
	if syncs > producers*each/4 {
		t.Fatalf("%d fsyncs for %d concurrent appends: group commit is not grouping", syncs, producers*each)
	}
}

func TestAcksOneIsReadableOnlyAfterTheNextFlushAndTheChannelSaysWhen(t *testing.T) {
	g := newGatedSync()
	l := openLog(t, partitionDir(t), 1, testConfig(), Options{FS: FaultFS{FS: OSFS{}, Fault: g.fault}})
	g.set(true)
	hw0, moved := l.HighWatermark()
	res := mustAppend(t, l, makeBatch(plain(2, 1)), AcksLeader)
	if res.BaseOffset != 0 || hw0 != 0 {
		t.Fatalf("append at %d, hw %d", res.BaseOffset, hw0)
	}
	if r, _ := l.Read(0, 1<<20, true); len(r.Records) != 0 || r.HighWatermark != 0 || r.LogEndOffset != 2 {
		t.Fatalf("acks=1 data readable before it is durable: %d bytes, hw %d", len(r.Records), r.HighWatermark)
	}
	select {
	case <-moved:
		t.Fatal("the high watermark moved before the flush")
	case <-time.After(20 * time.Millisecond):
	}
	g.set(false)
	select {
	case <-moved:
	case <-time.After(10 * time.Second):
		t.Fatal("the high-watermark channel never closed after the flush")
	}
	if hw, _ := l.HighWatermark(); hw != 2 {
		t.Fatalf("hw %d after the flush, want 2", hw)
	}
	if r, _ := l.Read(0, 1<<20, true); len(headersOf(t, r.Records)) != 1 {
		t.Fatal("the batch is not readable after the flush")
	}
}

func TestFencedLogFailsItsWaitingAppendsAndClosesItsFiles(t *testing.T) {
	dir := partitionDir(t)
	g := newGatedSync()
	cf := newCountingFS(FaultFS{FS: OSFS{}, Fault: g.fault})
	l := openLog(t, dir, 1, testConfig(), Options{FS: cf})
	mustAppend(t, l, makeBatch(plain(1, 1)), AcksAll)
	g.set(true)
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			_, err := l.Append(context.Background(), makeBatch(plain(1, byte(10+i))), AcksAll)
			errs <- err
		}()
	}
	waitFor(t, func() bool { off, _ := l.Offsets(); return off.LogEnd == 5 })
	f, _ := OpenFence(OSFS{}, filepath.Join(dir, fenceDirName))
	if err := f.Claim(2); err != nil { // another leader takes over
		t.Fatal(err)
	}
	g.set(false)
	for range 4 {
		if err := <-errs; !isErr(err, ErrFenced) {
			t.Fatalf("a waiting append got %v, want ErrFenced", err)
		}
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done never closed")
	}
	<-l.stopped
	if n := cf.openCount(); n != 0 {
		t.Fatalf("a fenced log still holds %d files open: %v", n, cf.openNames())
	}
	if _, err := l.Append(context.Background(), makeBatch(plain(1, 1)), AcksLeader); !isErr(err, ErrFenced) {
		t.Fatalf("acks=1 append on a fenced log: %v", err)
	}
	if hw, _ := l.HighWatermark(); hw != 1 {
		t.Fatalf("hw %d: the unacknowledged appends must not become visible", hw)
	}
}

func TestAcksOneOnAFencedLogIsNotAcknowledged(t *testing.T) {
	dir := partitionDir(t)
	l := openLog(t, dir, 1, testConfig(), Options{})
	mustAppend(t, l, makeBatch(plain(1, 1)), AcksLeader)
	f, _ := OpenFence(OSFS{}, filepath.Join(dir, fenceDirName))
	if err := f.Claim(2); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), makeBatch(plain(1, 2)), AcksLeader); !isErr(err, ErrFenced) {
		t.Fatalf("acks=1 after the fence moved: %v, want ErrFenced", err)
	}
}

func TestSegmentsRollAtSegmentBytesAndSegmentMs(t *testing.T) {
	dir := partitionDir(t)
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	cfg.SegmentMs = 60_000
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	l := openLog(t, dir, 1, cfg, Options{Now: clock})
	b := makeBatch(plain(3, 1)) // 61 + 3·21 bytes
	for range 30 {
		mustAppend(t, l, bytes.Clone(b), AcksAll)
	}
	segs := segmentFiles(t, dir)
	perSegment := int(cfg.SegmentBytes) / len(b)
	if want := (30 + perSegment - 1) / perSegment; len(segs) != want {
		t.Fatalf("%d segments for 30 batches of %d bytes at segment.bytes %d, want %d", len(segs), len(b), cfg.SegmentBytes, want)
	}
	for _, s := range segs {
		if st, _ := os.Stat(filepath.Join(dir, s)); st.Size() > cfg.SegmentBytes {
			t.Fatalf("segment %s is %d bytes, over segment.bytes", s, st.Size())
		}
	}
	before := len(segs)
	now.Add(cfg.SegmentMs) // the active segment's first batch is now segment.ms old
	mustAppend(t, l, bytes.Clone(b), AcksAll)
	if got := len(segmentFiles(t, dir)); got != before+1 {
		t.Fatalf("%d segments after segment.ms passed, want %d", got, before+1)
	}
	if got := readAll(t, l); len(headersOf(t, got)) != 31 {
		t.Fatal("rolls lost batches")
	}
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := OSFS{}.ReadDirNames(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if _, _, ok := parseStem(n, segmentSuffix); ok {
			out = append(out, n)
		}
	}
	return out
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(time.Millisecond)
	}
}

// countingFS tracks which files are open.
type countingFS struct {
	FS
	mu   sync.Mutex
	open map[*countedFile]string
}

type countedFile struct {
	File
	fs *countingFS
}

func newCountingFS(inner FS) *countingFS {
	return &countingFS{FS: inner, open: map[*countedFile]string{}}
}

func (c *countingFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	cf := &countedFile{File: f, fs: c}
	c.mu.Lock()
	c.open[cf] = filepath.Base(name)
	c.mu.Unlock()
	return cf, nil
}

func (f *countedFile) Close() error {
	f.fs.mu.Lock()
	delete(f.fs.open, f)
	f.fs.mu.Unlock()
	return f.File.Close()
}

func (c *countingFS) openCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.open)
}

func (c *countingFS) openNames() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s []string
	for _, n := range c.open {
		s = append(s, n)
	}
	return fmt.Sprint(s)
}

// TestRetryOfABatchWhoseFsyncIsInFlightIsAnsweredOnceItIsDurable: a producer retries a batch
// (its request timed out, say) while the fsync round covering the original is still running,
// and then nothing else is appended. The retry is answered with the original offsets as soon
// as that round completes (before the fix it waited for a round that never started and the
// producer got REQUEST_TIMED_OUT on a quiet partition although its batch was durable). The
// clock is synctest's: the timeout below passes only if the retry really waits forever.
func TestRetryOfABatchWhoseFsyncIsInFlightIsAnsweredOnceItIsDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGatedSync()
		l := openLog(t, partitionDir(t), 1, testConfig(), Options{FS: FaultFS{FS: OSFS{}, Fault: g.fault}})
		g.set(true)
		before := g.syncs.Load()
		first := make(chan error, 1)
		go func() {
			_, err := l.Append(context.Background(), makeBatch(idem(7, 0, 0, 2)), AcksAll)
			first <- err
		}()
		for g.syncs.Load() == before {
			time.Sleep(time.Millisecond) // until the round covering the original is in its fsync
		}
		retry := make(chan error, 1)
		var res AppendResult
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var err error
			res, err = l.Append(ctx, makeBatch(idem(7, 0, 0, 2)), AcksAll)
			retry <- err
		}()
		synctest.Wait() // the retry is waiting
		g.set(false)
		if err := <-first; err != nil {
			t.Fatalf("the original append: %v", err)
		}
		if err := <-retry; err != nil {
			t.Fatalf("the retry of a batch whose round was in flight: %v, want its original offsets", err)
		}
		if !res.Duplicate || res.BaseOffset != 0 {
			t.Fatalf("retry answered %+v, want the duplicate at 0", res)
		}
		relinquish(t, l)
	})
}

// Options.FenceChecked hears every fence check with its result: the takeover's, the one
// before an acknowledgement, and the one that finds the fence moved.
func TestEveryFenceCheckIsToldWithItsResult(t *testing.T) {
	dir := partitionDir(t)
	var mu sync.Mutex
	var results []error
	checked := func(took time.Duration, err error) {
		if took < 0 {
			t.Errorf("a check took %s", took)
		}
		mu.Lock()
		results = append(results, err)
		mu.Unlock()
	}
	count := func() (passed, fenced, other int) {
		mu.Lock()
		defer mu.Unlock()
		for _, err := range results {
			switch {
			case err == nil:
				passed++
			case isErr(err, ErrFenced):
				fenced++
			default:
				other++
			}
		}
		return
	}
	l := openLog(t, dir, 1, testConfig(), Options{FenceChecked: checked})
	afterTakeover, _, _ := count()
	if afterTakeover == 0 {
		t.Fatal("the takeover's fence checks were not told")
	}
	mustAppend(t, l, makeBatch(plain(1, 1)), AcksLeader)
	if passed, fenced, other := count(); passed <= afterTakeover || fenced != 0 || other != 0 {
		t.Fatalf("after an acks=1 append: %d passed, %d fenced, %d other; want more than the takeover's %d passed", passed, fenced, other, afterTakeover)
	}
	f, _ := OpenFence(OSFS{}, filepath.Join(dir, fenceDirName))
	if err := f.Claim(2); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), makeBatch(plain(1, 2)), AcksLeader); !isErr(err, ErrFenced) {
		t.Fatalf("acks=1 after the fence moved: %v, want ErrFenced", err)
	}
	if _, fenced, other := count(); fenced == 0 || other != 0 {
		t.Fatalf("after the fence moved: %d fenced, %d other; want a fenced one", fenced, other)
	}
}
