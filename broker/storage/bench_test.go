package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The benchmarks report MB/s and ratios against baselines measured in the same run, on the
// same disk (the test's temporary directory):
//
//   - plain: a Go loop writing the same 16 KiB batches to one file, fdatasync after each
//     (what a broker without group commit does for acks=all);
//   - disk: the same loop with 1 MiB writes — the disk's sequential write+fsync bandwidth;
//   - raw: as many goroutines as producers writing the batch to as many files as partitions,
//     each write followed by its own fdatasync (measured before each case): the ceiling for
//     one file per partition without cross-partition batching, which shows the log's own
//     overhead.
//
// Both use the log's own sync call (fdatasync on Linux), so the ratios compare strategies,
// not system calls. Run them with `make bench-storage` on a quiet machine.

const (
	benchRecordSize = 1 << 10
	benchRecords    = 16 // 16 × 1 KiB records ≈ a 16 KiB batch
)

var benchTemplate = makeBatch(batchSpec{records: benchRecords, valueSize: benchRecordSize, seed: 1, baseTs: testNow, tsStep: 1, pid: -1, pepoch: -1, seq: -1})

type baselines struct{ plain, disk float64 } // MB/s

var (
	baselineOnce sync.Once
	baseline     baselines
)

func measureBaselines(b *testing.B) baselines {
	baselineOnce.Do(func() {
		dir, err := os.MkdirTemp("", "storage-bench-baseline")
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = os.RemoveAll(dir) }()
		baseline.plain = syncLoopMBps(b, filepath.Join(dir, "plain"), len(benchTemplate))
		baseline.disk = syncLoopMBps(b, filepath.Join(dir, "disk"), 1<<20)
		fmt.Fprintf(os.Stderr, "baselines on this disk: write+fdatasync per %d-byte batch %.1f MB/s; per 1 MiB %.1f MB/s\n", len(benchTemplate), baseline.plain, baseline.disk)
	})
	return baseline
}

// syncLoopMBps writes chunks of size bytes to one file with an fsync after each, for about
// two seconds (or 256 MiB), and returns the throughput.
func syncLoopMBps(b *testing.B, path string, size int) float64 {
	f, err := OSFS{}.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, size)
	copy(buf, benchTemplate)
	start := time.Now()
	var written int64
	for time.Since(start) < 2*time.Second && written < 256<<20 {
		if _, err := f.WriteAt(buf, written); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		written += int64(size)
	}
	return float64(written) / 1e6 / time.Since(start).Seconds()
}

