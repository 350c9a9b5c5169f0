package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// oneRecordBatch is a valid record batch v2 with one record, as a producer sends it.
func oneRecordBatch() []byte {
	var rec []byte
	rec = append(rec, 0)               // attributes
	rec = binary.AppendVarint(rec, 0)  // timestamp delta
	rec = binary.AppendVarint(rec, 0)  // offset delta
	rec = binary.AppendVarint(rec, -1) // null key
	rec = binary.AppendVarint(rec, 1)  // value length
	rec = append(rec, 'v')             // value
	rec = binary.AppendVarint(rec, 0)  // no headers
	recs := binary.AppendVarint(nil, int64(len(rec)))
	recs = append(recs, rec...)
	const header = 61
	b := make([]byte, header, header+len(recs))
	be := binary.BigEndian
	now := uint64(time.Now().UnixMilli())
	be.PutUint32(b[8:], uint32(header-12+len(recs))) // batch length
	be.PutUint32(b[12:], 0xffffffff)                 // partition leader epoch -1
	b[16] = 2                                        // magic
	be.PutUint64(b[27:], now)                        // first timestamp
	be.PutUint64(b[35:], now)                        // max timestamp
	be.PutUint64(b[43:], ^uint64(0))                 // producer id -1
	be.PutUint16(b[51:], 0xffff)                     // producer epoch -1
	be.PutUint32(b[53:], 0xffffffff)                 // base sequence -1
	be.PutUint32(b[57:], 1)                          // record count
	b = append(b, recs...)
	be.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// partitionFiles lists a partition directory's names.
func partitionFiles(t *testing.T, pdir string) []string {
	t.Helper()
	ents, err := os.ReadDir(pdir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range ents {
		out = append(out, de.Name())
	}
	return out
}

// testRemover is a dataRemover on data without an Admin: reaching the finalizer would panic,
// so tests call removeData.
func testRemover(t *testing.T, data string, fsys storage.FS) *dataRemover {
	return &dataRemover{dataDir: data, fs: fsys, log: testr.New(t)}
}

func TestRemovalFencesOutAStragglingLeaderAndALaggingOne(t *testing.T) {
	ctx := testkit.Context(t)
	data := t.TempDir()
	id := [16]byte{7, 7, 7}
	topic := cluster.DeletingTopic{Object: "orders", Name: "orders", ID: id, Partitions: 2, AwaitsDataRemoval: true}
	pdir := storage.PartitionDir(data, testClusterID, "orders", id, 0)
	log, err := storage.Open(pdir, storage.DefaultConfig(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := log.Takeover(ctx, 3); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = log.Relinquish(context.Background()) }() // the test ends; it may be fenced already
	if _, err := log.Append(ctx, oneRecordBatch(), storage.AcksAll); err != nil {
		t.Fatalf("append before the removal: %v", err)
	}

	d := testRemover(t, data, storage.OSFS{})
	if err := d.removeData(testClusterID, topic); err != nil {
		t.Fatalf("remove: %v", err)
	}
	// The straggling leader (it never learned the topic was deleted) acknowledges nothing
	// after the removal.
	var fenced *storage.FencedError
	if _, err := log.Append(ctx, oneRecordBatch(), storage.AcksAll); !errors.As(err, &fenced) {
		t.Fatalf("append after the removal: %v, want a *storage.FencedError (nothing acknowledged)", err)
	}
	// Only the fence is left, and a leader whose view lags the whole deletion is refused
	// when it starts its takeover: it never re-creates the topic's data.
	for p := range int32(2) {
		pd := storage.PartitionDir(data, testClusterID, "orders", id, p)
		if got := partitionFiles(t, pd); len(got) != 1 || got[0] != "fence" {
			t.Fatalf("partition %d after the removal holds %v, want only its fence", p, got)
		}
		lagging, err := storage.Open(pd, storage.DefaultConfig(), storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := lagging.Takeover(ctx, 4); !errors.As(err, &fenced) || fenced.Fence != storage.TombstoneEpoch {
			t.Fatalf("a lagging leader's takeover of partition %d after the removal: %v, want fenced at the tombstone", p, err)
		}
		if got := partitionFiles(t, pd); len(got) != 1 {
			t.Fatalf("the refused takeover of partition %d left %v", p, got)
		}
	}
	// Every step may be repeated (a second broker, a retry after a crash).
	if err := d.removeData(testClusterID, topic); err != nil {
		t.Errorf("removing a removed topic: %v", err)
	}
}

func TestRemovalRepeatsSafely(t *testing.T) {
	data := t.TempDir()
	id := [16]byte{1}
	dir := filepath.Dir(storage.PartitionDir(data, testClusterID, "t", id, 0))
	for _, p := range []string{"0", "1"} {
		if err := os.MkdirAll(filepath.Join(dir, p, "fence"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	seg := filepath.Join(dir, "0", "00000000000000000000-0000000001.log")
	if err := os.WriteFile(seg, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := testRemover(t, data, storage.OSFS{})
	for i := range 2 {
		if err := d.removeData(testClusterID, cluster.DeletingTopic{Name: "t", ID: id, Partitions: 2}); err != nil {
			t.Fatalf("removal #%d (a fence already at the tombstone is success): %v", i+1, err)
		}
	}
	if _, err := os.Stat(seg); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the segment is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(dir)); err != nil {
		t.Errorf("the topics directory itself must stay: %v", err)
	}
}

func TestOnlyTheLowestAliveBrokerRemovesData(t *testing.T) {
	rows := []v1alpha1.BrokerRow{{ID: 0, Health: v1alpha1.BrokerDead}, {ID: 1, Health: v1alpha1.BrokerAlive}, {ID: 2, Health: v1alpha1.BrokerAlive}}
	s := cluster.NewMemoryView(cluster.Snapshot{Brokers: rows}).Snapshot()
	for self, want := range map[int32]bool{0: false, 1: true, 2: false, 5: false} {
		if got := lowestAlive(s, self); got != want {
			t.Errorf("lowestAlive(%d) = %v, want %v", self, got, want)
		}
	}
}

// A removal whose fence claim fails removes nothing and keeps the finalizer: removing the data
// of a partition a straggler could still acknowledge writes to would lose them silently.
func TestAFenceThatCannotBeClaimedRemovesNothing(t *testing.T) {
	data := t.TempDir()
	id := [16]byte{2}
	dir := filepath.Dir(storage.PartitionDir(data, testClusterID, "t", id, 0))
	if err := os.MkdirAll(filepath.Join(dir, "0", "fence"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "0", "00000000000000000000-0000000001.log"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	eio := errors.New("input/output error")
	faulty := storage.FaultFS{FS: storage.OSFS{}, Fault: func(op storage.Op, path string) error {
		if op == storage.OpOpen && strings.Contains(path, string(filepath.Separator)+"fence"+string(filepath.Separator)) {
			return eio
		}
		return nil
	}}
	d := &dataRemover{dataDir: data, fs: faulty, log: testr.New(t)} // no Admin: reaching the finalizer would panic
	err := d.remove(testkit.Context(t), testClusterID, cluster.DeletingTopic{Object: "t", Name: "t", ID: id, Partitions: 1, AwaitsDataRemoval: true})
	if !errors.Is(err, eio) {
		t.Fatalf("remove = %v, want the fence error", err)
	}
	if got := partitionFiles(t, filepath.Join(dir, "0")); len(got) != 2 {
		t.Fatalf("partition 0 holds %v after a removal whose fence was not claimed, want its segment and fence", got)
	}
}

// A removal cut short by a storage error is finished by the next attempt.
func TestAnInterruptedRemovalIsFinishedByTheNextAttempt(t *testing.T) {
	data := t.TempDir()
	id := [16]byte{3}
	seg := filepath.Join(storage.PartitionDir(data, testClusterID, "t", id, 0), "00000000000000000000-0000000001.log")
	if err := os.MkdirAll(filepath.Dir(seg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seg, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	failOnce := true
	faulty := storage.FaultFS{FS: storage.OSFS{}, Fault: func(op storage.Op, path string) error {
		if op == storage.OpRemove && path == seg && failOnce {
			failOnce = false
			return errors.New("input/output error")
		}
		return nil
	}}
	d := testRemover(t, data, faulty)
	topic := cluster.DeletingTopic{Name: "t", ID: id, Partitions: 1}
	if err := d.removeData(testClusterID, topic); err == nil {
		t.Fatal("the removal hid a storage error")
	}
	if err := d.removeData(testClusterID, topic); err != nil {
		t.Fatalf("second attempt: %v", err)
	}
	if _, err := os.Stat(seg); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the segment is still there: %v", err)
	}
}
