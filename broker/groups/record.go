package groups

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
)

// The offsets file (docs/groups.md "Files"). A file is a sequence of frames:
//
//	length  uint32 big-endian   payload bytes
//	crc     uint32 big-endian   CRC-32C (Castagnoli) of the payload
//	payload kind byte, then the kind's body
//
// A file opens with a snapshot: the complete committed state of the group when the file was
// written — a header frame (format version, group id, epoch, protocol type, when the group
// became Empty, how many offsets follow) and then part frames holding those offsets, each
// about snapshotPartBytes, so a state of any size is written and read in bounded frames. Every
// later frame is one change, written and fsynced before the change is acknowledged.
//
// Reading: a file whose snapshot ends before its last offset (the file ends, or a frame does
// not check) is incomplete — its writer died while creating it, before it served anything. A
// frame that does not check after a complete snapshot ends the file (a torn tail: nothing
// after it was acknowledged, because each acknowledged frame was whole and durable before the
// next was written). But a frame whose length is beyond maxFrame and whose CRC checks was
// written whole by someone, and no writer writes such a frame: that is corruption, and the
// file is refused (errCorrupt), never skipped — skipping it could lose what it acknowledged.
//
// Bodies use unsigned varints for lengths and counts, zig-zag varints for signed numbers,
// strings as length + bytes, topic ids as 16 raw bytes.
const (
	frameHeaderSize = 8
	// maxFrame bounds one frame. A commit whose frame would be larger is answered
	// INVALID_COMMIT_OFFSET_SIZE before anything is written; snapshots are split in parts.
	maxFrame = 64 << 20
	// snapshotPartBytes is the size a snapshot part frame is filled to (one offset more may
	// pass it): the writer's and the reader's buffers hold one part.
	snapshotPartBytes = 256 << 10
	// readChunk is how much of a file the loader reads at once (more for a larger frame).
	readChunk = 32 << 10

	kindSnapshot     byte = 1 // version 2: header (offsets follow in parts); version 1: the whole state
	kindCommitV1     byte = 2 // protocol type, offsets without expiry (read only: older files)
	kindDelete       byte = 3 // partitions (removed)
	kindDeleteGroup  byte = 4 // every offset removed, protocol type cleared
	kindPurgeTopic   byte = 5 // topic name and id: offsets of that incarnation removed
	kindSnapshotPart byte = 6 // offsets of the snapshot
	kindCommit       byte = 7 // protocol type, offsets (set)
	kindEmptySince   byte = 8 // when the group became Empty (Unix ms), 0 when it gained members
	kindGroupType    byte = 9 // the group's protocol: 0 classic, 1 consumer (KIP-848)
	// Transactional offsets (txn_record.go).
	kindTxnCommit       byte = 10 // producer id and epoch, order, offsets (pending)
	kindTxnComplete     byte = 11 // producer id, commit or abort: its pending offsets applied or dropped
	kindSnapshotTxnPart byte = 12 // pending offsets of the snapshot (version 4)

	// snapshotVersion 4 adds, to version 3's header, the number of pending transactional
	// offsets, which follow the committed ones in kindSnapshotTxnPart frames. A state without
	// pending offsets is written as version 3 (snapshotVersionNoTxn), which coordinators that
	// predate transactions read.
	snapshotVersion      = 4
	snapshotVersionNoTxn = 3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errIncomplete: the file has no complete snapshot.
var errIncomplete = errors.New("offsets file has no complete snapshot")

// errCorrupt: the file holds a frame that checks but cannot be what a writer wrote.
var errCorrupt = errors.New("offsets file is corrupt")

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

// committed is one committed offset as stored.
type committed struct {
	topicID     [16]byte // the topic's id when committed; zero if the broker did not know it
	offset      int64
	leaderEpoch int32 // -1 when the client sent none
	metadata    string
	commitMs    int64 // commit time, Unix milliseconds
	// expireMs is when the offset expires whatever the group does (Unix ms), from the
	// retention time of an OffsetCommit v2–4; 0 when the commit set none (the usual case).
	expireMs int64
}

// offsetEntry is a committed offset with its partition, as carried in frames.
type offsetEntry struct {
	tp
	committed
}

// durable is the part of a group that survives a coordinator move.
type durable struct {
	protocolType string // "" until a commit from a group with members recorded one
	// consumer: the group is a consumer-protocol (KIP-848) group; its members are not
	// recorded yet (docs/groups.md "Classic and consumer groups").
	consumer bool
	// emptySinceMs is when the group last became Empty (Unix ms), or 0 when at the last record
	// it had members (its retention then counts from when a coordinator loads it).
	emptySinceMs int64
	offsets      map[tp]committed
	// txn holds the pending transactional offsets, by producer id (txn_record.go); txnSeq is
	// above the order of every pending offset.
	txn    map[int64]*pendingTxn
	txnSeq uint64
}

func newDurable() *durable {
	return &durable{offsets: map[tp]committed{}, txn: map[int64]*pendingTxn{}}
}

func (d *durable) clone() *durable {
	c := *d
	c.offsets = maps.Clone(d.offsets)
	c.txn = cloneTxn(d.txn)
	return &c
}

// purge removes the offsets of topic's incarnation id: those stored with that id, or with no
// id — committed and pending alike. A zero id removes every offset of the topic name. It
// returns how many it removed.
func (d *durable) purge(topic string, id [16]byte) int {
	match := func(k tp, c committed) bool {
		return k.topic == topic && (id == [16]byte{} || c.topicID == [16]byte{} || c.topicID == id)
	}
	n := 0
	for k, c := range d.offsets {
		if match(k, c) {
			delete(d.offsets, k)
			n++
		}
	}
	for pid, p := range d.txn {
		for k, po := range p.offsets {
			if match(k, po.committed) {
				delete(p.offsets, k)
				n++
			}
		}
		if len(p.offsets) == 0 {
			delete(d.txn, pid)
		}
	}
	return n
}

// ---- writing ----

// Payload builders. Each returns the payload only; frame() adds length and CRC.

func commitPayload(protocolType string, entries []offsetEntry) []byte {
	n := 16 + len(protocolType)
	for _, e := range entries {
		n += len(e.topic) + len(e.metadata) + 16 + 5*binary.MaxVarintLen64
	}
	b := append(make([]byte, 0, n), kindCommit)
	b = appendStr(b, protocolType)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for _, e := range entries {
		b = appendOffset(b, e)
	}
	return b
}

func deletePayload(parts []tp) []byte {
	b := []byte{kindDelete}
	b = binary.AppendUvarint(b, uint64(len(parts)))
	for _, p := range parts {
		b = appendStr(b, p.topic)
		b = binary.AppendVarint(b, int64(p.partition))
	}
	return b
}

func deleteGroupPayload() []byte { return []byte{kindDeleteGroup} }

func purgePayload(topic string, id [16]byte) []byte {
	b := []byte{kindPurgeTopic}
	b = appendStr(b, topic)
	return append(b, id[:]...)
}

func emptySincePayload(ms int64) []byte { return binary.AppendVarint([]byte{kindEmptySince}, ms) }

func groupTypePayload(consumer bool) []byte {
	if consumer {
		return []byte{kindGroupType, 1}
	}
	return []byte{kindGroupType, 0}
}

// frame wraps payload in its header.
func frame(payload []byte) []byte { return appendFrame(nil, payload) }

func appendFrame(b, payload []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(payload, castagnoli))
	return append(b, payload...)
}

