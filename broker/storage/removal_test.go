package storage

import (
	"context"
	"os"
	"testing"
)

// TestALaggingLeaderNeverRecreatesADeletedTopic: a broker that was given a partition before
// its topic was deleted starts its takeover only after the topic's data was removed. It must
// be refused — not re-create the directory, claim a fresh fence and acknowledge writes into a
// topic that no longer exists, which nobody would ever remove again.
func TestALaggingLeaderNeverRecreatesADeletedTopic(t *testing.T) {
	data := t.TempDir()
	id := [16]byte{7}
	dir := PartitionDir(data, "c1", "gone", id, 0)
	l1 := openLog(t, dir, 1, testConfig(), Options{})
	mustAppend(t, l1, makeBatch(plain(2, 1)), AcksAll)
	relinquish(t, l1)
	if err := RemoveTopicData(OSFS{}, data, "c1", "gone", id, 2); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) { // partition 1 never had data; 2 is past the count the removal knew
		lagging, _ := Open(PartitionDir(data, "c1", "gone", id, p), testConfig(), Options{})
		err := lagging.Takeover(context.Background(), 2)
		if p < 2 && !isErr(err, ErrFenced) {
			t.Fatalf("partition %d: a takeover after the topic was removed: %v, want ErrFenced", p, err)
		}
		if err == nil {
			_ = lagging.Relinquish(context.Background())
			continue
		}
		if _, err := lagging.Append(context.Background(), makeBatch(plain(1, 2)), AcksAll); err == nil {
			t.Fatalf("partition %d: an append into the deleted topic was acknowledged", p)
		}
	}
	for p := range int32(2) {
		names, _ := os.ReadDir(PartitionDir(data, "c1", "gone", id, p))
		for _, n := range names {
			if n.Name() != fenceDirName {
				t.Errorf("partition %d of the deleted topic holds %s", p, n.Name())
			}
		}
	}
}

// TestRemovingATopicFencesOutAStragglingLeaderAndCanBeRepeated: a leader still serving when
// its topic's data is removed acknowledges nothing more, and a second removal (another
// broker, or a retry after a crash) is success.
func TestRemovingATopicFencesOutAStragglingLeaderAndCanBeRepeated(t *testing.T) {
	data := t.TempDir()
	id := [16]byte{8}
	l := openLog(t, PartitionDir(data, "c1", "t", id, 0), 3, testConfig(), Options{})
	mustAppend(t, l, makeBatch(plain(2, 1)), AcksAll)
	for range 2 {
		if err := RemoveTopicData(OSFS{}, data, "c1", "t", id, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(context.Background(), makeBatch(plain(1, 2)), AcksAll); !isErr(err, ErrFenced) {
		t.Fatalf("the straggler's append after the removal: %v, want it refused", err)
	}
	if err := RemoveTopicData(OSFS{}, data, "c1", "never-existed", [16]byte{9}, 0); err != nil {
		t.Fatalf("removing a topic that has no data: %v", err)
	}
}
