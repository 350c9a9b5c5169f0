package storage

import (
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// The seeded storage simulations (docs/storage.md, "Tests and measurements"). Each iteration
// runs a scenario in a synctest bubble (a fake clock) under a scheduler that lets one
// file-system call or actor step go at a time, chosen by a random generator seeded per
// iteration: the seed decides the scenario (epochs, producers, faults, when each takeover
// starts) and every choice of the scheduler. A failing iteration prints its seed; the same
// seed replays it:
//
//	go test ./broker/storage -run 'TestTwoRacingTakeoversAndADeposedWriter' -storage.seed=N
var (
	flagSeed       = flag.Uint64("storage.seed", 0, "replay one iteration of the seeded storage simulations with this seed")
	flagIterations = flag.Int("storage.iterations", 0, "iterations of each seeded storage simulation (0: the default for go test)")
	flagSoak       = flag.Duration("storage.soak", 0, "run the seeded storage simulations for this long (TestSoakStorage) and print what they survived")
)

// simStats is what one iteration survived.
type simStats struct {
	grants, acked, served int
	faults                []string
	trace                 uint64 // a hash of the schedule
	keys                  []string
}

// simRun is one simulation family: a name (for the replay line) and one iteration.
type simRun struct {
	test     string
	backend  string
	scenario func(t *testing.T, seed uint64, b *simBackend) simStats
}

// runSeeded runs iterations of r, each with a fresh seed (or the -storage.seed one), and
// reports what they survived.
func runSeeded(t *testing.T, r simRun, iterations int) []simStats {
	t.Helper()
	if *flagIterations > 0 {
		iterations = *flagIterations
	}
	seeds := make([]uint64, iterations)
	for i := range seeds {
		seeds[i] = rand.Uint64()
	}
	if *flagSeed != 0 {
		seeds = []uint64{*flagSeed}
	}
	var all []simStats
	for _, seed := range seeds {
		var st simStats
		ok := t.Run(fmt.Sprintf("%s/seed=%d", r.backend, seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st = r.scenario(t, seed, newSimBackend(t, r.backend, seed))
			})
		})
		if !ok {
			t.Fatalf("replay with: go test ./broker/storage -run '^%s$' -storage.seed=%d", r.test, seed)
		}
		all = append(all, st)
	}
	var grants, acked, served, faults int
	for _, st := range all {
		grants, acked, served, faults = grants+st.grants, acked+st.acked, served+st.served, faults+len(st.faults)
	}
	t.Logf("%s on %s: %d iterations, %d scheduled steps, %d acknowledged and %d served batches checked, %d faults survived", r.test, r.backend, len(all), grants, acked, served, faults)
	return all
}

// simBackend is where a scenario's partition lives: the local disk, or an NFSSim whose every
// node is its own client.
type simBackend struct {
	name string
	dir  string
	nfs  *NFSSim
}

func newSimBackend(t *testing.T, name string, seed uint64) *simBackend {
	b := &simBackend{name: name}
	switch name {
	case "local":
		b.dir = partitionDir(t)
	case "nfs":
		rng := rand.New(rand.NewPCG(seed, 0x626b))
		b.nfs = NewNFSSim(NFSSimOptions{Staleness: time.Duration(1+rng.IntN(50)) * time.Millisecond, Writeback: rng.Float64() / 2, Seed: seed})
		b.dir = "/data/cluster/topics/orders-AQID/0"
	default:
		t.Fatalf("unknown backend %q", name)
	}
	return b
}

// node is one broker's view of the volume: an NFS client of its own, or the local disk. kill
// makes every later call fail, as the node dying does (on the local disk what it wrote stays,
// as a killed process's page cache does; on NFS its unflushed writes are gone).
func (b *simBackend) node() (FS, func()) {
	if b.nfs != nil {
		c := b.nfs.Client()
		return c, c.Crash
	}
	var dead atomic.Bool
	return FaultFS{FS: OSFS{}, Fault: func(Op, string) error {
		if dead.Load() {
			return syscall.EIO
		}
		return nil
	}}, func() { dead.Store(true) }
}

// simScheduler lets one waiting step go at a time, chosen by its generator, once every other
// goroutine of the bubble is blocked: so a seed fixes the order of every file-system call and
// actor step (calls made while a mutex is held — segment writes, closes — run at once, as
// part of the step that makes them).
type simScheduler struct {
	rng     *rand.Rand
	mu      sync.Mutex
	waiting []*simTurn // guarded by mu
	grants  int
	trace   uint64   // a hash of the granted steps, for comparing replays
	record  bool     // keep keys (TestASeedReplaysTheSameSchedule)
	keys    []string // every granted step and what else waited, when record
	live    atomic.Int32
	on      atomic.Bool // while false (a scenario's setup and checks) steps go at once
}

type simTurn struct {
	key string
	ch  chan struct{}
}

func newSimScheduler(seed uint64) *simScheduler {
	return &simScheduler{rng: rand.New(rand.NewPCG(seed, 0x7363686564))}
}

// step waits for the scheduler's permission to go on.
func (s *simScheduler) step(key string) {
	if !s.on.Load() {
		return
	}
	t := &simTurn{key: key, ch: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, t)
	s.mu.Unlock()
	<-t.ch
}

