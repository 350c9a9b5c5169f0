package broker

import (
	"math/bits"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/broker/wire"
)

// How a Fetch answer carries its records (docs/bounds.md, "Answers"). A record set of at
// least vectoredMinRecords bytes whose segment file is the operating system's is sent from
// the file itself: the answer holds the segment Section (the file stays open) and the wire
// server writes it with sendfile, so the records never enter the broker's memory. Any other
// record set (small, from a file system that gives no *os.File, or with Handler.CopyFetchData)
// is read into memory within the broker-wide answer budget (Handler.AnswerBudget): a read
// that does not fit shrinks to what does, and the first record set of an answer waits for
// room for its first batch, so an answer is never refused and always makes progress. What an
// answer holds is let go when the wire server has written it or dropped it
// (wire.Answer.Release).

// heldRecords is what one Fetch answer holds until it is written.
type heldRecords struct {
	budget *wire.Budget
	taken  int64 // bytes of budget taken for records read into memory
	// files are the record sets sent from their segment files, by the partition they answer.
	files map[*kmsg.FetchResponseTopicPartition]*storage.Section
	// bufs are the pooled buffers of the records read into memory (recordBuffer).
	bufs []*[]byte
}

// release lets go of everything held: the sections' files and the budget's bytes.
func (h *heldRecords) release() {
	for _, s := range h.files {
		s.Release()
	}
	h.files = nil
	for _, b := range h.bufs {
		putRecordBuffer(b)
	}
	h.bufs = nil
	h.budget.Give(h.taken)
	h.taken = 0
}

// Records read into memory go into pooled buffers of power-of-two sizes (64 KiB to 64 MiB),
// taken from the answer budget at their full size and put back once the answer is written:
// the budget then bounds the memory they occupy, and a storm of answers reuses it instead of
// leaving garbage for the collector (which the budget could not bound).
const (
	minRecordBuffer = 64 << 10
	maxRecordBuffer = 64 << 20
)

var recordBuffers [27]sync.Pool // by log2 of the size, 16 (64 KiB) to 26 (64 MiB)

// recordBufferSize is the size of the buffer records of n bytes are read into.
func recordBufferSize(n int64) int64 {
	if n > maxRecordBuffer {
		return n
	}
	return max(int64(1)<<bits.Len64(uint64(n-1)), minRecordBuffer)
}

// recordBuffer is a buffer of n bytes from its size's pool (a fresh one above the largest).
func recordBuffer(n int64) *[]byte {
	size := recordBufferSize(n)
	if size <= maxRecordBuffer {
		if b, ok := recordBuffers[bits.Len64(uint64(size-1))].Get().(*[]byte); ok {
			*b = (*b)[:n]
			return b
		}
	}
	b := make([]byte, n, size)
	return &b
}

func putRecordBuffer(b *[]byte) {
	if size := int64(cap(*b)); size <= maxRecordBuffer && size == recordBufferSize(size) {
		recordBuffers[bits.Len64(uint64(size-1))].Put(b)
	}
}

// empty reports whether nothing is held (the answer needs no Release).
func (h *heldRecords) empty() bool { return len(h.files) == 0 && h.taken == 0 }

// keepRecords puts the record set sec found for partition out into the answer: from the file
// when it can be sent from there, else read into memory within the answer budget. It
// returns the bytes kept (0 when the budget had no room and the answer goes without them;
// sec is then released). first is true for the answer's first record set, which waits for
// room for its first batch instead of going without.
func (f *fetchState) keepRecords(p *fetchPart, sec *storage.Section, first bool) int64 {
	rc := f.rc
	if sec.Len >= vectoredMinRecords && sec.File() != nil && !rc.h.CopyFetchData {
		if rc.held.files == nil {
			rc.held.files = map[*kmsg.FetchResponseTopicPartition]*storage.Section{}
		}
		rc.held.files[p.out] = sec
		p.out.RecordBatches = noRecords // the section takes its place when the answer is encoded
		return sec.Len
	}
	budget := rc.h.AnswerBudget
	rc.held.budget = budget
	taken := recordBufferSize(sec.Len)
	if !budget.TryTake(taken) {
		// Shrink to what fits now; the answer's first record set waits for its first batch
		// instead of going without.
		sec.Release()
		var err error
		if sec, err = f.reread(p, budget.Available(), first); err != nil || sec.Len == 0 {
			sec.Release()
			return 0
		}
		var ok bool
		if taken = recordBufferSize(sec.Len); first {
			taken, ok = budget.Take(taken, rc.connCtx.Done())
		} else {
			ok = budget.TryTake(taken)
		}
		if !ok {
			sec.Release()
			return 0
		}
	}
	defer sec.Release()
	rc.held.taken += taken
	buf := recordBuffer(sec.Len)
	rc.held.bufs = append(rc.held.bufs, buf)
	if _, err := sec.ReadAt(*buf, 0); err != nil {
		f.readError(p, err)
		return 0
	}
	p.out.RecordBatches = *buf
	return sec.Len
}

// reread finds p's record set again within room bytes (at least its first batch when first):
// the read shrunk to what the answer budget has room for. An error is answered on p.
func (f *fetchState) reread(p *fetchPart, room int64, first bool) (*storage.Section, error) {
	limit := min(int64(f.partitionLimit(p)), room)
	_, sec, err := p.log.ReadSection(p.offset, int(max(limit, 0)), first)
	if err != nil {
		f.readError(p, err)
	}
	return sec, err
}
