// Package storage keeps paddock's partition logs on the cluster's one shared volume, where
// the leader of a partition is its only writer (docs/storage.md is the full design and lists
// where it deviates from the contract).
//
// A Log is one partition led at one leader epoch: Open, Takeover (claim the fence, learn the
// log from the previous leader's journal, recover, roll, serve), then Append (group-committed:
// one fsync per round serves every waiting append), Read (whole stored batches up to the high
// watermark), the ListOffsets and OffsetForLeaderEpoch lookups, DeleteRecords and retention,
// and finally Relinquish. The Fence type is the safety core — a chain of claims, each
// published by an exclusive link and superseded by a notice its holder reads by name, checked
// after every durability step before anything is acknowledged — and is reusable by the group
// coordinator. ProducerIDs allocates producer-id blocks on the volume; RemoveTopicData removes
// a deleted topic's data and leaves a tombstone. CheckMount and CheckVolume are the checks of
// what the volume must provide.
//
// FS is the file-system seam; WatchdogFS bounds every call (a hung fsync is a failure),
// FaultFS and Faults inject errors and hangs, and NFSSim is a file system with a network file
// system's caching and commit semantics, for tests.
//
// Rules this package keeps (each has a test named for it):
//   - nothing is acknowledged that is not durable (acks=all) or written (acks=1) AND checked
//     against the fence afterwards; after a storage error nothing more is acknowledged;
//   - a takeover claims before it looks, so everything a previous leader acknowledged is kept;
//     it cuts and deletes nothing, and one that lost the fence never serves;
//   - no decision that protects data rests on a directory listing or a cached "no such file":
//     the fence, a log's segments and its start are reached by name;
//   - a segment is read and recovered only up to the next segment's base offset, so a deposed
//     leader's late writes and a torn tail are never served or mistaken for data;
//   - reads never return data above the high watermark, nor data some leader has not
//     committed itself;
//   - retention dates segments by their records' timestamps, never by file times, and never
//     deletes the active segment.
//
// It must never speak the Kafka wire protocol, touch Kubernetes, or trust a length, CRC or
// file it has not checked; and it must never acknowledge a write from a log whose claim the
// fence no longer holds.
package storage
