package groups

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/broker/storage"
)

// noSyncFS is the real file system without fsync: the load benchmark writes a month of
// commits to build its file, and what it measures (reading the file back) does not depend on
// whether those writes were durable.
type noSyncFS struct{ storage.OSFS }

type noSyncFile struct{ storage.File }

func (noSyncFS) SyncDir(string) error { return nil }

func (n noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	f, err := n.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

func (noSyncFile) Sync() error { return nil }

// loadFixture is a group directory after a number of commits, built once per process.
type loadFixture struct {
	dir     string // the groups root
	epoch   int32  // the epoch of the file the commits went to
	commits int
	// compactions is how many times the store compacted the file while it was built.
	compactions int
	skip        string // why the fixture could not be built (the file grew past what we load here)
}

var (
	loadFixturesMu sync.Mutex
	loadFixtures   = map[string]*loadFixture{}
	loadFixtureDir string
)

// maxFixtureFile bounds the offsets file the benchmark is willing to build: without
// compaction a month of commits of 1,000 partitions is about 16 GB, which no loader that
// reads the whole file could hold.
const maxFixtureFile = 2 << 30

// commitWorkload is the auto-commit of a group consuming `partitions` partitions of ten
// topics: the same partitions every time, offsets moving on, five seconds apart.
type commitWorkload struct {
	entries []offsetEntry
	start   time.Time
}

func newCommitWorkload(partitions int) *commitWorkload {
	w := &commitWorkload{entries: make([]offsetEntry, partitions), start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for p := range partitions {
		w.entries[p] = offsetEntry{tp: tp{fmt.Sprintf("topic-%02d", p%10), int32(p / 10)},
			committed: committed{topicID: [16]byte{byte(p % 10), 1}, leaderEpoch: 7}}
	}
	return w
}

// commit returns commit number i's entries (valid until the next call).
func (w *commitWorkload) commit(i int) []offsetEntry {
	ms := w.start.Add(time.Duration(i) * 5 * time.Second).UnixMilli()
	for p := range w.entries {
		w.entries[p].offset, w.entries[p].commitMs = int64(i)*500+int64(p), ms
	}
	return w.entries
}

// fixture builds (once) a group that committed every one of `partitions` partitions every
// five seconds for `days` days, through the store's own append path at one coordinator epoch.
func fixture(b *testing.B, partitions int, days float64) *loadFixture {
	b.Helper()
	key := fmt.Sprintf("%d partitions, %g h of commits", partitions, days*24)
	loadFixturesMu.Lock()
	defer loadFixturesMu.Unlock()
	if f, ok := loadFixtures[key]; ok {
		return f
	}
	if loadFixtureDir == "" {
		// In memory where there is a tmpfs: a month of commits is ~19 GB of writes, which the
		// page cache would otherwise write back to a shared disk for minutes.
		base := ""
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			base = "/dev/shm"
		}
		d, err := os.MkdirTemp(base, "groups-bench-")
		if err != nil {
			b.Fatal(err)
		}
		loadFixtureDir = d
	}
	f := &loadFixture{dir: filepath.Join(loadFixtureDir, fmt.Sprintf("p%d-d%g", partitions, days)), epoch: 1,
		commits: int(days * 24 * 3600 / 5)}
	loadFixtures[key] = f
	s, err := openStore(noSyncFS{}, f.dir, "bench", true)
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	if err := s.claim(f.epoch); err != nil {
		b.Fatal(err)
	}
	w := newCommitWorkload(partitions)
	st, err := s.load(f.epoch, -1, w.start.UnixMilli())
	if err != nil {
		b.Fatal(err)
	}
	built := time.Now()
	for i := range f.commits {
		entries := w.commit(i)
		if err := s.append(commitPayload("consumer", entries)); err != nil {
			b.Fatal(err)
		}
		for _, e := range entries {
			st.offsets[e.tp] = e.committed
		}
		// The group's own policy (group.maybeCompact), on the state it acknowledged.
		if s.needsCompaction() {
			if err := s.compact(st); err != nil {
				b.Fatal(err)
			}
			f.compactions++
		}
		if s.end > maxFixtureFile {
			f.skip = fmt.Sprintf("the offsets file reached %d MB after %d of %d commits (%.1f KB each): too large to load here",
				s.end>>20, i+1, f.commits, float64(s.end)/float64(i+1)/1024)
			break
		}
	}
	b.Logf("fixture %s: %d commits written in %v, %d compactions, file %d bytes", key, f.commits, time.Since(built).Round(time.Millisecond), f.compactions, s.end)
	return f
}

// BenchmarkGroupLoad measures what a new coordinator pays to read a group's state: a group of
// 1,000 partitions whose consumer auto-committed every five seconds for an hour, a day and a
// month at one coordinator epoch. Each iteration opens the group's newest offsets file and
// reads it to the state (the takeover's read step). Reported:
//   - load-ms: the time of one read;
//   - peak-heap-MB: heap in use gained during the read, measured with the collector paused
//     (so every byte the read allocated is still counted: an upper bound of the peak);
//   - state-MB: heap the loaded state keeps once collected;
//   - peak/state: the two's ratio (the aim is ≤ 2);
//   - file-MB: the size of the file read.
func BenchmarkGroupLoad(b *testing.B) {
	for _, age := range []struct {
		name string
		days float64
	}{{"1h", 1.0 / 24}, {"1d", 1}, {"30d", 30}} {
		b.Run("partitions=1000/commits="+age.name, func(b *testing.B) {
			f := fixture(b, 1000, age.days)
			if f.skip != "" {
				b.Skip(f.skip)
			}
			s, err := openStore(storage.OSFS{}, f.dir, "bench", false)
			if err != nil {
				b.Fatal(err)
			}
			var took time.Duration
			var peak, kept, size float64
			for range b.N {
				b.StopTimer()
				runtime.GC()
				var before, after, held runtime.MemStats
				runtime.ReadMemStats(&before)
				gc := debug.SetGCPercent(-1)
				b.StartTimer()
				start := time.Now()
				pf, err := s.readFile(f.epoch)
				took += time.Since(start)
				b.StopTimer()
				runtime.ReadMemStats(&after)
				debug.SetGCPercent(gc)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&held)
				if len(pf.state.offsets) != 1000 {
					b.Fatalf("loaded %d offsets, want 1000", len(pf.state.offsets))
				}
				runtime.KeepAlive(pf)
				peak += float64(after.HeapInuse) - float64(before.HeapInuse)
				kept += float64(held.HeapAlloc) - float64(before.HeapAlloc)
				size = float64(pf.valid)
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(float64(took)/1e6/n, "load-ms")
			b.ReportMetric(peak/n/1e6, "peak-heap-MB")
			b.ReportMetric(kept/n/1e6, "state-MB")
			b.ReportMetric(peak/kept, "peak/state")
			b.ReportMetric(size/1e6, "file-MB")
		})
	}
}
