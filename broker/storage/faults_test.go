package storage

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// TestFaultsSwitchedAtRunTimeHitOnlyTheChosenPartition: a plan set while two partitions serve
// fails the chosen one's files with EIO and leaves the other alone; once cleared, the failed
// partition is taken over again and serves, everything it acknowledged intact.
func TestFaultsSwitchedAtRunTimeHitOnlyTheChosenPartition(t *testing.T) {
	data := t.TempDir()
	faults := NewFaults()
	fsys := faults.FS(OSFS{})
	d0, d1 := PartitionDir(data, "c", "t", [16]byte{1}, 0), PartitionDir(data, "c", "t", [16]byte{1}, 1)
	l0 := openLog(t, d0, 1, testConfig(), Options{FS: fsys})
	l1 := openLog(t, d1, 1, testConfig(), Options{FS: fsys})
	kept := mustAppend(t, l0, makeBatch(plain(2, 1)), AcksAll)
	rules, err := ParseFaultRules("eio:write+sync@" + d0 + "/")
	if err != nil {
		t.Fatal(err)
	}
	faults.Set(rules...)
	if _, err := l0.Append(context.Background(), makeBatch(plain(1, 2)), AcksAll); !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrStorage) {
		t.Fatalf("append to the faulted partition: %v, want a storage error caused by EIO", err)
	}
	mustAppend(t, l1, makeBatch(plain(1, 3)), AcksAll)
	if faults.Hits() == 0 {
		t.Fatal("the plan injected nothing")
	}
	faults.Clear()
	again := openLog(t, d0, 2, testConfig(), Options{FS: fsys})
	if r, err := again.Read(kept.BaseOffset, 1<<20, true); err != nil || len(headersOf(t, r.Records)) != 1 {
		t.Fatalf("after the plan was cleared the partition serves %v, %v", r, err)
	}
	mustAppend(t, again, makeBatch(plain(1, 4)), AcksAll)
}

// TestAHangInThePlanIsReleasedWhenThePlanChanges: a call the plan holds waits until the plan
// changes (here, bounded first by the log's IOTimeout), then goes on under the new plan.
func TestAHangInThePlanIsReleasedWhenThePlanChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		faults := NewFaults()
		l := openLog(t, partitionDir(t), 1, testConfig(), Options{FS: faults.FS(OSFS{}), IOTimeout: time.Minute})
		faults.Set(FaultRule{Ops: []Op{OpSync}, PathContains: segmentSuffix, Hang: true})
		done := make(chan error, 1)
		go func() {
			_, err := l.Append(context.Background(), makeBatch(plain(1, 1)), AcksAll)
			done <- err
		}()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("the held fsync returned (%v) before the plan changed", err)
		default:
		}
		faults.Clear()
		if err := <-done; err != nil {
			t.Fatalf("after the plan changed: %v", err)
		}
	})
}

func TestParseFaultRulesRefusesWhatItCannotInject(t *testing.T) {
	for _, bad := range []string{"eio", "boom@x", "eio:flush@x"} {
		if _, err := ParseFaultRules(bad); err == nil {
			t.Errorf("ParseFaultRules(%q) accepted it", bad)
		}
	}
	rules, err := ParseFaultRules("eio@a/, hang:sync+syncdir@b, enospc:write@")
	if err != nil || len(rules) != 3 || rules[1].String() != "hang:sync+syncdir@b" || rules[2].Err != syscall.ENOSPC {
		t.Fatalf("ParseFaultRules = %v, %v", rules, err)
	}
}
