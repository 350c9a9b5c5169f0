package groups

import (
	"encoding/binary"
	"maps"
)

// Pending transactional offsets (docs/groups.md "Transactional offsets"). A TxnOffsetCommit
// stores its offsets as pending under the producer id, invisible to OffsetFetch; the
// transaction's marker (CompleteTransaction) applies them (commit) or drops them (abort).
// The rules are Apache 3.7's GroupMetadata prepareTxnOffsetCommit /
// completePendingTxnOffsetCommit, where "older" is the position in the log: a pending offset
// is applied at commit only if the partition's committed offset was written before it. Here
// the position is kept as two facts the files record: seq, the order of the TxnOffsetCommit
// frames of the group, and stale, set when a plain commit of the partition — or a committed
// transactional offset written later — was acknowledged after it.
//
// The same functions change the state on the group's goroutine and when a file is replayed,
// so what a loader rebuilds is what the writer acknowledged.

// pendingOffset is one pending transactional offset.
type pendingOffset struct {
	committed
	seq uint64 // order of its TxnOffsetCommit frame within the group
	// stale: an offset of the partition committed after this one was written (a plain
	// OffsetCommit, or another producer's transactional offset written later and committed
	// first): at commit this one is dropped, as Apache's olderThan check drops it.
	stale bool
}

// pendingTxn is one producer's pending offsets in a group.
type pendingTxn struct {
	epoch   int16 // the producer epoch of its latest TxnOffsetCommit
	offsets map[tp]pendingOffset
}

func cloneTxn(txn map[int64]*pendingTxn) map[int64]*pendingTxn {
	out := make(map[int64]*pendingTxn, len(txn))
	for pid, p := range txn {
		out[pid] = &pendingTxn{epoch: p.epoch, offsets: maps.Clone(p.offsets)}
	}
	return out
}

func pendingCount(txn map[int64]*pendingTxn) int {
	n := 0
	for _, p := range txn {
		n += len(p.offsets)
	}
	return n
}

// hasPending reports whether any producer has a pending offset for k (Apache's
// hasPendingOffsetCommitsForTopicPartition).
func hasPending(txn map[int64]*pendingTxn, k tp) bool {
	for _, p := range txn {
		if _, ok := p.offsets[k]; ok {
			return true
		}
	}
	return false
}

// applyTxnCommit records a TxnOffsetCommit frame: each entry becomes the producer's pending
// offset of its partition (a later one of the same producer replaces it, fresh). It returns
// the group's next seq.
func applyTxnCommit(txn map[int64]*pendingTxn, next uint64, pid int64, epoch int16, seq uint64, entries []offsetEntry) uint64 {
	if len(entries) == 0 {
		return next
	}
	p := txn[pid]
	if p == nil {
		p = &pendingTxn{offsets: map[tp]pendingOffset{}}
		txn[pid] = p
	}
	p.epoch = epoch
	for _, e := range entries {
		p.offsets[e.tp] = pendingOffset{committed: e.committed, seq: seq}
	}
	return max(next, seq+1)
}

// markStale records that plain commits of parts were acknowledged after every pending
// offset of those partitions.
func markStale(txn map[int64]*pendingTxn, parts []tp) {
	if len(txn) == 0 {
		return
	}
	for _, p := range txn {
		for _, k := range parts {
			if po, ok := p.offsets[k]; ok && !po.stale {
				po.stale = true
				p.offsets[k] = po
			}
		}
	}
}

// dropPending removes every producer's pending offsets of parts (Apache's removeOffsets:
// OffsetDelete and a deleted topic remove pending transactional offsets too).
func dropPending(txn map[int64]*pendingTxn, parts []tp) {
	for pid, p := range txn {
		for _, k := range parts {
			delete(p.offsets, k)
		}
		if len(p.offsets) == 0 {
			delete(txn, pid)
		}
	}
}

// completeTxn applies (commit) or drops (abort) producer pid's pending offsets. A committed
// pending offset replaces the partition's committed offset unless it is stale, and makes
// every other producer's pending offset of the partition written before it stale (the
// committed offset is now younger than they are). It returns the partitions whose committed
// offset changed.
func completeTxn(offsets map[tp]committed, txn map[int64]*pendingTxn, pid int64, commit bool) []tp {
	p := txn[pid]
	if p == nil {
		return nil
	}
	delete(txn, pid)
	if !commit {
		return nil
	}
	var changed []tp
	for k, po := range p.offsets {
		if po.stale {
			continue
		}
		offsets[k] = po.committed
		changed = append(changed, k)
		for _, q := range txn {
			if other, ok := q.offsets[k]; ok && other.seq < po.seq && !other.stale {
				other.stale = true
				q.offsets[k] = other
			}
		}
	}
	return changed
}

