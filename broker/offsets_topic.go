package broker

import (
	"cmp"
	"encoding/binary"
	"hash/crc32"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/groups"
	"github.com/paddock-dev/paddock/internal/coordinator"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// offsetsView is this broker's __consumer_offsets (docs/groups.md, "The offsets topic
// view"): the committed offsets of the groups it coordinates, as records in Apache's
// offsets-topic format, per partition of the topic, at offsets a reader can resume from.
//
// It is fed by the group coordinator's change feed (groups.Config.OffsetsChanged: every
// acknowledged change, and a group's whole state at its load) and keeps, per partition, a
// log in memory that is compacted once half of it is superseded: a reader keeping up reads
// every change, one that falls behind at least the newest record of each key (group, topic,
// partition). It stays about the size of the groups' committed offsets. Offsets are epoch<<offsetEpochShift plus a
// sequence number: at each coordinator epoch (every change of which broker coordinates
// what) every partition this broker leads is renumbered from the new epoch's base, its
// newest records first in their old order, so offsets only grow — across epochs, and across
// brokers, since a partition's next leader numbers from a later epoch. A reader resuming
// from an older offset reads the renumbered records again: the latest value of every key,
// as a reader of a compacted topic does.
type offsetsView struct {
	self int32
	view cluster.View
	// now is the clock tombstones are dated and expired by (time.Now; tests set it).
	now func() time.Time

	mu sync.Mutex
	// epoch and partitions are the coordinator epoch and offsets.topic.num.partitions the
	// logs are numbered and partitioned for, start the offset a new log starts at; parts the
	// logs of the partitions this broker leads at that epoch. Guarded by mu.
	epoch      int32
	start      int64
	partitions int32
	parts      map[int32]*offsetsLog
}

// offsetEpochShift places the coordinator epoch above 39 bits of sequence number: 2^24
// epochs and 5.5·10^11 records per partition and epoch within int64.
const offsetEpochShift = 39

// tombstoneRetention is how long a deleted offset's tombstone stays readable: Apache's
// delete.retention.ms default (24 h), after which a compacted topic drops it too.
const tombstoneRetention = 24 * time.Hour

type offsetKey struct {
	group, topic string
	partition    int32
}

// offsetsLog is one partition: its records by offset, each key's newest live.
type offsetsLog struct {
	next    int64 // the offset the next record gets: the high watermark
	entries []offsetsEntry
	newest  map[offsetKey]int // index in entries of each key's newest record
	stale   int               // superseded entries not yet dropped
	changed chan struct{}     // closed at the next append
}

type offsetsEntry struct {
	offset     int64
	rec        groups.CommittedOffset
	stampMs    int64 // the record's timestamp: the commit time, or when the offset was deleted
	superseded bool
}

func newOffsetsView(self int32, view cluster.View) *offsetsView {
	return &offsetsView{self: self, view: view, now: time.Now, parts: map[int32]*offsetsLog{}}
}

// offsetsOwner is the coordinator epoch of s and whether this broker leads partition p of
// __consumer_offsets at it: the coordinator rule over the sets the epoch was set for, as the
// group coordinator claims groups (coordinatorView).
func offsetsOwner(s *cluster.Snapshot, self, p int32) (epoch int32, ok bool) {
	if s.CoordinatorEpoch <= 0 || s.CoordinatorBrokers == nil {
		return 0, false
	}
	id, found := coordinator.PickPartition(p, s.CoordinatorBrokers.Registered, s.CoordinatorBrokers.Alive)
	return int32(min(s.CoordinatorEpoch, math.MaxInt32)), found && id == self
}

// changed is the coordinator's feed (groups.OffsetsChanged).
func (v *offsetsView) changed(group string, offsets []groups.CommittedOffset, whole bool) {
	s := v.view.Snapshot()
	p := coordinator.Partition(group, offsetsPartitions(s))
	if _, owned := offsetsOwner(s, v.self, p); !owned {
		return // a deposed coordinator's late change: the next leader has its own
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	nowMs := v.nowMs()
	v.followLocked(s)
	l := v.parts[p]
	if l == nil {
		l = newOffsetsLog(v.start)
		v.parts[p] = l
	}
	if whole {
		listed := make(map[offsetKey]bool, len(offsets))
		for _, o := range offsets {
			listed[offsetKey{o.Group, o.Topic, o.Partition}] = true
		}
		var gone []groups.CommittedOffset
		for k, i := range l.newest {
			if k.group == group && !listed[k] && !l.entries[i].rec.Deleted {
				gone = append(gone, groups.CommittedOffset{Group: k.group, Topic: k.topic, Partition: k.partition, Deleted: true})
			}
		}
		slices.SortFunc(gone, func(a, b groups.CommittedOffset) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
		offsets = append(gone, offsets...)
	}
	before := l.next
	for _, o := range offsets {
		l.appendLocked(o, nowMs)
	}
	if l.next != before {
		l.wakeLocked()
	}
	l.compactLocked(nowMs)
}

// follow brings the logs to the view's epoch and partition count.
func (v *offsetsView) follow(s *cluster.Snapshot) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.followLocked(s)
}

// followLocked renumbers every log from the base of a newer coordinator epoch, or after a
// change of the partition count re-partitions their records; records of partitions this
// broker no longer leads are dropped (their next leader has them from its groups).
func (v *offsetsView) followLocked(s *cluster.Snapshot) {
	epoch, _ := offsetsOwner(s, v.self, 0)
	n := offsetsPartitions(s)
	if epoch <= v.epoch && n == v.partitions {
		return
	}
	// A new epoch numbers from its base; a new partition count at the same epoch goes on
	// above every offset given, so offsets never repeat.
	start := offsetBase(epoch)
	if epoch <= v.epoch {
		epoch, start = v.epoch, v.start
	}
	var all []offsetsEntry
	nowMs := v.nowMs()
	for _, l := range v.parts {
		for _, e := range l.entries {
			if !e.superseded && !expired(e, nowMs) {
				all = append(all, e)
			}
		}
		start = max(start, l.next)
		close(l.changed) // a waiting Fetch reads again
	}
	slices.SortStableFunc(all, func(a, b offsetsEntry) int { return cmp.Compare(a.offset, b.offset) })
	v.epoch, v.start, v.partitions, v.parts = epoch, start, n, map[int32]*offsetsLog{}
	for _, e := range all {
		p := coordinator.Partition(e.rec.Group, n)
		if _, owned := offsetsOwner(s, v.self, p); !owned {
			continue
		}
		l := v.parts[p]
		if l == nil {
			l = newOffsetsLog(start)
			v.parts[p] = l
		}
		l.appendLocked(e.rec, e.stampMs)
	}
}

func (v *offsetsView) nowMs() int64 { return v.now().UnixMilli() }

func offsetBase(epoch int32) int64 { return int64(epoch) << offsetEpochShift }

func newOffsetsLog(base int64) *offsetsLog {
	return &offsetsLog{next: base, newest: map[offsetKey]int{}, changed: make(chan struct{})}
}

// appendLocked gives o the next offset (the caller wakes the readers). A tombstone for a key the log does not hold is
// dropped: no reader of this log has seen the key.
func (l *offsetsLog) appendLocked(o groups.CommittedOffset, nowMs int64) {
	k := offsetKey{o.Group, o.Topic, o.Partition}
	i, had := l.newest[k]
	if o.Deleted && (!had || l.entries[i].rec.Deleted) {
		return
	}
	if had {
		l.entries[i].superseded = true
		l.stale++
	}
	stamp := o.CommitMs
	if o.Deleted {
		stamp = nowMs
		l.stale++ // dropped by a compaction once expired
	}
	l.newest[k] = len(l.entries)
	l.entries = append(l.entries, offsetsEntry{offset: l.next, rec: o, stampMs: stamp})
	l.next++
}

// wakeLocked wakes the reads waiting for the log to grow (once per change, however many
// records it appended).
func (l *offsetsLog) wakeLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// compactLocked drops superseded records and expired tombstones once they are half of the
// log, so the log stays about the size of the newest records.
func (l *offsetsLog) compactLocked(nowMs int64) {
	if l.stale < 64 || l.stale < len(l.entries)/2 {
		return
	}
	kept := l.entries[:0]
	clear(l.newest)
	tombstones := 0
	for _, e := range l.entries {
		if e.superseded || expired(e, nowMs) {
			continue
		}
		if e.rec.Deleted {
			tombstones++
		}
		l.newest[offsetKey{e.rec.Group, e.rec.Topic, e.rec.Partition}] = len(kept)
		kept = append(kept, e)
	}
	clear(l.entries[len(kept):])
	l.entries, l.stale = kept, tombstones
}

// expired: a tombstone older than tombstoneRetention is no longer served.
func expired(e offsetsEntry, nowMs int64) bool {
	return e.rec.Deleted && nowMs-e.stampMs > tombstoneRetention.Milliseconds()
}

// offsetsRead is one Fetch read of a partition of the view.
type offsetsRead struct {
	code    int16
	records []byte
	hw      int64
	changed <-chan struct{} // closed when the partition has more to read
}

// read returns the records of partition p from offset from on, at most maxBytes of them
// unless first (the answer's first data: one record goes whatever its size). The records
// are picked under the lock and encoded after it, so a large read never holds up the
// groups' commits.
func (v *offsetsView) read(p int32, from int64, maxBytes int, first bool) offsetsRead {
	res, picked := v.pick(p, from, maxBytes, first)
	var batch offsetsBatch
	for _, e := range picked {
		if !batch.fits(e.offset) {
			res.records = batch.appendTo(res.records)
			batch = offsetsBatch{}
		}
		batch.add(e.offset, e.stampMs, offsetRecordKey(e.rec), offsetRecordValue(e.rec))
	}
	res.records = batch.appendTo(res.records)
	return res
}

// pick is read's choice of records, made under the lock.
func (v *offsetsView) pick(p int32, from int64, maxBytes int, first bool) (offsetsRead, []offsetsEntry) {
	s := v.view.Snapshot()
	if p < 0 || p >= offsetsPartitions(s) {
		return offsetsRead{code: kerr.UnknownTopicOrPartition.Code}, nil
	}
	if _, owned := offsetsOwner(s, v.self, p); !owned {
		return offsetsRead{code: kerr.NotLeaderForPartition.Code}, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.followLocked(s)
	l := v.parts[p]
	if l == nil {
		l = newOffsetsLog(v.start)
		v.parts[p] = l
	}
	res := offsetsRead{hw: l.next, changed: l.changed}
	if from < 0 || from > l.next {
		res.code = kerr.OffsetOutOfRange.Code
		return res, nil
	}
	nowMs := v.nowMs()
	i, _ := slices.BinarySearchFunc(l.entries, from, func(e offsetsEntry, o int64) int { return cmp.Compare(e.offset, o) })
	var picked []offsetsEntry
	size, batchBase := 0, int64(0)
	for ; i < len(l.entries); i++ {
		e := l.entries[i]
		if expired(e, nowMs) {
			continue
		}
		size += recordSize(e.rec)
		if len(picked) == 0 || e.offset-batchBase > math.MaxInt32 { // a new batch (offsetsBatch.fits)
			size += batchHeaderSize
			batchBase = e.offset
		}
		if size > maxBytes && (!first || len(picked) > 0) {
			break
		}
		picked = append(picked, e)
	}
	return res, picked
}

// listOffset answers ListOffsets for partition p: earliest is 0 (the log start never moves,
// as in a compacted topic), latest the high watermark, a timestamp the first record at or
// after it.
func (v *offsetsView) listOffset(p int32, ts int64) (offset int64, code int16) {
	s := v.view.Snapshot()
	if p < 0 || p >= offsetsPartitions(s) {
		return -1, kerr.UnknownTopicOrPartition.Code
	}
	if _, owned := offsetsOwner(s, v.self, p); !owned {
		return -1, kerr.NotLeaderForPartition.Code
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.followLocked(s)
	l := v.parts[p]
	next := v.start
	if l != nil {
		next = l.next
	}
	switch {
	case ts == -2 || ts == -4:
		return 0, 0
	case ts < 0:
		return next, 0
	}
	if l != nil {
		for _, e := range l.entries {
			if !e.superseded && e.stampMs >= ts {
				return e.offset, 0
			}
		}
	}
	return -1, 0
}

// Apache's offsets topic schemas (OffsetCommitKey v1, OffsetCommitValue v3): a version
// prefix, then the fields, non-flexible; strings are int16-length prefixed.
const (
	offsetKeyVersion   = 1
	offsetValueVersion = 3
)

func offsetRecordKey(o groups.CommittedOffset) []byte {
	b := binary.BigEndian.AppendUint16(nil, offsetKeyVersion)
	b = appendKafkaString(b, o.Group)
	b = appendKafkaString(b, o.Topic)
	return binary.BigEndian.AppendUint32(b, uint32(o.Partition))
}

// offsetRecordValue is nil for a tombstone.
func offsetRecordValue(o groups.CommittedOffset) []byte {
	if o.Deleted {
		return nil
	}
	b := binary.BigEndian.AppendUint16(nil, offsetValueVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(o.Offset))
	b = binary.BigEndian.AppendUint32(b, uint32(o.LeaderEpoch))
	b = appendKafkaString(b, o.Metadata)
	return binary.BigEndian.AppendUint64(b, uint64(o.CommitMs))
}

func appendKafkaString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// batchHeaderSize is a record batch v2's bytes before its records.
const batchHeaderSize = 61

// offsetsBatch is one record batch being built: records with increasing offsets (gaps
// allowed, as in a compacted log) whose offset deltas fit the batch's int32 fields.
type offsetsBatch struct {
	recs []pendingRecord
}

type pendingRecord struct {
	offset, ts int64
	key, value []byte
}

func (b *offsetsBatch) fits(offset int64) bool {
	return len(b.recs) == 0 || offset-b.recs[0].offset <= math.MaxInt32
}

// recordSize is an upper bound of one record's encoded size: its key and value (offsetRecordKey,
// offsetRecordValue) and the record's varints.
func recordSize(o groups.CommittedOffset) int {
	key := 2 + 2 + len(o.Group) + 2 + len(o.Topic) + 4
	value := 0
	if !o.Deleted {
		value = 2 + 8 + 4 + 2 + len(o.Metadata) + 8
	}
	return 3*binary.MaxVarintLen64 + 3*binary.MaxVarintLen32 + 1 + key + value
}

func (b *offsetsBatch) add(offset, ts int64, key, value []byte) {
	b.recs = append(b.recs, pendingRecord{offset: offset, ts: ts, key: key, value: value})
}

// appendTo appends the batch, encoded (nothing when empty): base offset the first record's,
// leader epoch -1, no producer, CreateTime timestamps, uncompressed, CRC-32C.
func (b *offsetsBatch) appendTo(out []byte) []byte {
	if len(b.recs) == 0 {
		return out
	}
	base, firstTs, maxTs := b.recs[0].offset, b.recs[0].ts, b.recs[0].ts
	for _, r := range b.recs {
		firstTs, maxTs = min(firstTs, r.ts), max(maxTs, r.ts)
	}
	be := binary.BigEndian
	start := len(out)
	out = be.AppendUint64(out, uint64(base))
	out = be.AppendUint32(out, 0)          // length, below
	out = be.AppendUint32(out, 0xffffffff) // partition leader epoch -1
	out = append(out, 2)                   // magic
	out = be.AppendUint32(out, 0)          // crc, below
	out = be.AppendUint16(out, 0)          // attributes: uncompressed, CreateTime
	out = be.AppendUint32(out, uint32(b.recs[len(b.recs)-1].offset-base))
	out = be.AppendUint64(out, uint64(firstTs))
	out = be.AppendUint64(out, uint64(maxTs))
	out = be.AppendUint64(out, math.MaxUint64) // producer id -1
	out = be.AppendUint16(out, math.MaxUint16) // producer epoch -1
	out = be.AppendUint32(out, math.MaxUint32) // base sequence -1
	out = be.AppendUint32(out, uint32(len(b.recs)))
	var body []byte
	for _, r := range b.recs {
		body = body[:0]
		body = append(body, 0) // attributes
		body = binary.AppendVarint(body, r.ts-firstTs)
		body = binary.AppendVarint(body, r.offset-base)
		body = binary.AppendVarint(body, int64(len(r.key)))
		body = append(body, r.key...)
		if r.value == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(r.value)))
			body = append(body, r.value...)
		}
		body = binary.AppendVarint(body, 0) // no headers
		out = binary.AppendVarint(out, int64(len(body)))
		out = append(out, body...)
	}
	be.PutUint32(out[start+8:], uint32(len(out)-start-12))
	be.PutUint32(out[start+17:], crc32.Checksum(out[start+21:], castagnoliTable))
	return out
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// isOffsetsTopic reports whether a Fetch topic (by name below v13, by id from v13) is
// __consumer_offsets.
func (rc *requestContext) isOffsetsTopic(version int16, name string, id [16]byte) bool {
	if version >= 13 {
		return id != [16]byte{} && id == offsetsTopicID(rc.view.ClusterID)
	}
	return name == topicname.ConsumerOffsets
}

// offsetsTopicPart is a Fetch partition of __consumer_offsets, or nil when this broker has
// no view to serve it from (no coordinator runs yet): NOT_LEADER_OR_FOLLOWER.
func (f *fetchState) offsetsTopicPart(rp kmsg.FetchRequestTopicPartition, op *kmsg.FetchResponseTopicPartition, isolation int8) *fetchPart {
	view := f.rc.h.Groups.offsetsTopic()
	if view == nil {
		setFetchError(op, kerr.NotLeaderForPartition.Code)
		f.ended = true
		return nil
	}
	if isolation == 1 {
		op.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	}
	return &fetchPart{topic: topicname.ConsumerOffsets, view: view, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, out: op, pending: true}
}

// readOffsetsTopic is read for a partition of __consumer_offsets: the same limits and
// first-record rule, its change channel in place of the high watermark's.
func (f *fetchState) readOffsetsTopic(p *fetchPart) {
	limit := min(int(max(p.maxBytes, 0)), f.remaining)
	r := p.view.read(p.out.Partition, p.offset, limit, !f.anyData)
	p.hw = r.changed
	if r.code != 0 {
		setFetchError(p.out, r.code)
		p.pending, f.ended = false, true
		return
	}
	p.out.HighWatermark, p.out.LastStableOffset, p.out.LogStartOffset = r.hw, r.hw, 0
	if len(r.records) == 0 {
		return
	}
	p.pending = false
	p.out.RecordBatches = r.records
	f.anyData = true
	f.total += len(r.records)
	f.remaining -= len(r.records)
}

// listOffsetsTopic answers ListOffsets for a partition of __consumer_offsets (v0 answers
// one offset in OldStyleOffsets).
func (rc *requestContext) listOffsetsTopic(op *kmsg.ListOffsetsResponseTopicPartition, rp kmsg.ListOffsetsRequestTopicPartition, version int16) {
	view := rc.h.Groups.offsetsTopic()
	if view == nil {
		op.ErrorCode = kerr.NotLeaderForPartition.Code
		return
	}
	offset, code := view.listOffset(rp.Partition, rp.Timestamp)
	op.ErrorCode = code
	if code != 0 {
		return
	}
	op.Timestamp, op.Offset, op.LeaderEpoch = -1, offset, -1
	if version == 0 && offset >= 0 {
		op.OldStyleOffsets = []int64{offset}
	}
}
