package broker

import (
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
// is read into memory chunks within the broker-wide answer budget (Handler.AnswerBudget): a read
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
	// chunks are the record sets read into memory chunks (takeChunks), by partition.
	chunks map[*kmsg.FetchResponseTopicPartition][][]byte
}

// release lets go of everything held: the sections' files, the chunks and the budget's bytes.
func (h *heldRecords) release() {
	for _, s := range h.files {
		s.Release()
	}
	h.files = nil
	for _, c := range h.chunks {
		giveChunks(c)
	}
	h.chunks = nil
	h.budget.Give(h.taken)
	h.taken = 0
}

// Records read into memory go into chunks of recordChunk bytes from one free list, taken
// from the answer budget at their full size and put back once the answer is written, so
// every chunk that exists was made while its bytes were taken from a budget: with a budget,
// the chunks never occupy more than it (and one oversized first batch), however the
// answers' sizes vary, and a storm of answers reuses them instead of leaving garbage for
// the collector. They are kept outside the Go heap (newChunk). A record set smaller than a
// chunk is read into a buffer of its own size (charged that size): small, and copied into
// the encoded answer anyway (codec.go).
const recordChunk = 64 << 10

var recordChunks struct {
	sync.Mutex
	free [][]byte // each of recordChunk bytes
	made int      // chunks ever made (TestAFetchReadIntoMemoryShrinksToTheAnswerBudget)
}

// recordCharge is what a record set of n bytes takes from the answer budget.
func recordCharge(n int64) int64 {
	if n < recordChunk {
		return n
	}
	return (n + recordChunk - 1) / recordChunk * recordChunk
}

// takeChunks is n bytes of chunks, from the free list first; the last is cut to the rest.
func takeChunks(n int64) [][]byte {
	out := make([][]byte, (n+recordChunk-1)/recordChunk)
	recordChunks.Lock()
	for i := range out {
		k := len(recordChunks.free)
		if k == 0 {
			out[i] = newChunk()
			recordChunks.made++
			continue
		}
		out[i], recordChunks.free = recordChunks.free[k-1], recordChunks.free[:k-1]
	}
	recordChunks.Unlock()
	last := len(out) - 1
	out[last] = out[last][:n-int64(last)*recordChunk]
	return out
}

// giveChunks puts chunks back on the free list, which keeps every chunk made: at most the
// answer budget's worth (with queued.max.response.bytes -1, the most ever held at once).
func giveChunks(chunks [][]byte) {
	recordChunks.Lock()
	defer recordChunks.Unlock()
	for _, c := range chunks {
		recordChunks.free = append(recordChunks.free, c[:recordChunk])
	}
}

// empty reports whether nothing is held (the answer needs no Release).
func (h *heldRecords) empty() bool { return len(h.files) == 0 && len(h.chunks) == 0 && h.taken == 0 }

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
	taken := recordCharge(sec.Len)
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
		if taken = recordCharge(sec.Len); first {
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
	if sec.Len < recordChunk {
		buf := make([]byte, sec.Len)
		if _, err := sec.ReadAt(buf, 0); err != nil {
			f.readError(p, err)
			return 0
		}
		p.out.RecordBatches = buf
		return sec.Len
	}
	chunks := takeChunks(sec.Len)
	if rc.held.chunks == nil {
		rc.held.chunks = map[*kmsg.FetchResponseTopicPartition][][]byte{}
	}
	rc.held.chunks[p.out] = chunks // the answer gives them back, whatever happens next
	for i, c := range chunks {
		if _, err := sec.ReadAt(c, int64(i)*recordChunk); err != nil {
			delete(rc.held.chunks, p.out)
			giveChunks(chunks)
			f.readError(p, err)
			return 0
		}
	}
	p.out.RecordBatches = noRecords // the chunks take its place when the answer is encoded
	return sec.Len
}

// reread finds p's record set again within room bytes (at least its first batch when first):
// the read shrunk to what the answer budget has room for. An error is answered on p.
func (f *fetchState) reread(p *fetchPart, room int64, first bool) (*storage.Section, error) {
	limit := min(int64(f.partitionLimit(p)), room)
	res, sec, err := readSection(p, int(max(limit, 0)), first)
	if err != nil {
		f.readError(p, err)
		return sec, err
	}
	setAborted(p, res.Aborted) // the aborted transactions of the shrunk read
	return sec, nil
}