// writeSnapshot writes d's snapshot (header and parts) to w at offset 0 and returns its size.
// It holds one part in memory at a time, whatever the state's size.
func writeSnapshot(w io.WriterAt, groupID string, epoch int32, d *durable) (int64, error) {
	pending := pendingCount(d.txn)
	version := byte(snapshotVersion)
	if pending == 0 {
		version = snapshotVersionNoTxn
	}
	h := []byte{kindSnapshot, version}
	h = appendStr(h, groupID)
	h = binary.AppendVarint(h, int64(epoch))
	h = appendStr(h, d.protocolType)
	h = binary.AppendVarint(h, d.emptySinceMs)
	h = append(h, groupTypeByte(d.consumer))
	h = binary.AppendUvarint(h, uint64(len(d.offsets)))
	if version >= 4 {
		h = binary.AppendUvarint(h, uint64(pending))
	}
	var off int64
	out := appendFrame(nil, h)
	var body []byte // offsets of the part being filled
	n := 0
	partKind := kindSnapshotPart
	flush := func() error {
		if n > 0 {
			p := binary.AppendUvarint([]byte{partKind}, uint64(n))
			if len(p)+len(body) > maxFrame {
				return fmt.Errorf("snapshot part of %d bytes exceeds the %d-byte frame limit", len(p)+len(body), maxFrame)
			}
			out = binary.BigEndian.AppendUint32(out, uint32(len(p)+len(body)))
			out = binary.BigEndian.AppendUint32(out, crc32.Update(crc32.Checksum(p, castagnoli), castagnoli, body))
			out = append(append(out, p...), body...)
		}
		if _, err := w.WriteAt(out, off); err != nil {
			return err
		}
		off += int64(len(out))
		out, body, n = out[:0], body[:0], 0
		return nil
	}
	add := func(entry func([]byte) []byte) error {
		before := len(body)
		body = entry(body)
		if n > 0 && len(body) > maxFrame-16 {
			// This offset does not fit beside the others: it opens the next part.
			entry := bytes.Clone(body[before:])
			body = body[:before]
			if err := flush(); err != nil {
				return err
			}
			body = append(body, entry...)
		}
		n++
		if len(body) >= snapshotPartBytes {
			return flush()
		}
		return nil
	}
	for k, c := range d.offsets {
		if err := add(func(b []byte) []byte { return appendOffset(b, offsetEntry{k, c}) }); err != nil {
			return 0, err
		}
	}
	if err := flush(); err != nil {
		return 0, err
	}
	// The pending offsets open parts of their own, after the committed ones.
	partKind = kindSnapshotTxnPart
	for pid, p := range d.txn {
		for k, po := range p.offsets {
			if err := add(func(b []byte) []byte { return appendPending(b, pid, p.epoch, k, po) }); err != nil {
				return 0, err
			}
		}
	}
	if err := flush(); err != nil {
		return 0, err
	}
	return off, nil
}