// ---- frames ----

// txnCommitPayload: producer id, epoch, seq, the offsets (in the commit frame's form).
func txnCommitPayload(pid int64, epoch int16, seq uint64, entries []offsetEntry) []byte {
	n := 32
	for _, e := range entries {
		n += len(e.topic) + len(e.metadata) + 16 + 5*binary.MaxVarintLen64
	}
	b := append(make([]byte, 0, n), kindTxnCommit)
	b = binary.AppendVarint(b, pid)
	b = binary.AppendVarint(b, int64(epoch))
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for _, e := range entries {
		b = appendOffset(b, e)
	}
	return b
}

func txnCompletePayload(pid int64, commit bool) []byte {
	b := binary.AppendVarint([]byte{kindTxnComplete}, pid)
	if commit {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendPending appends one pending offset as a snapshot part holds it: producer id, epoch,
// seq, stale, then the offset.
func appendPending(b []byte, pid int64, epoch int16, k tp, po pendingOffset) []byte {
	b = binary.AppendVarint(b, pid)
	b = binary.AppendVarint(b, int64(epoch))
	b = binary.AppendUvarint(b, po.seq)
	if po.stale {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return appendOffset(b, offsetEntry{k, po.committed})
}

// A pending entry is at least: producer id, epoch, seq, stale (1 each) and an offset entry.
const minPendingEntry = 4 + minOffsetEntry

func (r *reader) int16() int16 {
	v := r.varint()
	if v < -1<<15 || v > 1<<15-1 {
		r.fail("int16")
		return 0
	}
	return int16(v)
}

func (r *reader) flag() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) < 1 || r.b[0] > 1 {
		r.fail("flag")
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

// offsetEntry decodes one offset in the current form, interning its topic.
func (dec *decoder) offsetEntry(r *reader) offsetEntry {
	var e offsetEntry
	e.topic = dec.topic(r.bytes())
	e.partition = r.int32()
	e.topicID = r.id()
	e.offset = r.varint()
	e.leaderEpoch = r.int32()
	e.metadata = string(r.bytes())
	e.commitMs = r.varint()
	e.expireMs = r.varint()
	return e
}

func (dec *decoder) txnCommit(r *reader) (pid int64, epoch int16, seq uint64, entries []offsetEntry) {
	pid = r.varint()
	epoch = r.int16()
	seq = r.uvarint()
	n := r.count(minOffsetEntry)
	for range n {
		e := dec.offsetEntry(r)
		if r.err != nil {
			return
		}
		entries = append(entries, e)
	}
	if r.err == nil && (pid < 0 || epoch < 0) {
		r.fail("producer")
	}
	return
}

func txnCompleteBody(r *reader) (pid int64, commit bool) {
	pid = r.varint()
	commit = r.flag()
	if r.err == nil && pid < 0 {
		r.fail("producer id")
	}
	return
}

// pendingOffsets decodes n pending offsets of a snapshot part into the state.
func (dec *decoder) pendingOffsets(r *reader, n int) {
	d := dec.d
	for range n {
		pid := r.varint()
		epoch := r.int16()
		seq := r.uvarint()
		stale := r.flag()
		e := dec.offsetEntry(r)
		if r.err == nil && (pid < 0 || epoch < 0) {
			r.fail("producer")
		}
		if r.err != nil {
			return
		}
		p := d.txn[pid]
		if p == nil {
			p = &pendingTxn{epoch: epoch, offsets: map[tp]pendingOffset{}}
			d.txn[pid] = p
		}
		if p.epoch != epoch {
			r.fail("producer epoch") // one epoch per producer, as written
			return
		}
		if _, dup := p.offsets[e.tp]; dup {
			r.fail("duplicate pending offset")
			return
		}
		p.offsets[e.tp] = pendingOffset{committed: e.committed, seq: seq, stale: stale}
		d.txnSeq = max(d.txnSeq, seq+1)
	}
}
