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

func TestRemovalFencesOutAStragglingLeader(t *testing.T) {
	ctx := testkit.Context(t)
	data := t.TempDir()
	id := [16]byte{7, 7, 7}
	dir := topicDir(data, testClusterID, "orders", id)
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

	// The removal's first step: the straggling leader (it never learned the topic was
	// deleted) must not acknowledge anything after it.
	if exists, err := fenceTopic(storage.OSFS{}, dir); err != nil || !exists {
		t.Fatalf("fence: %v (exists %v)", err, exists)
	}
	var fenced *storage.FencedError
	if _, err := log.Append(ctx, oneRecordBatch(), storage.AcksAll); !errors.As(err, &fenced) {
		t.Fatalf("append after the fence claim: %v, want a *storage.FencedError (nothing acknowledged)", err)
	}
	if f, err := storage.OpenFence(storage.OSFS{}, partitionFenceDir(pdir)); err != nil {
		t.Fatal(err)
	} else if e, _ := f.Epoch(); e != tombstoneEpoch {
		t.Fatalf("fence %d, want the tombstone epoch", e)
	}

	if err := removeTree(storage.OSFS{}, dir); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("topic directory still there: %v", err)
	}
	// Every step may be repeated (a second broker, a retry after a crash).
	if exists, err := fenceTopic(storage.OSFS{}, dir); err != nil || exists {
		t.Errorf("fencing a removed topic: %v (exists %v)", err, exists)
	}
	if err := removeTree(storage.OSFS{}, dir); err != nil {
		t.Errorf("removing a removed topic: %v", err)
	}
}

func TestRemovalRepeatsSafely(t *testing.T) {
	data := t.TempDir()
	id := [16]byte{1}
	dir := topicDir(data, testClusterID, "t", id)
	for _, p := range []string{"0", "1"} {
		if err := os.MkdirAll(filepath.Join(dir, p, "fence"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "0", "00000000000000000000-0000000001.log"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stray-file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := fenceTopic(storage.OSFS{}, dir); err != nil {
			t.Fatalf("fence #%d (a fence already at the tombstone is success): %v", i+1, err)
		}
	}
	if err := removeTree(storage.OSFS{}, dir); err != nil {
		t.Fatal(err)
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
	dir := topicDir(data, testClusterID, "t", id)
	if err := os.MkdirAll(filepath.Join(dir, "0", "fence"), 0o755); err != nil {
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
	if _, err := os.Stat(filepath.Join(dir, "0")); err != nil {
		t.Fatalf("the partition directory was removed although its fence was not claimed: %v", err)
	}
}

// A removal cut short by a storage error is finished by the next attempt.
func TestAnInterruptedRemovalIsFinishedByTheNextAttempt(t *testing.T) {
	data := t.TempDir()
	dir := topicDir(data, testClusterID, "t", [16]byte{3})
	seg := filepath.Join(dir, "0", "00000000000000000000-0000000001.log")
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
	if err := removeTree(faulty, dir); err == nil {
		t.Fatal("removeTree hid a storage error")
	}
	if err := removeTree(faulty, dir); err != nil {
		t.Fatalf("second attempt: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("topic directory still there: %v", err)
	}
}
