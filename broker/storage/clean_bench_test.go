package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fillCompacted writes mib MiB of keyed records (keys from a space of 10,000, 200-byte values,
// 10 records a batch, codec) into a compacted log and rolls, so everything is cleanable.
func fillCompacted(b *testing.B, dir string, mib int, codec int, opts Options) *Log {
	b.Helper()
	cfg := compactConfig()
	cfg.SegmentBytes = 8 << 20
	l := openLog(b, dir, 1, cfg, opts)
	value := []byte(strings.Repeat("v", 200))
	var written int
	for i := 0; written < mib<<20; i++ {
		recs := make([]kv, 10)
		for j := range recs {
			recs[j] = kv{[]byte(fmt.Sprint("key-", (i*10+j)*7919%10000)), value}
		}
		batch := keyedBatch(b, recs, -1, -1, -1, false, codec, testNow)
		written += len(batch)
		if _, err := l.Append(context.Background(), batch, AcksLeader); err != nil {
			b.Fatal(err)
		}
	}
	waitDurable(b, l)
	l.mu.Lock()
	l.rollWanted = true
	l.mu.Unlock()
	l.kickFlusher()
	mustAppend(b, l, keyedBatch(b, []kv{{[]byte("roll"), value}}, -1, -1, -1, false, 0, testNow), AcksAll)
	return l
}

// sequentialRead reads every closed segment file of l with 512 KiB reads: the baseline.
func sequentialRead(b *testing.B, l *Log) (int64, time.Duration) {
	b.Helper()
	l.mu.Lock()
	names := make([]string, 0, len(l.closed))
	for _, s := range l.closed {
		names = append(names, s.name())
	}
	l.mu.Unlock()
	buf := make([]byte, 512<<10)
	start := time.Now()
	var n int64
	for _, name := range names {
		f, err := os.Open(filepath.Join(l.dir, name))
		if err != nil {
			b.Fatal(err)
		}
		for {
			k, err := f.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		_ = f.Close()
	}
	return n, time.Since(start)
}

// BenchmarkCleaner: one full pass over 64 MiB of dirty log per iteration (a fresh log each
// time), in MB/s of dirty log, against a plain sequential read of the same segment files in
// the same run (x_seqread). The offset map is 16 MiB.
func BenchmarkCleaner(b *testing.B) {
	for _, tc := range []struct {
		name  string
		codec int
	}{{"uncompressed", 0}, {"zstd", 4}} {
		b.Run(tc.name, func(b *testing.B) {
			var cleanNs, readNs time.Duration
			var dirty, read int64
			for range b.N {
				b.StopTimer()
				cleaner := NewCleaner(CleanerConfig{DedupeBufferBytes: 16 << 20})
				l := fillCompacted(b, partitionDir(b), 64, tc.codec, Options{Cleaner: cleaner})
				st, _ := l.CompactionStats()
				n, d := sequentialRead(b, l)
				read, readNs = read+n, readNs+d
				b.StartTimer()
				start := time.Now()
				res, err := l.Clean(context.Background())
				cleanNs += time.Since(start)
				if err != nil || !res.Cleaned {
					b.Fatalf("clean: %+v, %v", res, err)
				}
				dirty += st.DirtyBytes
				b.StopTimer()
				relinquish(b, l)
				b.StartTimer()
			}
			cleanMBs := float64(dirty) / cleanNs.Seconds() / 1e6
			readMBs := float64(read) / readNs.Seconds() / 1e6
			b.ReportMetric(cleanMBs, "MB/s")
			b.ReportMetric(cleanMBs/readMBs, "x_seqread")
			b.ReportMetric(16, "map_MiB")
		})
	}
}

// BenchmarkProduceWhileCleaning: acks=all appends of 10-record keyed batches from 8
// producers to one compacted partition, while a goroutine cleans it continuously (unthrottled,
// then at 20 MB/s), against the same appends without cleaning in the same run (x_without).
func BenchmarkProduceWhileCleaning(b *testing.B) {
	run := func(b *testing.B, clean bool, rate float64) float64 {
		cleaner := NewCleaner(CleanerConfig{DedupeBufferBytes: 16 << 20, IOBytesPerSecond: rate})
		l := fillCompacted(b, partitionDir(b), 16, 0, Options{Cleaner: cleaner})
		defer relinquish(b, l)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		if clean {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					if _, err := l.Clean(ctx); err != nil && ctx.Err() == nil {
						b.Error(err)
						return
					}
					// The rolls below keep it dirty; a pass that found nothing waits a little.
					time.Sleep(time.Millisecond)
				}
			}()
		}
		value := []byte(strings.Repeat("w", 200))
		const producers = 8
		per := 300 * b.N // enough appends per producer to measure, at any -benchtime
		start := time.Now()
		var bytes int64
		var mu sync.Mutex
		var pw sync.WaitGroup
		for p := range producers {
			pw.Add(1)
			go func() {
				defer pw.Done()
				for i := range per {
					recs := make([]kv, 10)
					for j := range recs {
						recs[j] = kv{[]byte(fmt.Sprint("key-", (p*per+i)*10+j)), value}
					}
					batch := keyedBatch(b, recs, -1, -1, -1, false, 0, testNow)
					if _, err := l.Append(context.Background(), batch, AcksAll); err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					bytes += int64(len(batch))
					mu.Unlock()
				}
			}()
		}
		pw.Wait()
		took := time.Since(start)
		cancel()
		wg.Wait()
		return float64(bytes) / took.Seconds() / 1e6
	}
	for _, tc := range []struct {
		name string
		rate float64
	}{{"unthrottled", 0}, {"throttled-20MBps", 20e6}} {
		b.Run(tc.name, func(b *testing.B) {
			without := run(b, false, 0)
			with := run(b, true, tc.rate)
			b.ReportMetric(with, "MB/s")
			b.ReportMetric(with/without, "x_without")
		})
	}
}
