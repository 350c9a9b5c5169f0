package storage

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
)

// stallingFS holds chosen operations of one leader until released, so a test can put two
// takeovers and a deposed writer in exactly the order a review found dangerous.
type stallingFS struct {
	FS
	mu      sync.Mutex
	writes  int           // WriteAt calls on segment files seen so far
	tearAt  int           // the tearAt-th segment write is split: half, stall, rest (0: none)
	torn    chan struct{} // closed once the first half of the torn write is in the file
	finish  chan struct{} // close to let the torn write finish
	holdOn  func(op Op, path string) bool
	reached chan struct{} // closed when holdOn first matched
	release chan struct{} // close to let the held operation go on
	once    sync.Once
}

func newStallingFS(inner FS) *stallingFS {
	return &stallingFS{FS: inner, torn: make(chan struct{}), finish: make(chan struct{}), reached: make(chan struct{}), release: make(chan struct{})}
}

func (s *stallingFS) hold(op Op, path string) {
	if s.holdOn != nil && s.holdOn(op, path) {
		s.once.Do(func() { close(s.reached); <-s.release })
	}
}

func (s *stallingFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	s.hold(OpOpen, name)
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &stallingFile{File: f, fs: s, name: name}, nil
}

func (s *stallingFS) Remove(name string) error {
	s.hold(OpRemove, name)
	return s.FS.Remove(name)
}

type stallingFile struct {
	File
	fs   *stallingFS
	name string
}

func (f *stallingFile) WriteAt(p []byte, off int64) (int, error) {
	if !strings.HasSuffix(f.name, segmentSuffix) {
		return f.File.WriteAt(p, off)
	}
	f.fs.mu.Lock()
	f.fs.writes++
	tear := f.fs.writes == f.fs.tearAt
	f.fs.mu.Unlock()
	if !tear {
		return f.File.WriteAt(p, off)
	}
	n, err := f.File.WriteAt(p[:len(p)/2], off)
	if err != nil {
		return n, err
	}
	close(f.fs.torn)
	<-f.fs.finish
	m, err := f.File.WriteAt(p[len(p)/2:], off+int64(n))
	return n + m, err
}

func (f *stallingFile) Truncate(size int64) error {
	f.fs.hold(OpTruncate, f.name)
	return f.File.Truncate(size)
}

// TestOverlappingTakeoversNeverStrandAcknowledgedRecords: the partition moves twice in quick
// succession (epoch 5, then 6) while the deposed epoch-4 leader is still appending. Epoch 5
// scans the log to X and is held just before it rolls (and, where it would, before it cuts a
// torn tail); the old leader writes on; epoch 6 claims, scans to X' > X, rolls, serves and
// acknowledges; then epoch 5 goes on. Epoch 5 must end fenced, having served nothing; epoch
// 6 must read everything it and epoch 4 acknowledged; and a later takeover must serve it all
// too (before the fix epoch 5 reported success, cut the log at X under epoch 6, and left a
// segment X-5 that made every later takeover refuse the log as corrupt).
func TestOverlappingTakeoversNeverStrandAcknowledgedRecords(t *testing.T) {
	for _, tc := range []struct {
		name string
		torn bool
	}{
		{"the deposed leader writes on after epoch 5's scan", false},
		{"epoch 5 scans a torn tail the deposed leader then completes", true},
	} {
		t.Run(tc.name, func(t *testing.T) { overlappingTakeovers(t, tc.torn) })
	}
}

