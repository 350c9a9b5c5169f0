package storage

import (
	"encoding/binary"
	"fmt"
	"os"
)

// The journal: after its header, a claim file holds the records its holder appends, each
// fsynced before the holder acts on it (docs/storage.md, "The journal"). A later takeover
// learns from its predecessor's journal, by name, which segments the log has, where it
// starts and which checkpoints exist — nothing from a directory listing.
const (
	// recTakeover: the takeover completed its recovery and rolled: the recovered log's
	// segments in log order, its log start, and the roll point (the base of this epoch's first
	// segment). Written after the roll segment exists and before the log serves; a claim
	// without one never served, and its segments are ignored.
	recTakeover = 'T'
	// recRoll: the holder created its next segment at this base offset.
	recRoll = 'R'
	// recLogStart: the holder moved the log start (retention, DeleteRecords), written before
	// its fence check and before it deletes anything.
	recLogStart = 'L'
	// recCheckpoint: the holder wrote a producer snapshot (recovery checkpoint) at this offset.
	recCheckpoint = 'C'
	// recClean: segments the log reads in a cleaned copy (compaction), and the first offset
	// not yet cleaned. A cleaning pass records the copies it swapped in after their files are
	// durable and before its fence check; a takeover records every cleaned segment it
	// recovered, before its takeover record, so both are in the journal or neither counts.
	// Later records override earlier ones for the same segment.
	recClean = 'K'
)

// segRef names a segment: its base offset and the epoch that wrote it (and, in a journal
// view, the cleaned copy the log reads).
type segRef struct {
	base  int64
	epoch int32
	gen   cleanGen
}

// cleanRecord is a recClean record: the first dirty offset after the pass (the cleaner's
// checkpoint, Apache's cleaner-offset-checkpoint) and the cleaned copies.
type cleanRecord struct {
	dirtyFrom int64
	// horizon is the earliest delete horizon in the cleaned log (-1: none), when the next
	// pass has tombstones or markers to drop even if nothing is dirty.
	horizon  int64
	segments []segRef
}

const cleanSegRefSize = 8 + 4 + 4 + 4

func encodeClean(c cleanRecord) []byte {
	be := binary.BigEndian
	p := be.AppendUint64(nil, uint64(c.dirtyFrom))
	p = be.AppendUint64(p, uint64(c.horizon))
	p = be.AppendUint32(p, uint32(len(c.segments)))
	for _, s := range c.segments {
		p = be.AppendUint64(p, uint64(s.base))
		p = be.AppendUint32(p, uint32(s.epoch))
		p = be.AppendUint32(p, uint32(s.gen.by))
		p = be.AppendUint32(p, s.gen.n)
	}
	return p
}

func decodeClean(p []byte) (cleanRecord, error) {
	r := recordReader{b: p}
	c := cleanRecord{dirtyFrom: r.i64(), horizon: r.i64()}
	n := r.u32()
	if r.err == nil && uint64(n)*cleanSegRefSize != uint64(len(r.b)) {
		return cleanRecord{}, fmt.Errorf("%w: %d cleaned segments in %d bytes", errBadRecord, n, len(r.b))
	}
	for range n {
		c.segments = append(c.segments, segRef{base: r.i64(), epoch: r.i32(), gen: cleanGen{by: r.i32(), n: r.u32()}})
	}
	if err := r.done(); err != nil {
		return cleanRecord{}, err
	}
	if c.dirtyFrom < 0 || c.horizon < -1 {
		return cleanRecord{}, fmt.Errorf("%w: negative offset", errBadRecord)
	}
	for _, s := range c.segments {
		if s.base < 0 || s.epoch < 0 || s.gen.by < 0 || !s.gen.cleaned() {
			return cleanRecord{}, fmt.Errorf("%w: cleaned segment %d-%d", errBadRecord, s.base, s.epoch)
		}
	}
	return c, nil
}

type takeoverRecord struct {
	logStart int64
	roll     int64
	segments []segRef // the recovered log before the roll, in log order
}

func encodeTakeover(t takeoverRecord) []byte {
	be := binary.BigEndian
	p := be.AppendUint64(nil, uint64(t.logStart))
	p = be.AppendUint64(p, uint64(t.roll))
	p = be.AppendUint32(p, uint32(len(t.segments)))
	for _, s := range t.segments {
		p = be.AppendUint64(p, uint64(s.base))
		p = be.AppendUint32(p, uint32(s.epoch))
	}
	return p
}

