package storage

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// validSegment is a few stored batches at offsets from 0, as a seed.
func validSegment() []byte {
	var b []byte
	off := int64(0)
	for i := range 3 {
		batch := makeBatch(plain(1+i, byte(i)))
		b = append(b, stored(batch, off, 1)...)
		off += int64(1 + i)
	}
	return b
}

// FuzzScanBatches: the recovery scan over arbitrary bytes never panics, never accepts a
// batch that does not check, never reads past the data, and its accepted prefix is stable:
// rescanning it, or scanning it with more bytes after it, accepts the same batches.
func FuzzScanBatches(f *testing.F) {
	v := validSegment()
	f.Add(v, int64(100))
	f.Add(v[:len(v)-5], int64(100))
	f.Add(v, int64(3))
	f.Add(append(bytes.Clone(v), make([]byte, 80)...), int64(100))
	f.Fuzz(func(t *testing.T, data []byte, bound int64) {
		if bound < 0 {
			bound = -bound
		}
		var accepted []batchHeader
		end, err := scanBatches(context.Background(), bytes.NewReader(data), 0, int64(len(data)), 0, bound, true, false, func(h batchHeader, pos int64) {
			accepted = append(accepted, h)
		})
		if err != nil {
			t.Fatalf("I/O error from a bytes.Reader: %v", err)
		}
		if end.pos < 0 || end.pos > int64(len(data)) {
			t.Fatalf("scan ended at byte %d of %d", end.pos, len(data))
		}
		if end.refused == nil && end.pos != int64(len(data)) && end.next < bound {
			t.Fatalf("clean stop at %d of %d below the bound", end.pos, len(data))
		}
		pos, next := int64(0), int64(0)
		for _, h := range accepted {
			b := data[pos : pos+h.size()]
			if h.BaseOffset != next || batchCRC(b) != h.CRC || h.lastOffset() >= bound {
				t.Fatalf("accepted a batch that does not check at byte %d", pos)
			}
			pos, next = pos+h.size(), h.nextOffset()
		}
		if pos != end.pos || next != end.next {
			t.Fatalf("visited up to %d/%d, reported %d/%d", pos, next, end.pos, end.next)
		}
		prefix := data[:end.pos]
		again, _ := scanBatches(context.Background(), bytes.NewReader(prefix), 0, int64(len(prefix)), 0, bound, true, false, nil)
		if again.pos != end.pos || again.next != end.next || again.refused != nil {
			t.Fatalf("rescanning the accepted prefix: %+v, first scan %+v", again, end)
		}
		longer := append(bytes.Clone(prefix), data...)
		more, _ := scanBatches(context.Background(), bytes.NewReader(longer), 0, int64(len(longer)), 0, bound, true, false, nil)
		if more.pos < end.pos {
			t.Fatalf("bytes after the accepted prefix shrank it from %d to %d", end.pos, more.pos)
		}
	})
}