// actor runs f as a scheduled actor: the scheduler runs until every actor has returned.
func (s *simScheduler) actor(wg *sync.WaitGroup, f func()) {
	s.live.Add(1)
	wg.Go(func() {
		defer s.live.Add(-1)
		f()
	})
}

// run grants steps until every actor has returned and nothing waits. Sometimes it lets time
// pass first (caches go stale, timers fire).
func (s *simScheduler) run() {
	h := fnv.New64a()
	for {
		synctest.Wait()
		s.mu.Lock()
		if len(s.waiting) == 0 {
			s.mu.Unlock()
			if s.live.Load() == 0 {
				s.trace = h.Sum64()
				return
			}
			time.Sleep(time.Millisecond) // everyone is waiting on time or on each other's timers
			continue
		}
		slices.SortStableFunc(s.waiting, func(a, b *simTurn) int { return strings.Compare(a.key, b.key) })
		i := s.rng.IntN(len(s.waiting))
		t := s.waiting[i]
		s.waiting = slices.Delete(s.waiting, i, i+1)
		s.grants++
		pause := s.rng.IntN(6) == 0
		d := time.Duration(s.rng.IntN(4000)) * time.Microsecond
		s.mu.Unlock()
		_, _ = h.Write([]byte(t.key))
		if s.record {
			var set []string
			for _, w := range s.waiting {
				set = append(set, w.key)
			}
			s.keys = append(s.keys, fmt.Sprintf("%s [also waiting: %s]", t.key, strings.Join(set, ", ")))
		}
		if pause {
			time.Sleep(d)
		}
		close(t.ch)
	}
}

// options are a scheduled log's options on node, as actor. The watchdog is off: it would run
// every call on a goroutine of its own, hiding the call site from the scheduler
// (watchdog_test.go tests it).
func (s *simScheduler) options(node FS, actor string) Options {
	return Options{FS: schedFS{FS: node, s: s, actor: actor}, IOTimeout: -1, step: func(what string) { s.step(actor + " " + what) }}
}

// schedFS makes every call of inner that runs outside the log's locks a scheduled step.
type schedFS struct {
	FS
	s     *simScheduler
	actor string
}

// key names a call for the scheduler's order: the actor, the operation, the file (random ids
// in names left out) and the call site — so two goroutines of one log that wait on the same
// file (the flusher's fence check and an acks=1 check) are told apart by what they are, not by
// which arrived first, and a seed orders the same calls the same way.
func (f schedFS) key(op Op, path string) string {
	return f.actor + " " + string(op) + " " + randomID.ReplaceAllString(filepath.Base(path), "<id>") + " @" + callSite()
}

// callSite names the package's functions on the caller's stack (a short hash of their names:
// not lines, and not the tests' own frames, so a seed keeps its schedule across edits that do
// not change which functions call which).
func callSite() string {
	var pcs [24]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	h := fnv.New32a()
	for {
		fr, more := frames.Next()
		if strings.Contains(fr.Function, "/broker/storage.") && !strings.HasSuffix(fr.File, "_test.go") {
			fmt.Fprintf(h, "%s;", fr.Function)
		}
		if !more {
			break
		}
	}
	return fmt.Sprintf("%08x", h.Sum32())
}

var randomID = regexp.MustCompile(`[0-9a-f]{16,}`)

func (f schedFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f.s.step(f.key(OpOpen, name))
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return schedFile{File: file, fs: f, name: name}, nil
}

func (f schedFS) ReadDirNames(dir string) ([]string, error) {
	f.s.step(f.key(OpReadDir, dir))
	return f.FS.ReadDirNames(dir)
}

func (f schedFS) MkdirAll(dir string) error {
	f.s.step(f.key(OpMkdir, dir))
	return f.FS.MkdirAll(dir)
}

func (f schedFS) Rename(oldpath, newpath string) error {
	f.s.step(f.key(OpRename, newpath))
	return f.FS.Rename(oldpath, newpath)
}

func (f schedFS) Link(oldpath, newpath string) error {
	f.s.step(f.key(OpLink, newpath))
	return f.FS.Link(oldpath, newpath)
}

func (f schedFS) Remove(name string) error {
	f.s.step(f.key(OpRemove, name))
	return f.FS.Remove(name)
}

func (f schedFS) SyncDir(dir string) error {
	f.s.step(f.key(OpSyncDir, dir))
	return f.FS.SyncDir(dir)
}

// schedFile schedules reads and fsyncs; writes, sizes and closes happen under the log's
// mutexes (a segment write under the log's, a close under the file cache's) and run at once.
type schedFile struct {
	File
	fs   schedFS
	name string
}

func (f schedFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.s.step(f.fs.key(OpRead, f.name))
	return f.File.ReadAt(p, off)
}

func (f schedFile) Sync() error {
	f.fs.s.step(f.fs.key(OpSync, f.name))
	return f.File.Sync()
}

// injectAt fails the n-th scheduled call of a node with EIO (n < 0: none), counting it.
func injectAt(n int, fired *atomic.Bool) func(Op, string) error {
	var calls atomic.Int64
	return func(Op, string) error {
		if n >= 0 && calls.Add(1) == int64(n) {
			fired.Store(true)
			return syscall.EIO
		}
		return nil
	}
}
