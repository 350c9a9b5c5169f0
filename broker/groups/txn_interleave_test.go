package groups

import (
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/paddock-dev/paddock/broker/storage"
)

var txnSeed = flag.Uint64("txnoffsets.seed", 0, "replay TestTransactionalOffsetsUnderInterleavings with this seed")

// txnModel is what the committed offsets must be: every acknowledged plain commit,
// TxnOffsetCommit and marker applied in order by Apache's rules, nothing refused applied.
type txnModel struct {
	committed map[string]map[int32]int64
	pending   map[int64]map[string]map[int32]modelPending
	seq       int
}

type modelPending struct {
	offset int64
	seq    int
	stale  bool
}

func (m *txnModel) plain(g string, offs map[int32]int64) {
	for p, o := range offs {
		m.committed[g][p] = o
		for _, byGroup := range m.pending {
			if e, ok := byGroup[g][p]; ok {
				e.stale = true
				byGroup[g][p] = e
			}
		}
	}
}

func (m *txnModel) txn(g string, pid int64, offs map[int32]int64) {
	if m.pending[pid] == nil {
		m.pending[pid] = map[string]map[int32]modelPending{}
	}
	if m.pending[pid][g] == nil {
		m.pending[pid][g] = map[int32]modelPending{}
	}
	m.seq++
	for p, o := range offs {
		m.pending[pid][g][p] = modelPending{offset: o, seq: m.seq}
	}
}

func (m *txnModel) complete(pid int64, commit bool) {
	byGroup := m.pending[pid]
	delete(m.pending, pid)
	if !commit {
		return
	}
	for g, parts := range byGroup {
		for p, e := range parts {
			if e.stale {
				continue
			}
			m.committed[g][p] = e.offset
			for _, other := range m.pending {
				if o, ok := other[g][p]; ok && o.seq < e.seq {
					o.stale = true
					other[g][p] = o
				}
			}
		}
	}
}

func (m *txnModel) hasPending(g string, p int32) bool {
	for _, byGroup := range m.pending {
		if _, ok := byGroup[g][p]; ok {
			return true
		}
	}
	return false
}

// appendFaults fails appends (writes past a file's start, half written, as a torn write)
// to offsets files and transaction index files, and removals of them: failures whose
// outcome is certain (a torn frame never checks; nothing is acknowledged).
type appendFaults struct {
	storage.FS
	fail func(op, path string) bool
}

func modelled(path string) bool {
	return strings.HasSuffix(path, ".log") || strings.HasSuffix(path, ".groups")
}

func (f *appendFaults) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil || !modelled(name) {
		return file, err
	}
	return appendFaultFile{File: file, fs: f, name: name}, nil
}

func (f *appendFaults) Remove(name string) error {
	if modelled(name) && f.fail("remove", name) {
		return errors.New("injected EIO")
	}
	return f.FS.Remove(name)
}

type appendFaultFile struct {
	storage.File
	fs   *appendFaults
	name string
}

func (f appendFaultFile) WriteAt(p []byte, off int64) (int, error) {
	if off > 0 && f.fs.fail("write", f.name) {
		n, _ := f.File.WriteAt(p[:len(p)/2], off)
		return n, errors.New("injected EIO")
	}
	return f.File.WriteAt(p, off)
}

