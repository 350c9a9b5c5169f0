package broker

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/groups"
	"github.com/paddock-dev/paddock/internal/coordinator"
)

// viewRecord is one record read back from the view.
type viewRecord struct {
	offset     int64
	key, value []byte
	tsMs       int64
}

// newTestOffsetsView is broker self's view over a MemoryView at coordinator epoch epoch with
// brokers registered and alive, and a settable clock.
func newTestOffsetsView(t *testing.T, self int32, epoch int64, brokers []int32) (*offsetsView, *cluster.MemoryView, *time.Time) {
	t.Helper()
	mv := cluster.NewMemoryView(cluster.Snapshot{})
	setCoordinatorEpoch(mv, epoch, brokers)
	v := newOffsetsView(self, mv)
	now := time.UnixMilli(1_700_000_000_000)
	v.now = func() time.Time { return now }
	return v, mv, &now
}

func setCoordinatorEpoch(mv *cluster.MemoryView, epoch int64, brokers []int32, config ...map[string]string) {
	var rows []v1alpha1.BrokerRow
	for _, id := range brokers {
		rows = append(rows, v1alpha1.BrokerRow{ID: id, State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive})
	}
	var cfg map[string]string
	if len(config) > 0 {
		cfg = config[0]
	}
	mv.Set(cluster.Snapshot{ClusterID: testClusterID, Brokers: rows, ConfigMap: cfg, CoordinatorEpoch: epoch,
		CoordinatorBrokers: &v1alpha1.CoordinatorBrokers{Registered: brokers, Alive: brokers}})
}

// readAll reads partition p from offset from to its end and decodes every batch, checking
// each batch's CRC-32C.
func readAll(t *testing.T, v *offsetsView, p int32, from int64) ([]viewRecord, offsetsRead) {
	t.Helper()
	r := v.read(p, from, 1<<30, true)
	if r.code != 0 {
		t.Fatalf("read partition %d from %d: %v", p, from, kerr.ErrorForCode(r.code))
	}
	var out []viewRecord
	b := r.records
	for len(b) > 0 {
		base := int64(binary.BigEndian.Uint64(b))
		size := 12 + int(binary.BigEndian.Uint32(b[8:]))
		batch := b[:size]
		if got, want := binary.BigEndian.Uint32(batch[17:]), crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)); got != want {
			t.Fatalf("batch at %d: crc %x, want %x", base, got, want)
		}
		firstTs := int64(binary.BigEndian.Uint64(batch[27:]))
		n := int(binary.BigEndian.Uint32(batch[57:]))
		recs := batch[61:]
		for range n {
			length, k := binary.Varint(recs)
			rec := recs[k : k+int(length)]
			recs = recs[k+int(length):]
			rec = rec[1:] // attributes
			tsDelta, k := binary.Varint(rec)
			rec = rec[k:]
			offDelta, k := binary.Varint(rec)
			rec = rec[k:]
			kl, k := binary.Varint(rec)
			rec = rec[k:]
			key := rec[:kl]
			rec = rec[kl:]
			vl, k := binary.Varint(rec)
			rec = rec[k:]
			var value []byte
			if vl >= 0 {
				value = rec[:vl]
			}
			out = append(out, viewRecord{offset: base + offDelta, key: key, value: value, tsMs: firstTs + tsDelta})
		}
		b = b[size:]
	}
	return out, r
}

func commit(group, topic string, partition int32, offset, ms int64) groups.CommittedOffset {
	return groups.CommittedOffset{Group: group, Topic: topic, Partition: partition, Offset: offset, LeaderEpoch: 3, Metadata: "m", CommitMs: ms}
}

// latestByKey folds records into each key's last value (nil for a tombstone), and checks
// offsets increase.
func latestByKey(t *testing.T, recs []viewRecord) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	last := int64(-1)
	for _, r := range recs {
		if r.offset <= last {
			t.Fatalf("offset %d after %d", r.offset, last)
		}
		last = r.offset
		out[string(r.key)] = r.value
	}
	return out
}