// rawParallelMBps is the raw baseline: writers goroutines, files files, write+fdatasync per
// batch, for about a second.
func rawParallelMBps(b *testing.B, dir string, files, writers int) float64 {
	fs := make([]File, files)
	offs := make([]int64, files)
	mus := make([]sync.Mutex, files)
	for i := range fs {
		f, err := OSFS{}.OpenFile(filepath.Join(dir, fmt.Sprintf("raw-%d", i)), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		fs[i] = f
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			for k := w; time.Since(start) < time.Second; k++ {
				i := k % files
				mus[i].Lock()
				_, err := fs[i].WriteAt(benchTemplate, offs[i])
				offs[i] += int64(len(benchTemplate))
				mus[i].Unlock()
				if err == nil {
					err = fs[i].Sync()
				}
				if err != nil {
					b.Error(err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) * float64(len(benchTemplate)) / 1e6 / time.Since(start).Seconds()
}

// benchAppend runs b.N appends of the 16 KiB batch from `producers` goroutines spread over
// `partitions` logs and reports MB/s against the baselines.
func benchAppend(b *testing.B, partitions, producers int, acks Acks) {
	base := measureBaselines(b)
	data := b.TempDir()
	raw := rawParallelMBps(b, data, partitions, producers)
	cache := NewFileCache(64)
	logs := make([]*Log, partitions)
	for i := range logs {
		logs[i] = openLog(b, PartitionDir(data, "bench", "t", [16]byte{9}, int32(i)), 1, testConfig(), Options{Cache: cache})
	}
	b.SetBytes(int64(len(benchTemplate)))
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for p := range producers {
		wg.Go(func() {
			for k := p; ; k++ {
				if next.Add(1) > int64(b.N) {
					return
				}
				batch := append([]byte(nil), benchTemplate...) // a fresh request buffer, as a produce handler has
				if _, err := logs[k%partitions].Append(context.Background(), batch, acks); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	mbps := float64(b.N) * float64(len(benchTemplate)) / 1e6 / elapsed.Seconds()
	b.ReportMetric(mbps/base.plain, "x_plain")
	b.ReportMetric(100*mbps/base.disk, "pct_disk")
	b.ReportMetric(mbps/raw, "x_raw_parallel")
	for _, l := range logs {
		relinquish(b, l)
	}
}

func BenchmarkAppendAcksAll(b *testing.B) {
	for _, partitions := range []int{1, 8, 64} {
		for _, producers := range []int{1, 4, 8, 16} {
			b.Run(fmt.Sprintf("partitions=%d/producers=%d", partitions, producers), func(b *testing.B) {
				benchAppend(b, partitions, producers, AcksAll)
			})
		}
	}
}

func BenchmarkAppendAcksLeader(b *testing.B) {
	for _, partitions := range []int{1, 8} {
		for _, producers := range []int{1, 16} {
			b.Run(fmt.Sprintf("partitions=%d/producers=%d", partitions, producers), func(b *testing.B) {
				benchAppend(b, partitions, producers, AcksLeader)
			})
		}
	}
}

// BenchmarkReadPageCache reads 1 MiB at a time, sequentially, from a 64 MiB log whose
// segments (16 MiB each, so most reads go through the closed-segment cache) are in the page
// cache, and compares it with plain ReadAt calls of the same sizes on one file.
func BenchmarkReadPageCache(b *testing.B) {
	dir := PartitionDir(b.TempDir(), "bench", "t", [16]byte{9}, 0)
	cfg := testConfig()
	cfg.SegmentBytes = 16 << 20
	l := openLog(b, dir, 1, cfg, Options{Cache: NewFileCache(8)})
	const total = 64 << 20
	var buf []byte
	for written := 0; written < total; written += len(benchTemplate) {
		batch := append([]byte(nil), benchTemplate...)
		if _, err := l.Append(context.Background(), batch, AcksNone); err != nil {
			b.Fatal(err)
		}
		buf = append(buf, batch...)
	}
	waitDurable(b, l)
	plainFile := filepath.Join(b.TempDir(), "plain")
	if err := os.WriteFile(plainFile, buf, 0o644); err != nil {
		b.Fatal(err)
	}
	f, _ := os.Open(plainFile)
	defer func() { _ = f.Close() }()
	const chunk = 1 << 20
	plainStart := time.Now()
	scratch := make([]byte, chunk)
	for i := 0; i < 2*total/chunk; i++ {
		_, _ = f.ReadAt(scratch, int64(i*chunk%total))
		_ = append([]byte(nil), scratch...) // the log returns a fresh copy; so does this
	}
	plainMBps := float64(2*total) / 1e6 / time.Since(plainStart).Seconds()

	off, _ := l.Offsets()
	b.SetBytes(chunk)
	b.ResetTimer()
	start := time.Now()
	var read int64
	o := int64(0)
	for range b.N {
		r, err := l.Read(o, chunk, true)
		if err != nil {
			b.Fatal(err)
		}
		read += int64(len(r.Records))
		if h := lastHeader(r.Records); h != nil {
			o = h.nextOffset()
		}
		if o >= off.HighWatermark {
			o = 0
		}
	}
	mbps := float64(read) / 1e6 / time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(mbps/plainMBps, "x_plain_readat")
}

func lastHeader(b []byte) *batchHeader {
	var h *batchHeader
	for len(b) >= batchHeaderSize {
		x := parseHeader(b)
		h = &x
		b = b[x.size():]
	}
	return h
}

// BenchmarkSyncLoop is the disk bound `make bench` compares a broker's produce throughput
// with: a plain Go loop writing batches to one file with an fdatasync after each (the log's
// own sync call), in 16 KiB batches (the benchmarks' batch) and 1 MiB batches (kgo's default
// batch size; the disk's sequential write+fsync bandwidth). MB/s is the loop's throughput.
func BenchmarkSyncLoop(b *testing.B) {
	for _, size := range []int{16 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("batch=%dKiB", size>>10), func(b *testing.B) {
			f, err := OSFS{}.OpenFile(filepath.Join(b.TempDir(), "loop"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = f.Close() }()
			buf := make([]byte, size)
			copy(buf, benchTemplate)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := range b.N {
				if _, err := f.WriteAt(buf, int64(i)*int64(size)); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWatchdog measures what bounding every file-system call costs (Options.IOTimeout:
// each call runs on a goroutine of its own with a timer): acks=1 appends and 16 KiB reads of
// one partition from the page cache, with the bound on (the default) and off.
func BenchmarkWatchdog(b *testing.B) {
	for _, bound := range []struct {
		name    string
		timeout time.Duration
	}{{"on", 0}, {"off", -1}} {
		b.Run("append/watchdog="+bound.name, func(b *testing.B) {
			l := openLog(b, PartitionDir(b.TempDir(), "bench", "t", [16]byte{9}, 0), 1, testConfig(), Options{IOTimeout: bound.timeout})
			b.SetBytes(int64(len(benchTemplate)))
			for b.Loop() {
				if _, err := l.Append(context.Background(), append([]byte(nil), benchTemplate...), AcksLeader); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("read/watchdog="+bound.name, func(b *testing.B) {
			l := openLog(b, PartitionDir(b.TempDir(), "bench", "t", [16]byte{9}, 0), 1, testConfig(), Options{IOTimeout: bound.timeout})
			for range 64 {
				mustAppend(b, l, append([]byte(nil), benchTemplate...), AcksNone)
			}
			waitDurable(b, l)
			b.SetBytes(int64(len(benchTemplate)))
			i := 0
			for b.Loop() {
				if _, err := l.Read(int64(i%64), len(benchTemplate), true); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