func groupTypeByte(consumer bool) byte {
	if consumer {
		return 1
	}
	return 0
}

// encodeSnapshot is writeSnapshot into memory.
func encodeSnapshot(groupID string, epoch int32, d *durable) []byte {
	var b memFile
	if _, err := writeSnapshot(&b, groupID, epoch, d); err != nil {
		panic(err) // only a single offset over maxFrame; callers encode states they built
	}
	return b.b
}

// memFile is an io.WriterAt over a growing slice.
type memFile struct{ b []byte }

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if need := int(off) + len(p); need > len(m.b) {
		m.b = append(m.b, make([]byte, need-len(m.b))...)
	}
	return copy(m.b[off:], p), nil
}

// ---- reading ----

// frameReader reads the frames of the first size bytes of a file in order, holding one window
// of the file at a time: readChunk bytes, or the frame being read if it is larger.
type frameReader struct {
	src    io.ReaderAt
	size   int64
	off    int64  // file offset of the next frame
	buf    []byte // the window
	bufOff int64  // file offset of buf[0]
}

// errEnd: no whole, checking frame starts at the reader's offset (the end, or a torn tail).
var errEnd = errors.New("end of frames")

// next returns the next frame's payload, valid until the next call. At the end of the file, or
// at a frame that does not check, it returns errEnd (and stays there); a checked frame longer
// than maxFrame is errCorrupt; anything else is a read error.
func (fr *frameReader) next() ([]byte, error) {
	left := fr.size - fr.off
	if left < frameHeaderSize {
		return nil, errEnd
	}
	h, err := fr.window(fr.off, frameHeaderSize)
	if err != nil {
		return nil, err
	}
	n := int64(binary.BigEndian.Uint32(h))
	sum := binary.BigEndian.Uint32(h[4:])
	if n == 0 || n > left-frameHeaderSize {
		return nil, errEnd // preallocated zeros, or a frame cut short
	}
	if n > maxFrame {
		checks, err := fr.checks(fr.off+frameHeaderSize, n, sum)
		if err != nil {
			return nil, err
		}
		if checks {
			return nil, fmt.Errorf("%w: the frame at byte %d is %d bytes, over the %d-byte limit, and its CRC checks", errCorrupt, fr.off, n, maxFrame)
		}
		return nil, errEnd
	}
	b, err := fr.window(fr.off, frameHeaderSize+int(n))
	if err != nil {
		return nil, err
	}
	payload := b[frameHeaderSize:]
	if crc32.Checksum(payload, castagnoli) != sum {
		return nil, errEnd
	}
	fr.off += frameHeaderSize + n
	return payload, nil
}