// The view keeps about the newest record of every key, however many commits: a group
// committing 100 partitions 200 times leaves a log of at most about twice the state, and a
// reader from the start gets every key's last commit, in Apache's schemas.
func TestTheOffsetsViewStaysAboutTheSizeOfItsNewestRecords(t *testing.T) {
	v, _, now := newTestOffsetsView(t, 0, 1, []int32{0})
	const keys, rounds = 100, 200
	for round := range rounds {
		batch := make([]groups.CommittedOffset, keys)
		for p := range keys {
			batch[p] = commit("g", "orders", int32(p), int64(round*10+p), now.UnixMilli())
		}
		v.changed("g", batch, false)
	}
	p := coordinator.Partition("g", coordinator.DefaultPartitions)
	l := v.parts[p]
	if n := len(l.entries); n > 2*keys+64 {
		t.Fatalf("%d records held for %d keys after %d commits each: not compacted", n, keys, rounds)
	}
	recs, r := readAll(t, v, p, 0)
	if r.hw != offsetBase(1)+keys*rounds {
		t.Errorf("high watermark %d, want %d", r.hw, offsetBase(1)+keys*rounds)
	}
	latest := latestByKey(t, recs)
	if len(latest) != keys {
		t.Fatalf("%d keys read, want %d", len(latest), keys)
	}
	for part := range int32(keys) {
		key := offsetRecordKey(groups.CommittedOffset{Group: "g", Topic: "orders", Partition: part})
		want := offsetRecordValue(commit("g", "orders", part, int64((rounds-1)*10+int(part)), now.UnixMilli()))
		if got := latest[string(key)]; string(got) != string(want) {
			t.Fatalf("partition %d: value %x, want %x", part, got, want)
		}
	}
	t.Logf("%d commits of %d keys: %d records held", keys*rounds, keys, len(l.entries))
}

// A deleted offset is a tombstone (null value) for tombstoneRetention, then no longer served.
func TestADeletedOffsetIsATombstoneForADay(t *testing.T) {
	v, _, now := newTestOffsetsView(t, 0, 1, []int32{0})
	v.changed("g", []groups.CommittedOffset{commit("g", "t", 0, 5, now.UnixMilli()), commit("g", "t", 1, 6, now.UnixMilli())}, false)
	v.changed("g", []groups.CommittedOffset{commit("g", "t", 1, 6, now.UnixMilli())}, true) // a load: t/0 is gone
	p := coordinator.Partition("g", coordinator.DefaultPartitions)
	recs, _ := readAll(t, v, p, 0)
	key0 := offsetRecordKey(groups.CommittedOffset{Group: "g", Topic: "t", Partition: 0})
	if v, ok := latestByKey(t, recs)[string(key0)]; !ok || v != nil {
		t.Fatalf("t/0 after its group's load without it: %x (present %v), want a tombstone", v, ok)
	}
	*now = now.Add(tombstoneRetention + time.Minute)
	for i := range 200 { // enough superseded records for a compaction
		v.changed("g", []groups.CommittedOffset{commit("g", "t", 1, int64(7+i), now.UnixMilli())}, false)
	}
	recs, _ = readAll(t, v, p, 0)
	if _, ok := latestByKey(t, recs)[string(key0)]; ok {
		t.Fatalf("the tombstone of t/0 is still served a day later")
	}
}

