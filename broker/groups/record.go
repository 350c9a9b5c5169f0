package groups

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
)

// The offsets file (docs/groups.md "Files"). A file is a sequence of frames:
//
//	length  uint32 big-endian   payload bytes
//	crc     uint32 big-endian   CRC-32C (Castagnoli) of the payload
//	payload kind byte, then the kind's body
//
// The first frame of every file is a snapshot: the complete committed state the claiming
// coordinator inherited. Every later frame is one change, written and fsynced before the
// change is acknowledged. A file whose snapshot frame does not check is incomplete (its
// writer died while creating it, before it served anything); a frame that does not check
// after a valid snapshot ends the file (a torn tail: nothing after it was acknowledged,
// because each acknowledged frame was whole and durable before the next was written).
//
// Bodies use unsigned varints for lengths and counts, zig-zag varints for signed numbers,
// strings as length + bytes, topic ids as 16 raw bytes.
const (
	frameHeaderSize = 8
	// maxFrame bounds one frame; a length beyond it is corruption (or a commit too large to
	// store, answered INVALID_COMMIT_OFFSET_SIZE before anything is written).
	maxFrame = 64 << 20

	kindSnapshot    byte = 1 // version, group id, epoch, protocol type, offsets
	kindCommit      byte = 2 // protocol type, offsets (set)
	kindDelete      byte = 3 // partitions (removed)
	kindDeleteGroup byte = 4 // every offset removed, protocol type cleared
	kindPurgeTopic  byte = 5 // topic name and id: offsets of that incarnation removed

	snapshotVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errIncomplete: the file's first frame is not a whole, checking snapshot.
var errIncomplete = errors.New("offsets file has no complete snapshot")

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
}

// offsetEntry is a committed offset with its partition, as carried in frames.
type offsetEntry struct {
	tp
	committed
}

// durable is the part of a group that survives a coordinator move.
type durable struct {
	protocolType string // "" until a commit from a group with members recorded one
	offsets      map[tp]committed
}

func newDurable() *durable { return &durable{offsets: map[tp]committed{}} }

func (d *durable) clone() *durable {
	return &durable{protocolType: d.protocolType, offsets: maps.Clone(d.offsets)}
}

// apply replays one change frame's payload onto d.
func (d *durable) apply(payload []byte) error {
	if len(payload) == 0 {
		return errors.New("empty frame")
	}
	r := reader{b: payload[1:]}
	switch payload[0] {
	case kindCommit:
		pt := r.str()
		entries := r.offsets()
		if err := r.done(); err != nil {
			return fmt.Errorf("commit frame: %w", err)
		}
		if pt != "" {
			d.protocolType = pt
		}
		for _, e := range entries {
			d.offsets[e.tp] = e.committed
		}
	case kindDelete:
		parts := r.partitions()
		if err := r.done(); err != nil {
			return fmt.Errorf("delete frame: %w", err)
		}
		for _, p := range parts {
			delete(d.offsets, p)
		}
	case kindDeleteGroup:
		if err := r.done(); err != nil {
			return fmt.Errorf("delete-group frame: %w", err)
		}
		d.protocolType = ""
		clear(d.offsets)
	case kindPurgeTopic:
		topic := r.str()
		id := r.id()
		if err := r.done(); err != nil {
			return fmt.Errorf("purge frame: %w", err)
		}
		d.purge(topic, id)
	default:
		return fmt.Errorf("unknown frame kind %d", payload[0])
	}
	return nil
}

// purge removes the offsets of topic's incarnation id: those stored with that id, or with no
// id. A zero id removes every offset of the topic name.
func (d *durable) purge(topic string, id [16]byte) int {
	n := 0
	for k, c := range d.offsets {
		if k.topic == topic && (id == [16]byte{} || c.topicID == [16]byte{} || c.topicID == id) {
			delete(d.offsets, k)
			n++
		}
	}
	return n
}

// Payload builders. Each returns the payload only; frame() adds length and CRC.

