package groups

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/broker/storage"
)

// fsyncBaseline is the cost of the least any durable commit must do on this disk: append a
// small frame to a file and fdatasync it. Commit benchmarks report their cost as a multiple of
// it, measured in the same run, so the ratio means something on a noisy machine.
func fsyncBaseline(b *testing.B, dir string, n int) time.Duration {
	b.Helper()
	f, err := storage.OSFS{}.OpenFile(filepath.Join(dir, "baseline"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	fr := frame(commitPayload("", []offsetEntry{{tp: tp{"big", 1}, committed: committed{offset: 1}}}))
	start := time.Now()
	for i := range n {
		if _, err := f.WriteAt(fr, int64(i*len(fr))); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / time.Duration(n)
}

func benchCoordinator(b *testing.B) (*Coordinator, string) {
	b.Helper()
	cfg := DefaultConfig()
	cfg.Dir, cfg.Topics = b.TempDir(), newTestTopics()
	c, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	c.SetView(1, allGroups)
	return c, cfg.Dir
}

// BenchmarkOffsetCommit: one group committing one partition at a time (validate, append,
// fsync, fence check, apply). The x-fsync metric is the cost over a bare append+fdatasync.
func BenchmarkOffsetCommit(b *testing.B) {
	c, dir := benchCoordinator(b)
	ctx := context.Background()
	if ok, err := simpleCommit(ctx, c, "g", 0, 0); !ok || err != nil {
		b.Fatal(ok, err)
	}
	base := fsyncBaseline(b, dir, 200)
	b.ResetTimer()
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		if ok, err := simpleCommit(ctx, c, "g", int32(i%64), int64(i)); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(per)/float64(base), "x-fsync")
}

// BenchmarkOffsetCommitManyGroups: commits to many groups at once; each group's goroutine
// fsyncs its own file, so groups do not wait for each other.
func BenchmarkOffsetCommitManyGroups(b *testing.B) {
	c, dir := benchCoordinator(b)
	ctx := context.Background()
	base := fsyncBaseline(b, dir, 200)
	var next atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		g := "g" + strconv.FormatInt(next.Add(1), 10)
		for i := 0; pb.Next(); i++ {
			if ok, err := simpleCommit(ctx, c, g, int32(i%64), int64(i)); !ok || err != nil {
				b.Error(ok, err)
				return
			}
		}
	})
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(per)/float64(base), "x-fsync")
}