// A new coordinator epoch renumbers the log above every offset given before, keeping each
// key's newest record; a partition another broker leads answers NOT_LEADER_OR_FOLLOWER,
// and changes of its groups are not kept.
func TestANewEpochRenumbersAboveEveryEarlierOffset(t *testing.T) {
	v, mv, now := newTestOffsetsView(t, 0, 1, []int32{0})
	p := coordinator.Partition("g", coordinator.DefaultPartitions)
	for i := range 5 {
		v.changed("g", []groups.CommittedOffset{commit("g", "t", 0, int64(i), now.UnixMilli())}, false)
	}
	_, before := readAll(t, v, p, 0)
	setCoordinatorEpoch(mv, 2, []int32{0})
	recs, after := readAll(t, v, p, before.hw)
	if len(recs) != 1 || recs[0].offset < before.hw || recs[0].offset != offsetBase(2) || after.hw != offsetBase(2)+1 {
		t.Fatalf("after the epoch: records %+v, high watermark %d; want the newest record at %d (above %d)", recs, after.hw, offsetBase(2), before.hw)
	}

	// offsets.topic.num.partitions changes at the same epoch: the group's records move to its
	// new partition, numbered above every offset given before.
	setCoordinatorEpoch(mv, 2, []int32{0}, map[string]string{"offsets.topic.num.partitions": "7"})
	moved, _ := readAll(t, v, coordinator.Partition("g", 7), 0)
	if len(moved) != 1 || moved[0].offset < after.hw {
		t.Fatalf("after the partition count changed: %+v, want the newest record at or above %d", moved, after.hw)
	}

	// Two brokers: the partitions led by broker 1 are not served here.
	setCoordinatorEpoch(mv, 3, []int32{0, 1})
	var other string
	for i := 0; other == ""; i++ {
		g := "h" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if id, _ := coordinator.Pick(g, coordinator.DefaultPartitions, []int32{0, 1}, []int32{0, 1}); id == 1 {
			other = g
		}
	}
	v.changed(other, []groups.CommittedOffset{commit(other, "t", 0, 1, now.UnixMilli())}, false)
	op := coordinator.Partition(other, coordinator.DefaultPartitions)
	if r := v.read(op, 0, 1<<20, true); r.code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("partition %d led by broker 1: %v, want NOT_LEADER_OR_FOLLOWER", op, kerr.ErrorForCode(r.code))
	}
	if _, held := v.parts[op]; held {
		t.Fatalf("a change of a group broker 1 coordinates was kept")
	}
}

// A read stays within its byte limit, except that the answer's first data is one whole
// record however small the limit (a consumer always makes progress).
func TestAnOffsetsViewReadKeepsToItsSizeLimit(t *testing.T) {
	v, _, now := newTestOffsetsView(t, 0, 1, []int32{0})
	batch := make([]groups.CommittedOffset, 100)
	for p := range batch {
		batch[p] = commit("g", "orders", int32(p), int64(p), now.UnixMilli())
	}
	v.changed("g", batch, false)
	p := coordinator.Partition("g", coordinator.DefaultPartitions)
	if r := v.read(p, 0, 1000, false); len(r.records) == 0 || len(r.records) > 1000 {
		t.Fatalf("a 1000-byte read returned %d bytes", len(r.records))
	}
	if r := v.read(p, 0, 1, false); len(r.records) != 0 {
		t.Fatalf("a 1-byte read that is not the answer's first returned %d bytes", len(r.records))
	}
	r := v.read(p, 0, 1, true)
	if n := binary.BigEndian.Uint32(r.records[57:]); n != 1 {
		t.Fatalf("a 1-byte first read returned %d records, want 1", n)
	}
}

// BenchmarkOffsetsViewCommit is what the view adds to a commit of 100 partitions (the feed's
// append, and the compaction it amortizes), against the commit's fdatasync of ~1 ms
// (docs/groups.md, "Measurements").
func BenchmarkOffsetsViewCommit(b *testing.B) {
	mv := cluster.NewMemoryView(cluster.Snapshot{})
	setCoordinatorEpoch(mv, 1, []int32{0})
	v := newOffsetsView(0, mv)
	batch := make([]groups.CommittedOffset, 100)
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		for p := range batch {
			batch[p] = commit("g", "orders", int32(p), i, 1_700_000_000_000)
		}
		v.changed("g", batch, false)
		i++
	}
}
