package storage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// scanEnd is where and why a scan of a segment stopped.
type scanEnd struct {
	pos  int64 // byte position after the last accepted batch
	next int64 // offset after the last accepted batch
	// refused is nil when the scan reached the bound or ended exactly at the end of the data;
	// otherwise it says why the bytes at pos were not accepted (torn, corrupt, out of order).
	refused error
}

var errTorn = errors.New("torn batch")

const scanBufferSize = 1 << 20

// scanBatches walks the batches stored in r from byte pos (where the batch with offset next
// must start) up to byte size, and hands each accepted batch to visit. It stops, without
// error, at the first batch it cannot accept, and reports why in scanEnd.refused:
//
//   - fewer bytes left than a header, or than the header's length says (a torn tail);
//   - a header whose length, magic or counts do not check (shapeError);
//   - a base offset other than next (bytes that are not the continuation of this log, such
//     as a deposed writer's garbage after a truncation);
//   - a batch reaching bound or beyond (bound is the next segment's base offset: bytes a
//     deposed writer appended after the new leader rolled);
//   - with verify, a CRC-32C mismatch.
//
// With gaps (a cleaned segment, docs/compaction.md) a batch may start past next — the
// cleaner removed the offsets between — and hold fewer records than its offset range (Apache
// keeps a retained batch's base and last offset); it must still start at or after next.
//
// It stops cleanly when next reaches bound. It never trusts a length before checking it
// against the bytes that exist, and never buffers more than scanBufferSize, whatever the
// file holds. The error is an I/O error from r (or ctx's).
func scanBatches(ctx context.Context, r io.ReaderAt, pos, size, next, bound int64, verify, gaps bool, visit func(h batchHeader, pos int64)) (scanEnd, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(r, pos, max(size-pos, 0)), scanBufferSize)
	var hdr [batchHeaderSize]byte
	var scratch []byte
	end := scanEnd{pos: pos, next: next}
	for n := 0; ; n++ {
		if n%64 == 0 && ctx.Err() != nil {
			return end, ctx.Err()
		}
		if end.next >= bound || end.pos == size {
			return end, nil
		}
		left := size - end.pos
		if left < batchHeaderSize {
			end.refused = fmt.Errorf("%w: %d bytes left at %d, less than a header", errTorn, left, end.pos)
			return end, nil
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return end, shortRead(&end, err)
		}
		h := parseHeader(hdr[:])
		if err := h.storedShapeError(gaps); err != nil {
			end.refused = err
			return end, nil
		}
		switch {
		case h.size() > left:
			end.refused = fmt.Errorf("%w: batch at %d says %d bytes, %d left", errTorn, end.pos, h.size(), left)
			return end, nil
		case h.BaseOffset < end.next || (h.BaseOffset > end.next && !gaps):
			end.refused = fmt.Errorf("%w: batch at %d has base offset %d, expected %d", ErrCorruptMessage, end.pos, h.BaseOffset, end.next)
			return end, nil
		case h.lastOffset() >= bound:
			end.refused = fmt.Errorf("%w: batch at %d ends at offset %d, past the next segment's base %d", ErrCorruptMessage, end.pos, h.lastOffset(), bound)
			return end, nil
		}
		body := h.size() - batchHeaderSize
		if verify {
			if scratch == nil {
				scratch = make([]byte, 64<<10)
			}
			crc := crc32.Update(0, castagnoli, hdr[offAttributes:])
			var first []byte // the body's first chunk: a control batch's marker is in it
			for body > 0 {
				chunk := scratch[:min(body, int64(len(scratch)))]
				if _, err := io.ReadFull(br, chunk); err != nil {
					return end, shortRead(&end, err)
				}
				if first == nil {
					first = chunk
				}
				crc = crc32.Update(crc, castagnoli, chunk)
				body -= int64(len(chunk))
			}
			if crc != h.CRC {
				end.refused = fmt.Errorf("%w: CRC-32C mismatch in batch at %d (offset %d)", ErrCorruptMessage, end.pos, h.BaseOffset)
				return end, nil
			}
			if h.Attributes&attrControl != 0 {
				if err := parseControl(&h, first); err != nil {
					end.refused = err
					return end, nil
				}
			}
		} else if _, err := br.Discard(int(body)); err != nil {
			return end, shortRead(&end, err)
		}
		if visit != nil {
			visit(h, end.pos)
		}
		end.pos += h.size()
		end.next = h.nextOffset()
	}
}

// shortRead turns running out of bytes we were told exist (the file shrank under us: another
// claimer truncated it) into a refusal, and passes real I/O errors up.
func shortRead(end *scanEnd, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		end.refused = fmt.Errorf("%w: file ended early at %d", errTorn, end.pos)
		return nil
	}
	return err
}
