package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// A Section is whole record batches of one segment file, found by ReadSection but not read:
// the caller sends them from the file itself (sendfile: docs/dataplane.md, "Fetch") or reads
// them with ReadAt. The segment file stays open until Release, even if retention deletes it
// or the log stops serving meanwhile; the bytes never change, since they lie below the high
// watermark. A Section is not safe for concurrent Release.
type Section struct {
	cache *FileCache
	e     *cachedSegment // referenced until Release; nil when the section is empty
	// Pos is where the batches start in the segment file; Len is their total size.
	Pos, Len int64
	// codecs has bit 1<<c set when a batch compressed with codec c (the attributes' low three
	// bits) is in the section.
	codecs uint8
	// l, seg (nil: the active segment), logStart and offset say where the section came from,
	// so a failed ReadAt is explained as read explains one (readFailed).
	l        *Log
	seg      *segment
	logStart int64
	offset   int64
}

// Read returns whole batches starting with the one holding offset, up to maxBytes, all below
// the high watermark and from one segment, as a fresh copy (the rules are read's).
func (l *Log) Read(offset int64, maxBytes int, atLeastOne bool) (ReadResult, error) {
	return l.read(offset, maxBytes, atLeastOne, nil, ReadUncommitted)
}

// ReadSection is Read without the copy: the same batches (res.Records stays empty), as a
// Section of their segment file, which the caller must Release. sec.Len is 0 when there is
// nothing to read yet.
func (l *Log) ReadSection(offset int64, maxBytes int, atLeastOne bool) (ReadResult, *Section, error) {
	return l.readSection(offset, maxBytes, atLeastOne, ReadUncommitted)
}

// ReadSectionCommitted is ReadCommitted without the copy, as ReadSection is Read's.
func (l *Log) ReadSectionCommitted(offset int64, maxBytes int, atLeastOne bool) (ReadResult, *Section, error) {
	return l.readSection(offset, maxBytes, atLeastOne, ReadCommitted)
}

func (l *Log) readSection(offset int64, maxBytes int, atLeastOne bool, iso Isolation) (ReadResult, *Section, error) {
	sec := &Section{}
	res, err := l.read(offset, maxBytes, atLeastOne, sec, iso)
	if err != nil {
		sec.Release()
		return res, nil, err
	}
	return res, sec, nil
}

// File is the segment's open file, for a zero-copy send of [Pos, Pos+Len): nil when the file
// system is not the operating system's (a FaultFS in tests), and then only ReadAt reads it.
// It is valid until Release and must not be closed, seeked or read through its own offset
// (other readers share it): only positional reads and sendfile with an explicit offset.
func (s *Section) File() *os.File {
	if s.e == nil {
		return nil
	}
	return OSFileOf(s.e.f)
}

// OSFileOf is the operating system's file behind f: f's own when it is one of OSFS's, or what
// f's OSFile method gives (a wrapper of a File passes it on: `OSFile() *os.File`); nil
// otherwise (a FaultFS file, whose faults a sendfile would bypass).
func OSFileOf(f File) *os.File {
	if of, ok := f.(interface{ OSFile() *os.File }); ok {
		return of.OSFile()
	}
	return nil
}

// OSFile is the *os.File an OSFS file is.
func (o osFile) OSFile() *os.File { return o.f }

// ReadAt reads the section's bytes from off (0 is the section's first byte).
func (s *Section) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > s.Len {
		return 0, fmt.Errorf("section read at %d of %d bytes", off, s.Len)
	}
	if rest := s.Len - off; int64(len(p)) > rest {
		p = p[:rest]
	}
	if len(p) == 0 {
		return 0, io.EOF
	}
	n, err := s.e.f.ReadAt(p, s.Pos+off)
	if err != nil && !errors.Is(err, io.EOF) {
		return n, s.readFailed(err)
	}
	return n, nil
}

// readFailed explains a failed ReadAt as read explains a failed read: a closed segment whose
// file another client removed since ReadSection found it (ESTALE on a network file system)
// vanished — a log-start move, answered ErrOffsetOutOfRange — and anything else is a storage
// error that stops the log (TestASectionWhoseSegmentVanishedIsALogStartMove).
func (s *Section) readFailed(err error) error {
	if s.l == nil {
		return err
	}
	if s.seg == nil {
		return s.l.readFailed(err)
	}
	_, err = s.l.resultAfterVanish(ReadResult{}, s.offset, s.l.segmentReadFailed(s.seg, s.logStart, err))
	return err
}

// from records where a section found by read came from (nothing for a nil section).
func (s *Section) from(l *Log, seg *segment, logStart, offset int64) {
	if s != nil {
		s.l, s.seg, s.logStart, s.offset = l, seg, logStart, offset
	}
}

