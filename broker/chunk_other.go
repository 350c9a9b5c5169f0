//go:build !linux

package broker

// newChunk is a record chunk: an ordinary slice where chunks are not mapped (chunk_linux.go).
func newChunk() []byte { return make([]byte, recordChunk) }
