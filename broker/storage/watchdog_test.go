package storage

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// hangingFS blocks chosen calls until release is closed, as a hard-mounted network file
// system blocks them while its server is unreachable.
func hangingFS(hang func(op Op, path string) bool, armed *atomic.Bool, release <-chan struct{}) FS {
	return FaultFS{FS: OSFS{}, Fault: func(op Op, path string) error {
		if armed.Load() && hang(op, path) {
			<-release
		}
		return nil
	}}
}

// TestHungIOFailsThePartitionWithinTheBound: an fsync, a fence check or a listing that never
// returns counts as a failure once the bound passes — the append waiting on it, or the
// takeover making it, fails with ErrIOTimeout (a storage error: KAFKA_STORAGE_ERROR) and the
// partition stops — instead of hanging the partition forever. The clock is synctest's.
func TestHungIOFailsThePartitionWithinTheBound(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hang    func(op Op, path string) bool
		acks    Acks
		timeout time.Duration
	}{
		{"an fsync", func(op Op, p string) bool { return op == OpSync && strings.HasSuffix(p, segmentSuffix) }, AcksAll, 0},
		{"a fence check", func(op Op, p string) bool { return op == OpOpen && strings.HasSuffix(p, noticeSuffix) }, AcksLeader, 0},
		{"an fsync, with a bound of 2s", func(op Op, p string) bool { return op == OpSync && strings.HasSuffix(p, segmentSuffix) }, AcksAll, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var armed atomic.Bool
				release := make(chan struct{})
				defer close(release)
				l := openLog(t, partitionDir(t), 1, testConfig(), Options{FS: hangingFS(tc.hang, &armed, release), IOTimeout: tc.timeout})
				armed.Store(true)
				start := time.Now()
				_, err := l.Append(context.Background(), makeBatch(plain(1, 1)), tc.acks)
				took := time.Since(start)
				if !errors.Is(err, ErrIOTimeout) || !errors.Is(err, ErrStorage) {
					t.Fatalf("append over a hung %s: %v, want a storage error wrapping ErrIOTimeout", tc.name, err)
				}
				want := tc.timeout
				if want == 0 {
					want = DefaultIOTimeout
				}
				t.Logf("failed after %v (bound %v)", took, want)
				if took < want {
					t.Fatalf("failed after %v, before the bound %v", took, want)
				}
				select {
				case <-l.Done():
				default:
					t.Fatal("the partition still serves after a hung call")
				}
				if !errors.Is(l.Err(), ErrIOTimeout) {
					t.Fatalf("the log stopped with %v", l.Err())
				}
			})
		})
	}
}

func TestAHungListingFailsTheTakeoverWithinTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		armed.Store(true)
		release := make(chan struct{})
		defer close(release)
		fsys := hangingFS(func(op Op, _ string) bool { return op == OpReadDir }, &armed, release)
		l, _ := Open(partitionDir(t), testConfig(), Options{FS: fsys})
		start := time.Now()
		err := l.Takeover(context.Background(), 1)
		if !errors.Is(err, ErrIOTimeout) || !errors.Is(err, ErrStorage) {
			t.Fatalf("a takeover whose listing hangs: %v, want a storage error wrapping ErrIOTimeout", err)
		}
		t.Logf("the takeover failed after %v", time.Since(start))
		if _, err := l.Append(context.Background(), makeBatch(plain(1, 1)), AcksAll); err == nil {
			t.Fatal("a takeover that failed serves")
		}
	})
}