func snapshotPayload(groupID string, epoch int32, d *durable) []byte {
	b := []byte{kindSnapshot, snapshotVersion}
	b = appendStr(b, groupID)
	b = binary.AppendVarint(b, int64(epoch))
	b = appendStr(b, d.protocolType)
	b = binary.AppendUvarint(b, uint64(len(d.offsets)))
	for k, c := range d.offsets {
		b = appendOffset(b, offsetEntry{k, c})
	}
	return b
}

func commitPayload(protocolType string, entries []offsetEntry) []byte {
	b := []byte{kindCommit}
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

// frame wraps payload in its header.
func frame(payload []byte) []byte {
	b := make([]byte, frameHeaderSize, frameHeaderSize+len(payload))
	binary.BigEndian.PutUint32(b[0:], uint32(len(payload)))
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(payload, castagnoli))
	return append(b, payload...)
}

// nextFrame reads the frame at the start of b. ok is false when b does not start with a
// whole, checking frame (short, over-long, or CRC mismatch).
func nextFrame(b []byte) (payload []byte, size int, ok bool) {
	if len(b) < frameHeaderSize {
		return nil, 0, false
	}
	n := binary.BigEndian.Uint32(b[0:])
	if n == 0 || n > maxFrame || uint64(n) > uint64(len(b)-frameHeaderSize) {
		return nil, 0, false
	}
	payload = b[frameHeaderSize : frameHeaderSize+int(n)]
	if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return nil, 0, false
	}
	return payload, frameHeaderSize + int(n), true
}

// parsedFile is what the loader learns from one offsets file.
type parsedFile struct {
	groupID string
	epoch   int32
	state   *durable
	valid   int64 // bytes of whole, checking frames from the start; a torn tail follows
}

// parseFile reads an offsets file. It returns errIncomplete when the snapshot frame does not
// check (the file may be skipped: its writer never served), and another error when the file
// checks but cannot be used — an unknown snapshot version or frame kind (a newer paddock
// wrote it; skipping it could lose acknowledged commits) or a body that does not decode.
// The first frame that does not check ends the file; valid says where.
func parseFile(b []byte) (*parsedFile, error) {
	payload, size, ok := nextFrame(b)
	if !ok || len(payload) < 2 || payload[0] != kindSnapshot {
		return nil, errIncomplete
	}
	if payload[1] != snapshotVersion {
		return nil, fmt.Errorf("snapshot version %d: this coordinator reads version %d", payload[1], snapshotVersion)
	}
	r := reader{b: payload[2:]}
	pf := &parsedFile{groupID: r.str(), state: newDurable()}
	epoch := r.varint()
	pf.state.protocolType = r.str()
	for _, e := range r.offsets() {
		pf.state.offsets[e.tp] = e.committed
	}
	if err := r.done(); err != nil {
		return nil, fmt.Errorf("snapshot frame: %w", err)
	}
	if epoch < 0 || epoch > 1<<31-1 {
		return nil, fmt.Errorf("snapshot epoch %d out of range", epoch)
	}
	pf.epoch = int32(epoch)
	off := size
	for {
		payload, size, ok := nextFrame(b[off:])
		if !ok {
			break
		}
		if err := pf.state.apply(payload); err != nil {
			return nil, fmt.Errorf("frame at %d: %w", off, err)
		}
		off += size
	}
	pf.valid = int64(off)
	return pf, nil
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

func (r *reader) str() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.fail("string")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
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

func (r *reader) offsets() []offsetEntry {
	n := r.count(minOffsetEntry)
	out := make([]offsetEntry, 0, n)
	for range n {
		var e offsetEntry
		e.topic = r.str()
		e.partition = r.int32()
		e.topicID = r.id()
		e.offset = r.varint()
		e.leaderEpoch = r.int32()
		e.metadata = r.str()
		e.commitMs = r.varint()
		if r.err != nil {
			return nil
		}
		out = append(out, e)
	}
	return out
}

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

func appendOffset(b []byte, e offsetEntry) []byte {
	b = appendStr(b, e.topic)
	b = binary.AppendVarint(b, int64(e.partition))
	b = append(b, e.topicID[:]...)
	b = binary.AppendVarint(b, e.offset)
	b = binary.AppendVarint(b, int64(e.leaderEpoch))
	b = appendStr(b, e.metadata)
	return binary.AppendVarint(b, e.commitMs)
}