// window returns the file's bytes [off, off+n), which the caller knows lie below size.
func (fr *frameReader) window(off int64, n int) ([]byte, error) {
	if off >= fr.bufOff && off+int64(n) <= fr.bufOff+int64(len(fr.buf)) {
		return fr.buf[off-fr.bufOff:][:n], nil
	}
	want := int(min(int64(max(n, readChunk)), fr.size-off))
	if cap(fr.buf) < want {
		fr.buf = make([]byte, want)
	}
	fr.buf = fr.buf[:want]
	got, err := fr.src.ReadAt(fr.buf, off)
	if got < n {
		fr.buf, fr.bufOff = fr.buf[:0], 0
		if err == nil || errors.Is(err, io.EOF) {
			// The file is shorter than when it was measured: its owner cut a tail it had not
			// acknowledged. What is gone ends the file.
			return nil, errEnd
		}
		return nil, err
	}
	fr.buf, fr.bufOff = fr.buf[:got], off
	return fr.buf[:n], nil
}

// checks reports whether the n bytes at off have CRC sum, reading them a chunk at a time.
func (fr *frameReader) checks(off, n int64, sum uint32) (bool, error) {
	chunk := make([]byte, readChunk)
	var crc uint32
	for n > 0 {
		c := chunk[:min(n, int64(len(chunk)))]
		got, err := fr.src.ReadAt(c, off)
		if got < len(c) {
			if err == nil || errors.Is(err, io.EOF) {
				return false, nil
			}
			return false, err
		}
		crc = crc32.Update(crc, castagnoli, c)
		off, n = off+int64(len(c)), n-int64(len(c))
	}
	return crc == sum, nil
}

// parsedFile is what the loader learns from one offsets file.
type parsedFile struct {
	groupID string
	epoch   int32
	state   *durable
	snapEnd int64 // bytes of the snapshot frames
	valid   int64 // bytes of whole, checking frames from the start; a torn tail follows
}