func decodeTakeover(p []byte) (takeoverRecord, error) {
	r := recordReader{b: p}
	t := takeoverRecord{logStart: r.i64(), roll: r.i64()}
	n := r.u32()
	if r.err == nil && uint64(n)*12 != uint64(len(r.b)) {
		return takeoverRecord{}, fmt.Errorf("%w: %d segments in %d bytes", errBadRecord, n, len(r.b))
	}
	for range n {
		t.segments = append(t.segments, segRef{base: r.i64(), epoch: r.i32()})
	}
	if err := r.done(); err != nil {
		return takeoverRecord{}, err
	}
	if t.logStart < 0 || t.roll < 0 {
		return takeoverRecord{}, fmt.Errorf("%w: negative offset", errBadRecord)
	}
	for _, s := range t.segments {
		if s.base < 0 || s.epoch < 0 {
			return takeoverRecord{}, fmt.Errorf("%w: segment %d-%d", errBadRecord, s.base, s.epoch)
		}
	}
	return t, nil
}

func encodeOffset(off int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(off)) }

func decodeOffset(p []byte) (int64, error) {
	r := recordReader{b: p}
	off := r.i64()
	if err := r.done(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset", errBadRecord)
	}
	return off, nil
}

// journalView is what one claim's file says.
type journalView struct {
	header      claimHeader
	takeover    *takeoverRecord // nil: the claim never completed a takeover
	rolls       []int64         // later segments of the claim's epoch, by base offset
	logStart    int64           // the largest log start recorded (-1: none)
	checkpoints []int64         // offsets of snapshots the holder wrote
	// cleaned is the copy the log reads of each cleaned segment, by (base, epoch).
	cleaned map[segRef]cleanGen
	// dirtyFrom is the first offset the cleaner has not cleaned yet (0: never cleaned);
	// horizon the earliest delete horizon the last clean record saw (-1: none).
	dirtyFrom int64
	horizon   int64
}

// parseJournal decodes a claim file: the header, then the valid records after it (a torn
// last record and anything after it are ignored; an unknown or malformed record too).
func parseJournal(b []byte) (journalView, error) {
	h, err := decodeClaimHeader(b)
	if err != nil {
		return journalView{}, err
	}
	v := journalView{header: h, logStart: -1, horizon: -1}
	for _, rec := range splitRecords(b)[1:] {
		switch rec.kind {
		case recTakeover:
			if v.takeover != nil {
				continue // only the first counts: a holder takes over once
			}
			if t, err := decodeTakeover(rec.payload); err == nil {
				v.takeover = &t
				v.logStart = max(v.logStart, t.logStart)
			}
		case recClean:
			// A takeover writes its inherited copies just before its takeover record, so
			// these count before it too; a claim without a takeover record is ignored whole.
			c, err := decodeClean(rec.payload)
			if err != nil {
				continue
			}
			if v.cleaned == nil {
				v.cleaned = map[segRef]cleanGen{}
			}
			for _, s := range c.segments {
				v.cleaned[segRef{base: s.base, epoch: s.epoch}] = s.gen
			}
			v.dirtyFrom = max(v.dirtyFrom, c.dirtyFrom)
			v.horizon = c.horizon // each record describes the whole cleaned log
		case recRoll, recLogStart, recCheckpoint:
			off, err := decodeOffset(rec.payload)
			if err != nil || v.takeover == nil {
				continue // the holder records these only after its takeover
			}
			switch rec.kind {
			case recRoll:
				v.rolls = append(v.rolls, off)
			case recLogStart:
				v.logStart = max(v.logStart, off)
			default:
				v.checkpoints = append(v.checkpoints, off)
			}
		}
	}
	return v, nil
}

// segments is the log as this journal's holder last described it: the segments its takeover
// recovered, its roll segment, and the segments it rolled later.
func (v journalView) segments() []segRef {
	if v.takeover == nil {
		return nil
	}
	out := append([]segRef(nil), v.takeover.segments...)
	out = append(out, segRef{base: v.takeover.roll, epoch: v.header.epoch})
	for _, r := range v.rolls {
		out = append(out, segRef{base: r, epoch: v.header.epoch})
	}
	for i := range out {
		out[i].gen = v.cleaned[segRef{base: out[i].base, epoch: out[i].epoch}]
	}
	return out
}

// journal is a holder's handle on its own claim file, for appending records. It holds no
// open file between appends (only a partition's segments are kept open). It is used by the
// takeover and then by the flusher goroutine, and by a read that records a log-start move
// it found; Log.journalRecord serialises them.
type journal struct {
	fs   FS
	path string
	end  int64 // where the next record goes: after the last valid one
}

func openJournal(fsys FS, path string) (*journal, error) {
	b, err := readFile(fsys, path)
	if err != nil {
		return nil, err
	}
	end := int64(0)
	for _, r := range splitRecords(b) {
		end += int64(recordOverhead + len(r.payload))
	}
	return &journal{fs: fsys, path: path, end: end}, nil
}

// append writes one record after the last and makes it durable.
func (j *journal) append(kind byte, payload []byte) error {
	f, err := j.fs.OpenFile(j.path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	rec := appendRecord(nil, kind, payload)
	_, err = f.WriteAt(rec, j.end)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	j.end += int64(len(rec))
	return nil
}