func overlappingTakeovers(t *testing.T, torn bool) {
	dir := partitionDir(t)
	cfg := testConfig()
	gate4 := newGatedSync()
	stall4 := newStallingFS(FaultFS{FS: OSFS{}, Fault: gate4.fault})
	l4 := openLog(t, dir, 4, cfg, Options{FS: stall4})
	acked := map[int64][]byte{}
	for i := range 5 {
		b := makeBatch(plain(2, byte(i)))
		acked[mustAppend(t, l4, b, AcksAll).BaseOffset] = bytes.Clone(b)
	}
	gate4.set(true) // from here epoch 4's rounds hang in fsync: it writes, acknowledges nothing
	t.Cleanup(func() { gate4.set(false) })

	// Epoch 4 writes on while others take over: each of these appends is written at once
	// and then waits (in vain) for its round.
	var wg4 sync.WaitGroup
	t.Cleanup(func() { gate4.set(false); wg4.Wait() })
	appendLate := func(n int, seed byte) {
		start, _ := l4.Offsets()
		for i := range n {
			wg4.Go(func() { _, _ = l4.Append(context.Background(), makeBatch(plain(3, seed+byte(i))), AcksAll) })
			waitFor(t, func() bool { off, _ := l4.Offsets(); return off.LogEnd >= start.LogEnd+int64(3*(i+1)) })
		}
	}
	if torn {
		stall4.mu.Lock()
		stall4.tearAt = stall4.writes + 1
		stall4.mu.Unlock()
		wg4.Go(func() { _, _ = l4.Append(context.Background(), makeBatch(plain(3, 100)), AcksAll) })
		<-stall4.torn
	}

	// Epoch 5 claims and scans, and is held just before its roll (or its tail cut).
	stall5 := newStallingFS(OSFS{})
	stall5.holdOn = func(op Op, path string) bool {
		return op == OpTruncate || (op == OpOpen && strings.HasSuffix(path, "-0000000005"+segmentSuffix))
	}
	l5, _ := Open(dir, cfg, Options{FS: stall5})
	done5 := make(chan error, 1)
	go func() { done5 <- l5.Takeover(context.Background(), 5) }()
	t.Cleanup(func() { _ = l5.Relinquish(context.Background()) })
	<-stall5.reached

	if torn {
		close(stall4.finish) // the deposed leader completes the batch epoch 5 saw torn
	}
	appendLate(3, 120)
	x2, _ := l4.Offsets()

	// Epoch 6 claims, scans further, rolls, serves and acknowledges.
	l6 := openLog(t, dir, 6, cfg, Options{})
	roll6, _ := l6.Offsets()
	if roll6.LogEnd < x2.LogEnd {
		t.Fatalf("epoch 6 rolled at %d, below what epoch 4 had written (%d)", roll6.LogEnd, x2.LogEnd)
	}
	acked6 := map[int64][]byte{}
	for i := range 4 {
		b := makeBatch(plain(2, byte(200+i)))
		acked6[mustAppend(t, l6, b, AcksAll).BaseOffset] = bytes.Clone(b)
	}

	// Epoch 5 goes on: it lost the fence and must never report success.
	close(stall5.release)
	if err := <-done5; !isErr(err, ErrFenced) {
		t.Errorf("epoch 5's takeover, overtaken by epoch 6, returned %v; want ErrFenced", err)
	}
	if _, err := l5.Append(context.Background(), makeBatch(plain(1, 9)), AcksAll); err == nil {
		t.Error("epoch 5 acknowledged an append after losing the fence")
	}
	for _, n := range segmentFiles(t, dir) {
		if _, e, _ := parseStem(n, segmentSuffix); e == 5 {
			t.Errorf("epoch 5 left its roll segment %s behind after losing", n)
		}
	}

	requireServes(t, l6, "epoch 6", acked, acked6)
	gate4.set(false)
	wg4.Wait()
	relinquish(t, l6)
	l7 := openLog(t, dir, 7, cfg, Options{})
	requireServes(t, l7, "epoch 7 after the overlapping takeovers", acked, acked6)
	crash(t, l7)
	l8 := openLog(t, dir, 8, cfg, Options{})
	requireServes(t, l8, "epoch 8 after epoch 7 crashed", acked, acked6)
}

// requireServes fails unless l serves every acknowledged batch at its offset, byte for byte.
func requireServes(t *testing.T, l *Log, who string, acked ...map[int64][]byte) {
	t.Helper()
	waitDurable(t, l)
	got := batchesByOffset(t, readAll(t, l))
	for _, m := range acked {
		for off, b := range m {
			if !bytes.Equal(got[off], b) {
				t.Fatalf("%s: the batch acknowledged at offset %d is missing or different", who, off)
			}
		}
	}
}
