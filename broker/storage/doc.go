// Package storage keeps paddock's partition logs on the cluster's one shared volume, where
// the leader of a partition is its only writer (DESIGN.md "Storage: one shared volume, one
// writer per partition"; docs/storage.md is the full design).
//
// A Log is one partition led at one leader epoch: Open, Takeover (claim the fence, recover,
// roll, serve), then Append (group-committed: one fsync per round serves every waiting
// append), Read (whole stored batches up to the high watermark), the ListOffsets and
// OffsetForLeaderEpoch lookups, DeleteRecords and retention, and finally Relinquish. The
// Fence type is the safety core — a monotonic epoch claimed by exclusively creating one entry
// per epoch, checked after every durability step before anything is acknowledged — and is
// reusable by the group coordinator. ProducerIDs allocates producer-id blocks on the volume.
// FS is the file-system seam; FaultFS injects fsync errors, EIO, ENOSPC and short writes.
//
// Rules this package keeps (each has a test named for it):
//   - nothing is acknowledged that is not durable (acks=all) or written (acks=1) AND checked
//     against the fence afterwards; after a storage error nothing more is acknowledged;
//   - a takeover claims before it scans, so everything a previous leader acknowledged is kept;
//   - a segment is read and recovered only up to the next segment's base offset, so a deposed
//     leader's late writes are never served or mistaken for data;
//   - reads never return data above the high watermark;
//   - retention dates segments by their records' timestamps, never by file times, and never
//     deletes the active segment.
//
// It must never speak the Kafka wire protocol, touch Kubernetes, or trust a length, CRC or
// file it has not checked; and it must never acknowledge a write from a log whose epoch the
// fence no longer holds.
package storage