// FuzzTakeoverRecoversAnySegment: whatever a crashed leader's last segment holds, a takeover
// succeeds, serves exactly the valid batches, and leaves the file's bytes as they were (no
// destructive step: what follows the last valid batch is simply never read); a batch appended
// next follows them, in this log and the next one.
func FuzzTakeoverRecoversAnySegment(f *testing.F) {
	v := validSegment()
	f.Add(v)
	f.Add(v[:len(v)-1])
	flipped := bytes.Clone(v)
	flipped[len(flipped)/2] ^= 0x10
	f.Add(flipped)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := filepath.Join(t.TempDir(), "p")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		seg := filepath.Join(dir, segmentName(0, 1))
		if err := os.WriteFile(seg, data, 0o644); err != nil {
			t.Fatal(err)
		}
		want, _ := scanBatches(context.Background(), bytes.NewReader(data), 0, int64(len(data)), 0, 1<<62, true, false, nil)
		l, err := Open(dir, testConfig(), Options{FS: noSyncFS{OSFS{}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Takeover(context.Background(), 2); err != nil {
			t.Fatalf("takeover over arbitrary segment bytes: %v", err)
		}
		defer func() { _ = l.Relinquish(context.Background()) }()
		off, _ := l.Offsets()
		if off.LogEnd != want.next || off.HighWatermark != want.next {
			t.Fatalf("log end %d, want %d", off.LogEnd, want.next)
		}
		if got := readAll(t, l); !bytes.Equal(got, data[:want.pos]) {
			t.Fatalf("served %d bytes, want the %d valid ones", len(got), want.pos)
		}
		if after, _ := os.ReadFile(seg); !bytes.Equal(after, data) {
			t.Fatalf("the takeover changed the segment's bytes (%d before, %d after)", len(data), len(after))
		}
		next := makeBatch(plain(1, 9))
		if res := mustAppend(t, l, bytes.Clone(next), AcksAll); res.BaseOffset != want.next {
			t.Fatalf("the next append went to %d, want %d", res.BaseOffset, want.next)
		}
		relinquish(t, l)
		l3 := openLog(t, dir, 3, testConfig(), Options{FS: noSyncFS{OSFS{}}})
		wantAll := append(bytes.Clone(data[:want.pos]), stored(next, want.next, 2)...)
		if got := readAll(t, l3); !bytes.Equal(got, wantAll) {
			t.Fatalf("the next takeover served %d bytes, want %d", len(got), len(wantAll))
		}
	})
}

// FuzzDecodeProducerSnapshot: a snapshot file's bytes never panic the decoder, and whatever
// it accepts re-encodes to the same state.
func FuzzDecodeProducerSnapshot(f *testing.F) {
	s := newProducerState()
	s.apply(hdr(1, 3, 0, 2, 10))
	s.apply(hdr(2, 0, 4, 1, 12))
	f.Add(encodeSnapshot(checkpoint{offset: 13, segBase: 10, segEpoch: 2, pos: 99}, s))
	f.Add(encodeSnapshot(checkpoint{}, newProducerState()))
	// With transactions: one open, one aborted (an aborted-transaction index entry).
	th := hdr(3, 0, 0, 1, 14)
	th.Attributes = attrTransactional
	s.apply(th)
	th = hdr(4, 0, 0, 1, 15)
	th.Attributes = attrTransactional
	s.apply(th)
	mk := hdr(4, 0, -1, 1, 16)
	mk.Attributes = attrTransactional | attrControl
	s.apply(mk)
	f.Add(encodeSnapshot(checkpoint{offset: 17, segBase: 10, segEpoch: 2, pos: 300}, s))
	f.Fuzz(func(t *testing.T, data []byte) {
		cp, st, err := decodeSnapshot(data)
		if err != nil {
			return
		}
		cp2, st2, err := decodeSnapshot(encodeSnapshot(cp, st))
		if err != nil || cp2 != cp || !reflect.DeepEqual(st2.m, st.m) || !reflect.DeepEqual(st2.open, st.open) || !slices.Equal(st2.aborted, st.aborted) {
			t.Fatalf("accepted snapshot does not round-trip: %v", err)
		}
	})
}

// FuzzDecodeIndex: an index file's bytes never panic the decoder, and an accepted index only
// ever points inside its segment, in order.
func FuzzDecodeIndex(f *testing.F) {
	x := newSegIndex(100, 64)
	pos := int64(0)
	for i := range 10 {
		h := batchHeader{BaseOffset: x.next, Length: 100, LastOffsetDelta: int32(i % 3), RecordCount: int32(i%3 + 1), MaxTimestamp: int64(1000 + i)}
		x.add(h, pos)
		pos += h.size()
	}
	f.Add(x.encode(4))
	f.Add(newSegIndex(100, 64).encode(4))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeIndex(data, 100, 4, 64, false)
		if err != nil {
			return
		}
		prev := indexEntry{offset: got.base, pos: 0}
		for _, e := range got.entries {
			if e.offset <= prev.offset || e.pos <= prev.pos || e.offset >= got.next || e.pos >= got.size {
				t.Fatalf("accepted an entry out of order or outside the segment: %+v", e)
			}
			if s, p := got.floorOffset(e.offset); s != e.offset || p != e.pos {
				t.Fatalf("lookup of an entry's own offset missed it")
			}
			prev = e
		}
		if !bytes.Equal(got.encode(4), data) {
			t.Fatal("an accepted index does not re-encode to its bytes")
		}
	})
}

// noSyncFS skips fsyncs: for tests of what is recovered, where durability across power loss
// is not the question and fsync latency would only slow the fuzzer down.
type noSyncFS struct{ FS }

func (n noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := n.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

func (noSyncFS) SyncDir(string) error { return nil }

type noSyncFile struct{ File }

func (noSyncFile) Sync() error { return nil }

// FuzzParseJournal: a claim file's bytes (header and journal, as a takeover reads its
// predecessor's) never panic the decoder, and whatever it accepts is within what a holder
// writes: a valid claim header, non-negative offsets, segments of non-negative epochs.
func FuzzParseJournal(f *testing.F) {
	h := encodeClaimHeader(claimHeader{epoch: 7, id: "0123456789abcdef0123456789abcdef", note: "host pid 1"})
	j := appendRecord(bytes.Clone(h), recTakeover, encodeTakeover(takeoverRecord{logStart: 3, roll: 40, segments: []segRef{{base: 0, epoch: 5}, {base: 20, epoch: 6}}}))
	j = appendRecord(j, recClean, encodeClean(cleanRecord{dirtyFrom: 20, segments: []segRef{{base: 0, epoch: 5, gen: cleanGen{by: 7, n: 1}}}}))
	j = appendRecord(j, recRoll, encodeOffset(60))
	j = appendRecord(j, recLogStart, encodeOffset(20))
	j = appendRecord(j, recCheckpoint, encodeOffset(75))
	f.Add(h)
	f.Add(j)
	f.Add(j[:len(j)-3])
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := parseJournal(data)
		if err != nil {
			return
		}
		if v.header.epoch < 0 || !isClaimID(v.header.id) {
			t.Fatalf("accepted a header no claim writes: %+v", v.header)
		}
		for _, s := range v.segments() {
			if s.base < 0 || s.epoch < 0 {
				t.Fatalf("accepted a segment %+v", s)
			}
		}
		for _, off := range append(slices.Clone(v.rolls), v.checkpoints...) {
			if off < 0 {
				t.Fatalf("accepted a negative offset %d", off)
			}
		}
		if v.takeover != nil && v.logStart < v.takeover.logStart {
			t.Fatalf("log start %d below the takeover's %d", v.logStart, v.takeover.logStart)
		}
	})
}
