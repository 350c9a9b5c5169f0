package storage

import (
	"crypto/md5"
	"encoding/binary"
)

// offsetMap is the cleaner's map from a key to the offset of its latest record in the dirty
// section (Apache's SkimpyOffsetMap): a fixed table of slots, each a 16-byte MD5 of the key and
// the offset, probed linearly. Its memory is the buffer it is given and nothing more, however
// many keys the log holds: a pass maps as much of the dirty section as fits and cleans up to
// there (docs/compaction.md "Bounded").
//
// MD5 is a hash here, not a defence: two keys with one digest would make the older key's
// latest record look superseded. At 2^-128 per pair that is far below the disk's own error rate.
type offsetMap struct {
	slots []byte // slotSize bytes each: digest, then offset+1 (0: empty)
	n     int    // slots in use
	limit int    // slots the map fills before it is full (loadFactor of them)
}

const (
	digestSize = md5.Size
	slotSize   = digestSize + 8
	// loadFactor is log.cleaner.io.buffer.load.factor (0.9): linear probing stays short.
	loadFactor = 0.9
)

// newOffsetMap makes a map in bufferBytes of memory (at least two slots). One slot always
// stays empty, so a probe always ends.
func newOffsetMap(bufferBytes int64) *offsetMap {
	slots := max(bufferBytes/slotSize, 2)
	return &offsetMap{slots: make([]byte, slots*slotSize), limit: max(min(int(float64(slots)*loadFactor), int(slots)-1), 1)}
}

func (m *offsetMap) capacity() int { return len(m.slots) / slotSize }

// room is how many more keys the map takes before it is full.
func (m *offsetMap) room() int { return m.limit - m.n }

func (m *offsetMap) reset() {
	clear(m.slots)
	m.n = 0
}

// find returns the slot of digest d: the one holding it, or the empty one where it goes.
func (m *offsetMap) find(d *[digestSize]byte) []byte {
	c := m.capacity()
	i := int(binary.BigEndian.Uint64(d[:8]) % uint64(c))
	for {
		s := m.slots[i*slotSize : (i+1)*slotSize]
		if binary.BigEndian.Uint64(s[digestSize:]) == 0 || string(s[:digestSize]) == string(d[:]) {
			return s
		}
		i++
		if i == c {
			i = 0
		}
	}
}

// put records offset as key's latest; the caller checks room first (a full map is never
// written: the pass stops mapping before it).
func (m *offsetMap) put(key []byte, offset int64) {
	d := md5.Sum(key)
	s := m.find(&d)
	if binary.BigEndian.Uint64(s[digestSize:]) == 0 {
		copy(s, d[:])
		m.n++
	}
	binary.BigEndian.PutUint64(s[digestSize:], uint64(offset)+1)
}

// get is key's latest mapped offset.
func (m *offsetMap) get(key []byte) (int64, bool) {
	d := md5.Sum(key)
	s := m.find(&d)
	v := binary.BigEndian.Uint64(s[digestSize:])
	return int64(v) - 1, v != 0
}