// Two (and more) coordinators at adjacent epochs serve one __consumer_offsets partition's
// groups while TxnOffsetCommits, plain commits and markers go randomly to the newest or a
// deposed one, writes fail at random (before they reach the disk) and coordinators are
// closed or left running as deposed; after every few steps the newest coordinator's offsets
// (and require_stable's answers) must equal the model, and at the end a fresh coordinator's.
// A refused marker is resent, to the newest coordinator, until it answers NONE, as the
// transaction coordinator does. Replay a failure with -txnoffsets.seed=N.
func TestTransactionalOffsetsUnderInterleavings(t *testing.T) {
	seed := *txnSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-txnoffsets.seed=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed>>7))
	faults := rand.New(rand.NewPCG(seed, 1)) // its own stream: called from group goroutines
	var faultMu sync.Mutex
	var faultOn atomic.Bool
	fsys := &appendFaults{FS: storage.OSFS{}, fail: func(op, path string) bool {
		faultMu.Lock()
		defer faultMu.Unlock()
		if faultOn.Load() && faults.IntN(4) == 0 {
			t.Logf("fault: %s %s", op, path)
			return true
		}
		return false
	}}
	e := newEnv(t, func(c *Config) {
		c.OffsetsPartitions = 1
		c.FS = fsys
		c.Log = testr.NewWithOptions(t, testr.Options{Verbosity: 1})
	})
	groups := []string{"a", "b", "c"}
	pids := []int64{1, 2, 3}
	m := &txnModel{committed: map[string]map[int32]int64{}, pending: map[int64]map[string]map[int32]modelPending{}}
	for _, g := range groups {
		m.committed[g] = map[int32]int64{}
	}
	coords := []*Coordinator{e.c}
	epoch := int32(1)
	newest := func() *Coordinator { return coords[len(coords)-1] }
	pick := func() *Coordinator {
		if len(coords) > 1 && rng.IntN(3) == 0 {
			return coords[rng.IntN(len(coords)-1)]
		}
		return newest()
	}
	offsets := func(step int) map[int32]int64 {
		out := map[int32]int64{}
		for p := range int32(4) {
			if rng.IntN(2) == 0 {
				out[p] = int64(step)
			}
		}
		if len(out) == 0 {
			out[rng.Int32N(4)] = int64(step)
		}
		return out
	}
	// next starts a coordinator at the next epoch, as the operator bumps the epoch when a
	// broker restarts: a group whose first snapshot write failed at an epoch is served again
	// only at the next one (the own file cannot be created twice).
	//
	// The new coordinator takes every group over at once (each loaded by a request, without
	// faults), so no takeover runs beside the next step: a write the deposed coordinator
	// makes is then refused and never read, and the model knows every outcome. The
	// partition's transaction index is still taken over lazily, by its first call.
	next := func(closeOld bool) {
		epoch++
		if closeOld {
			_ = newest().Close() // gone; its claims stay on the volume
		}
		on := faultOn.Swap(false)
		coords = append(coords, e.start(epoch))
		for _, g := range groups {
			e.fetch(newest(), g, 0)
		}
		faultOn.Store(on)
	}
	resolve := func(pid int64, commit bool) {
		for try := 0; ; try++ {
			code := e.marker(newest(), "a", pid, 0, commit)
			t.Logf("resend marker pid %d: %s", pid, codeName(code))
			if code == 0 {
				m.complete(pid, commit)
				return
			} else if try > 50 {
				t.Fatalf("marker of producer %d never completed: %s", pid, codeName(code))
			}
			if try%10 == 9 {
				faultOn.Store(false) // the disk recovers eventually
				next(false)
			}
		}
	}
	check := func(step int) {
		t.Helper()
		for _, g := range groups {
			got, code := e.fetch(newest(), g, 0, 1, 2, 3)
			for try := 0; code != 0 && try < 3; try++ {
				next(false)
				got, code = e.fetch(newest(), g, 0, 1, 2, 3)
			}
			if code != 0 {
				t.Fatalf("step %d: fetch %s: %s", step, g, codeName(code))
			}
			c := newest()
			for p := range int32(4) {
				want, ok := m.committed[g][p]
				if have, hok := got[p]; ok != hok || have != want {
					t.Fatalf("step %d: group %s t/%d = %d (%v), model %d (%v)", step, g, p, have, hok, want, ok)
				}
			}
			_, codes := e.stableFetch(c, g, 0, 1, 2, 3)
			for p := range int32(4) {
				if unstable := codes[p] == kerr.UnstableOffsetCommit.Code; unstable != m.hasPending(g, p) {
					t.Fatalf("step %d: group %s t/%d require_stable %s, model pending %v", step, g, p, codeName(codes[p]), m.hasPending(g, p))
				}
			}
		}
	}
	const steps = 150
	for step := 1; step <= steps; step++ {
		faultOn.Store(rng.IntN(6) == 0)
		g := groups[rng.IntN(len(groups))]
		switch r := rng.IntN(100); {
		case r < 35:
			pid := pids[rng.IntN(len(pids))]
			offs := offsets(step)
			codes := e.txnCommitReq(pick(), txnReq(g, pid, 0, -1, "", offs))
			code := oneCode(t, codes)
			if code == 0 {
				m.txn(g, pid, offs)
			}
			t.Logf("step %d: txn %s pid %d %v: %s", step, g, pid, offs, codeName(code))
		case r < 60:
			offs := offsets(step)
			codes := e.commit(pick(), g, "", -1, offs)
			code := oneCode(t, codes)
			if code == 0 {
				m.plain(g, offs)
			}
			t.Logf("step %d: commit %s %v: %s", step, g, offs, codeName(code))
		case r < 85:
			pid := pids[rng.IntN(len(pids))]
			commit := rng.IntN(3) != 0
			code := e.marker(pick(), "a", pid, 0, commit)
			t.Logf("step %d: marker pid %d commit %v: %s", step, pid, commit, codeName(code))
			if code == 0 {
				m.complete(pid, commit)
			} else {
				faultOn.Store(false)
				resolve(pid, commit)
			}
		case r < 93:
			next(rng.IntN(2) == 0)
			t.Logf("step %d: coordinator at epoch %d", step, epoch)
		default:
			faultOn.Store(false)
			check(step)
		}
	}
	faultOn.Store(false)
	check(steps)
	for _, pid := range pids {
		resolve(pid, rng.IntN(2) == 0)
	}
	check(steps)
	next(true)
	check(steps) // a fresh coordinator loads exactly the model
	if len(m.pending) != 0 {
		t.Fatalf("model still pending: %v", m.pending)
	}
}