// readOffsets reads the first size bytes of an offsets file from src, streaming: it holds the
// state and one frame. It returns errIncomplete when the snapshot is not complete (the file
// may be skipped: its writer never served), an error wrapping errCorrupt when the file checks
// but cannot be used — a frame over the limit, an unknown snapshot version or frame kind (a
// newer paddock wrote it; skipping it could lose acknowledged commits), a body that does not
// decode — and read errors as they are. The first change frame that does not check ends the
// file; valid says where.
func readOffsets(src io.ReaderAt, size int64) (*parsedFile, error) {
	fr := &frameReader{src: src, size: size}
	dec := &decoder{topics: map[string]string{}}
	pf, err := readSnapshot(fr, dec)
	if err != nil {
		return nil, err
	}
	pf.snapEnd = fr.off
	for {
		at := fr.off
		payload, err := fr.next()
		if errors.Is(err, errEnd) {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := dec.apply(payload); err != nil {
			return nil, fmt.Errorf("%w: frame at byte %d: %w", errCorrupt, at, err)
		}
	}
	pf.valid = fr.off
	return pf, nil
}

// parseFile is readOffsets over bytes in memory.
func parseFile(b []byte) (*parsedFile, error) { return readOffsets(bytes.NewReader(b), int64(len(b))) }

func readSnapshot(fr *frameReader, dec *decoder) (*parsedFile, error) {
	payload, err := fr.next()
	if errors.Is(err, errEnd) {
		return nil, errIncomplete
	}
	if err != nil {
		return nil, err
	}
	if len(payload) < 2 || payload[0] != kindSnapshot {
		// Only a snapshot ever starts a file: these bytes are not the start of one that was
		// written whole (a writer's first, torn attempt can end in anything).
		return nil, errIncomplete
	}
	version := payload[1]
	if version < 1 || version > snapshotVersion {
		return nil, fmt.Errorf("%w: snapshot version %d: this coordinator reads versions 1 to %d", errCorrupt, version, snapshotVersion)
	}
	r := reader{b: payload[2:]}
	pf := &parsedFile{groupID: r.str()}
	epoch := r.varint()
	protocolType := r.str()
	var emptySince int64
	if version >= 2 {
		emptySince = r.varint()
	}
	consumer := false
	if version >= 3 {
		consumer = r.groupType()
	}
	var total, pending uint64
	if version == 1 {
		total = uint64(r.count(minOffsetEntry)) // the offsets are in this frame
	} else {
		total = r.uvarint()
	}
	if version >= 4 {
		if pending = r.uvarint(); r.err == nil && pending == 0 {
			r.fail("pending offset count") // version 4 is written only with pending offsets
		}
	}
	if r.err == nil && version >= 2 && (total > uint64(fr.size/minOffsetEntry) || pending > uint64(fr.size/minPendingEntry)) {
		// More offsets than the file could hold: the header checks, so a writer wrote it, and
		// died (or its write was torn) before the parts — an incomplete file, which never
		// served, not a corrupt one (which would make the group unloadable for good).
		return nil, errIncomplete
	}
	dec.d = &durable{protocolType: protocolType, consumer: consumer, emptySinceMs: emptySince,
		offsets: make(map[tp]committed, int(min(total, 1<<20))), txn: map[int64]*pendingTxn{}}
	pf.state = dec.d
	if version == 1 {
		dec.offsets(&r, int(total), false)
	}
	if err := r.done(); err != nil {
		return nil, fmt.Errorf("%w: snapshot header: %w", errCorrupt, err)
	}
	if epoch < 0 || epoch > 1<<31-1 {
		return nil, fmt.Errorf("%w: snapshot epoch %d out of range", errCorrupt, epoch)
	}
	pf.epoch = int32(epoch)
	if version == 1 {
		return pf, nil
	}
	for have := uint64(0); have < total; {
		at := fr.off
		payload, err := fr.next()
		if errors.Is(err, errEnd) {
			return nil, errIncomplete
		}
		if err != nil {
			return nil, err
		}
		if payload[0] != kindSnapshotPart {
			return nil, fmt.Errorf("%w: frame at byte %d: kind %d inside a snapshot of %d offsets (%d read)", errCorrupt, at, payload[0], total, have)
		}
		r := reader{b: payload[1:]}
		n := r.count(minOffsetEntry)
		if r.err == nil && have+uint64(n) > total {
			r.fail("snapshot part count")
		}
		dec.offsets(&r, n, true)
		if err := r.done(); err != nil {
			return nil, fmt.Errorf("%w: snapshot part at byte %d: %w", errCorrupt, at, err)
		}
		have += uint64(n)
	}
	for have := uint64(0); have < pending; {
		at := fr.off
		payload, err := fr.next()
		if errors.Is(err, errEnd) {
			return nil, errIncomplete
		}
		if err != nil {
			return nil, err
		}
		if payload[0] != kindSnapshotTxnPart {
			return nil, fmt.Errorf("%w: frame at byte %d: kind %d inside a snapshot of %d pending offsets (%d read)", errCorrupt, at, payload[0], pending, have)
		}
		r := reader{b: payload[1:]}
		n := r.count(minPendingEntry)
		if r.err == nil && have+uint64(n) > pending {
			r.fail("snapshot pending part count")
		}
		dec.pendingOffsets(&r, n)
		if err := r.done(); err != nil {
			return nil, fmt.Errorf("%w: snapshot pending part at byte %d: %w", errCorrupt, at, err)
		}
		have += uint64(n)
	}
	return pf, nil
}

// decoder replays frames onto a state. It interns topic names and keeps a partition's
// metadata string when a frame repeats it, so replaying many commits of the same partitions
// allocates little beyond the state itself. A frame is applied as it is decoded: one that
// does not decode fails the whole load, so what it half applied is never used.
type decoder struct {
	d      *durable
	topics map[string]string
	// track: offsets records the partitions it decodes in touched.
	track   bool
	touched []tp
}

func (dec *decoder) topic(b []byte) string {
	if s, ok := dec.topics[string(b)]; ok {
		return s
	}
	s := string(b)
	dec.topics[s] = s
	return s
}

// offsets decodes n offsets (v2 ones carry an expiry) into the state.
func (dec *decoder) offsets(r *reader, n int, v2 bool) {
	for range n {
		var e offsetEntry
		e.topic = dec.topic(r.bytes())
		e.partition = r.int32()
		e.topicID = r.id()
		e.offset = r.varint()
		e.leaderEpoch = r.int32()
		meta := r.bytes()
		if old, ok := dec.d.offsets[e.tp]; ok && old.metadata == string(meta) {
			e.metadata = old.metadata
		} else {
			e.metadata = string(meta)
		}
		e.commitMs = r.varint()
		if v2 {
			e.expireMs = r.varint()
		}
		if r.err != nil {
			return
		}
		dec.d.offsets[e.tp] = e.committed
		if dec.track {
			dec.touched = append(dec.touched, e.tp)
		}
	}
}

// apply replays one change frame's payload onto dec.d.
func (dec *decoder) apply(payload []byte) error {
	d := dec.d
	r := reader{b: payload[1:]}
	switch payload[0] {
	case kindCommit, kindCommitV1:
		if pt := r.str(); pt != "" {
			d.protocolType = pt
		}
		dec.touched, dec.track = dec.touched[:0], len(d.txn) > 0
		dec.offsets(&r, r.count(minOffsetEntry), payload[0] == kindCommit)
		dec.track = false
		if err := r.done(); err != nil {
			return fmt.Errorf("commit frame: %w", err)
		}
		// A plain commit written after a pending transactional offset wins over it.
		markStale(d.txn, dec.touched)
	case kindDelete:
		parts := r.partitions()
		if err := r.done(); err != nil {
			return fmt.Errorf("delete frame: %w", err)
		}
		for _, p := range parts {
			delete(d.offsets, p)
		}
		dropPending(d.txn, parts)
	case kindDeleteGroup:
		if err := r.done(); err != nil {
			return fmt.Errorf("delete-group frame: %w", err)
		}
		d.protocolType, d.consumer = "", false
		clear(d.offsets)
		clear(d.txn)
	case kindPurgeTopic:
		topic := r.str()
		id := r.id()
		if err := r.done(); err != nil {
			return fmt.Errorf("purge frame: %w", err)
		}
		d.purge(topic, id)
	case kindEmptySince:
		ms := r.varint()
		if err := r.done(); err != nil {
			return fmt.Errorf("empty-since frame: %w", err)
		}
		d.emptySinceMs = ms
	case kindGroupType:
		consumer := r.groupType()
		if err := r.done(); err != nil {
			return fmt.Errorf("group-type frame: %w", err)
		}
		d.consumer = consumer
	case kindTxnCommit:
		pid, epoch, seq, entries := dec.txnCommit(&r)
		if err := r.done(); err != nil {
			return fmt.Errorf("transactional commit frame: %w", err)
		}
		d.txnSeq = applyTxnCommit(d.txn, d.txnSeq, pid, epoch, seq, entries)
	case kindTxnComplete:
		pid, commit := txnCompleteBody(&r)
		if err := r.done(); err != nil {
			return fmt.Errorf("transaction completion frame: %w", err)
		}
		completeTxn(d.offsets, d.txn, pid, commit)
	default:
		return fmt.Errorf("unknown frame kind %d", payload[0])
	}
	return nil
}

// reader decodes a frame body. It never trusts a length it has not checked against what is
// left; the first problem sticks in err and every later read returns a zero value.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("truncated or malformed %s", what)
	}
	r.b = nil
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int32() int32 {
	v := r.varint()
	if v < -1<<31 || v > 1<<31-1 {
		r.fail("int32")
		return 0
	}
	return int32(v)
}

