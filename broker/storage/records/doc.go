// Package records decodes and encodes the records section of a Kafka record batch v2: the
// bytes after the 61-byte batch header, compressed with the codec in the header's attributes.
// The log cleaner uses it to rewrite batches during compaction, and Produce validation to look
// inside a batch (a compacted topic refuses records without a key).
//
// The package is pure: bytes in, bytes or records out, no I/O and no clock. It must never
// trust a length it has not checked against the bytes that exist, and never let a
// decompression bomb allocate beyond the caller's limit (plus a small constant).
package records
