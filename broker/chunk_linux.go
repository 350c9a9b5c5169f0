package broker

import "syscall"

// newChunk is a record chunk outside the Go heap (an anonymous mapping), so the chunks — up
// to the whole answer budget — do not count as live heap, which would let the collector grow
// the heap by as much again before it collects (docs/bounds.md, "Measured"). A chunk is never
// unmapped: the free list keeps it. Without a mapping it is an ordinary slice.
func newChunk() []byte {
	b, err := syscall.Mmap(-1, 0, recordChunk, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]byte, recordChunk)
	}
	return b
}