// HasCodec reports whether a batch compressed with codec c (1 gzip, 2 snappy, 3 lz4, 4 zstd)
// is in the section; only the batch headers were read.
func (s *Section) HasCodec(c int) bool { return c >= 0 && c < 8 && s.codecs&(1<<c) != 0 }

// Release drops the section's hold on its segment file. Safe on an empty section and twice.
func (s *Section) Release() {
	if s == nil || s.e == nil {
		return
	}
	s.cache.release(s.e)
	s.e = nil
}

// batchCut is how much a read takes from the batch holding its offset on: whole batches
// within maxBytes (with atLeastOne the first whatever its size), none with a base offset at
// or past limitOffset (the readable end: the high watermark or the last stable offset).
type batchCut struct {
	limitOffset int64
	maxBytes    int
	atLeastOne  bool
}

// readBatches is read's last step: on a nil section the batches are copied out
// (readBatches); otherwise they are only found, by their headers, and the section takes its
// own reference on e. next is the offset after the last batch returned.
func (s *Section) readBatches(cache *FileCache, e *cachedSegment, pos, limit, offset int64, cut batchCut) ([]byte, int64, error) {
	if s == nil {
		return readBatches(e.f, pos, limit, offset, cut)
	}
	start, n, next, codecs, err := cutBatches(e.f, pos, limit, offset, cut)
	if err != nil || n == 0 {
		return nil, offset, err
	}
	cache.ref(e)
	s.cache, s.e, s.Pos, s.Len, s.codecs = cache, e, start, n, codecs
	return nil, next, nil
}

// headerWindow is how much cutBatches reads at a time to look at batch headers: several
// small batches' headers per read, one read per large batch.
const headerWindow = 16 << 10

// cutBatches finds what readBatches would return — from the batch holding offset, the
// batches cut allows — by reading batch headers only: their start and total size, the offset
// after the last, and the codecs they use.
func cutBatches(f io.ReaderAt, pos, limit, offset int64, cut batchCut) (start, n, next int64, codecs uint8, err error) {
	start, h, found, err := locateBatch(f, pos, limit, offset)
	if !found || err != nil {
		return 0, 0, offset, 0, err
	}
	room := min(int64(max(cut.maxBytes, 0)), limit-start)
	if h.size() > room {
		if !cut.atLeastOne {
			return 0, 0, offset, 0, nil
		}
		return start, h.size(), h.nextOffset(), 1 << (h.Attributes & attrCodecMask), nil
	}
	next = offset
	w := headerReader{f: f, limit: limit}
	for p := start; p < limit; {
		hdr, err := w.at(p)
		if err != nil {
			return 0, 0, offset, 0, err
		}
		length := int32(binary.BigEndian.Uint32(hdr[offLength:]))
		size := int64(length) + batchLogOverhead
		if length < minBatchLength || size > limit-p {
			return 0, 0, offset, 0, fmt.Errorf("%w: batch at %d claims %d bytes, %d readable", ErrCorruptLog, p, size, limit-p)
		}
		base := int64(binary.BigEndian.Uint64(hdr))
		if n+size > room || base >= cut.limitOffset {
			break
		}
		codecs |= 1 << (binary.BigEndian.Uint16(hdr[offAttributes:]) & attrCodecMask)
		n += size
		p += size
		next = base + int64(int32(binary.BigEndian.Uint32(hdr[offLastOffsetDelta:]))) + 1
	}
	return start, n, next, codecs, nil
}

// headerReader reads batch headers through a window of headerWindow bytes.
type headerReader struct {
	f     io.ReaderAt
	limit int64
	buf   []byte
	at0   int64 // file position of buf[0]
}

// at returns the batchHeaderSize bytes at p (p+batchHeaderSize ≤ limit is checked).
func (r *headerReader) at(p int64) ([]byte, error) {
	if r.limit-p < batchHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes at %d, less than a batch header", ErrCorruptLog, r.limit-p, p)
	}
	if p < r.at0 || p+batchHeaderSize > r.at0+int64(len(r.buf)) {
		if r.buf == nil {
			r.buf = make([]byte, headerWindow)
		}
		n := min(int64(headerWindow), r.limit-p)
		got, err := r.f.ReadAt(r.buf[:n], p)
		// A read short of the window at the end of the file is fine if it holds the header.
		if shortAtEnd := errors.Is(err, io.EOF) && int64(got) >= batchHeaderSize; err != nil && !shortAtEnd {
			return nil, err
		}
		r.buf, r.at0 = r.buf[:got], p
	}
	return r.buf[p-r.at0 : p-r.at0+batchHeaderSize], nil
}