// bytes reads a length-prefixed string's bytes, aliasing the frame.
func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("string")
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *reader) str() string { return string(r.bytes()) }

// groupType reads a group type byte: 0 classic, 1 consumer.
func (r *reader) groupType() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) < 1 || r.b[0] > 1 {
		r.fail("group type")
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

func (r *reader) id() (id [16]byte) {
	if r.err != nil {
		return id
	}
	if len(r.b) < 16 {
		r.fail("topic id")
		return id
	}
	copy(id[:], r.b)
	r.b = r.b[16:]
	return id
}

// count reads an element count and checks that at least min bytes per element are left, so a
// corrupt count cannot make the decoder allocate more than the frame could hold.
func (r *reader) count(minElem int) int {
	n := r.uvarint()
	if r.err != nil {
		return 0
	}
	if n > uint64(len(r.b)/minElem) {
		r.fail("count")
		return 0
	}
	return int(n)
}

// An offset entry is at least: topic length (1), partition (1), id (16), offset (1), leader
// epoch (1), metadata length (1), commit time (1).
const minOffsetEntry = 22

func (r *reader) partitions() []tp {
	n := r.count(2)
	out := make([]tp, 0, n)
	for range n {
		p := tp{topic: r.str(), partition: r.int32()}
		if r.err != nil {
			return nil
		}
		out = append(out, p)
	}
	return out
}

// done reports the first decoding problem, or trailing bytes the body did not account for.
func (r *reader) done() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%d trailing bytes", len(r.b))
	}
	return nil
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendOffset appends an offset in the current (v2) form: the v1 fields and the expiry.
func appendOffset(b []byte, e offsetEntry) []byte {
	b = appendOffsetV1(b, e)
	return binary.AppendVarint(b, e.expireMs)
}

func appendOffsetV1(b []byte, e offsetEntry) []byte {
	b = appendStr(b, e.topic)
	b = binary.AppendVarint(b, int64(e.partition))
	b = append(b, e.topicID[:]...)
	b = binary.AppendVarint(b, e.offset)
	b = binary.AppendVarint(b, int64(e.leaderEpoch))
	b = appendStr(b, e.metadata)
	return binary.AppendVarint(b, e.commitMs)
}
