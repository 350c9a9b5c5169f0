package storage

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// The volume layout (docs/storage.md "Layout"):
//
//	<data>/<clusterID>/topics/<topicName>-<topicID>/<partition>/
//	    fence/<epoch>                       one exclusively created entry per claimed epoch
//	    <base:020>-<epoch:010>.log          a segment: record batches v2, verbatim
//	    <base:020>-<epoch:010>.index        its sparse offset+time index and summary (rebuildable)
//	    <base:020>-<epoch:010>.c<by:010>-<n:010>.log    the cleaner's copy of that segment (compaction)
//	    <base:020>-<epoch:010>.c<by:010>-<n:010>.index  its index
//	    <offset:020>-<epoch:010>.snapshot   producer state + recovery checkpoint at offset
//	    log-start-offset                    the persisted log-start offset
//	<data>/<clusterID>/groups/              the group coordinator's (broker/groups)
//	<data>/<clusterID>/producer-ids/        ProducerIDs' block entries

const (
	fenceDirName       = "fence"
	logStartFileName   = "log-start-offset"
	segmentSuffix      = ".log"
	indexSuffix        = ".index"
	snapshotSuffix     = ".snapshot"
	tmpSuffix          = ".tmp"
	offsetDigits       = 20
	epochDigits        = 10
	nameStemLen        = offsetDigits + 1 + epochDigits
	topicIDEncodedSize = 22 // base64url of 16 bytes, unpadded
)

// PartitionDir is the directory of one partition's log. The topic id is part of the name, so a
// topic deleted and re-created under the same name (a new id) never sees the old data.
// topicID is encoded as base64url without padding, the form KafkaTopic status.topicID and
// Kafka's tools print.
func PartitionDir(dataDir, clusterID, topic string, topicID [16]byte, partition int32) string {
	id := base64.RawURLEncoding.EncodeToString(topicID[:])
	return filepath.Join(dataDir, clusterID, "topics", topic+"-"+id, strconv.FormatInt(int64(partition), 10))
}

// GroupsDir is where the group coordinator keeps its groups (each with its own Fence).
func GroupsDir(dataDir, clusterID string) string {
	return filepath.Join(dataDir, clusterID, "groups")
}

// ProducerIDsDir is where ProducerIDs claims its blocks.
func ProducerIDsDir(dataDir, clusterID string) string {
	return filepath.Join(dataDir, clusterID, "producer-ids")
}

// stem is "<offset:020>-<epoch:010>", the shared part of segment, index and snapshot names.
func stem(offset int64, epoch int32) string {
	return fmt.Sprintf("%0*d-%0*d", offsetDigits, offset, epochDigits, epoch)
}

func segmentName(base int64, epoch int32) string { return stem(base, epoch) + segmentSuffix }
func indexName(base int64, epoch int32) string   { return stem(base, epoch) + indexSuffix }

// cleanGen names one cleaned copy of a segment (docs/compaction.md "Swapping in, under the fence"): the n-th
// cleaning pass of the leader at epoch by. The zero value is the segment as its leader wrote
// it. Each copy has a file name of its own, so a deposed leader's cleaner never changes a
// file a newer leader reads.
type cleanGen struct {
	by int32
	n  uint32
}

func (g cleanGen) cleaned() bool { return g.n > 0 }

// segFileName is the file of segment (base, epoch) in generation g, with suffix (.log or
// .index). A cleaned copy's name does not parse as a segment's (parseStem), so the listings
// that look for segments (logs from before journals, the stale-leader guard) never take it
// for one: only a journal names it.
func segFileName(base int64, epoch int32, g cleanGen, suffix string) string {
	if !g.cleaned() {
		return stem(base, epoch) + suffix
	}
	return fmt.Sprintf("%s.c%0*d-%0*d%s", stem(base, epoch), epochDigits, g.by, epochDigits, g.n, suffix)
}
func snapshotName(off int64, epoch int32) string { return stem(off, epoch) + snapshotSuffix }

// parseStem parses name = stem + suffix; anything else (other files, temporaries) is
// rejected.
func parseStem(name, suffix string) (offset int64, epoch int32, ok bool) {
	s, found := strings.CutSuffix(name, suffix)
	if !found || len(s) != nameStemLen || s[offsetDigits] != '-' {
		return 0, 0, false
	}
	off, err1 := strconv.ParseUint(s[:offsetDigits], 10, 63)
	ep, err2 := strconv.ParseUint(s[offsetDigits+1:], 10, 31)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return int64(off), int32(ep), true
}
