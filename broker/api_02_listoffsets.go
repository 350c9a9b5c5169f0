package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/acl"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// ListOffsets (key 2): versions 0-8, Apache 3.7's (docs/dataplane.md, "ListOffsets,
// OffsetForLeaderEpoch, InitProducerId").
//
// Behaviour, per partition, answered from the partition's log on its leader:
//   - timestamp -1 (latest): the high watermark, timestamp -1, the leader's epoch; under
//     READ_COMMITTED (isolation_level 1, v2+) the last stable offset instead.
//   - timestamp -2 (earliest): the log-start offset, timestamp -1, the epoch it was written
//     at.
//   - timestamp -3 (max timestamp): the largest batch maxTimestamp and, as Apache 3.7, the
//     last offset of that batch, with its epoch.
//   - timestamp -4 (earliest local): the log-start offset, as -2: there is no tiered storage.
//   - any other timestamp t: the first record at or after t below the high watermark (Apache
//     searches with t as given, so another negative t finds the first record).
//   - READ_COMMITTED: a timestamp lookup (and -3) whose answer is at or past the last stable
//     offset finds nothing, as Apache's Partition.fetchOffsetForTimestamp filters it by the
//     last fetchable offset.
//   - A lookup that finds nothing (an empty log, no timestamp ≥ t) answers NONE with offset,
//     timestamp and epoch -1.
//   - __consumer_offsets is answered from the offsets topic view (offsets_topic.go): earliest
//     0, latest its high watermark, a timestamp its first record at or after it.
//   - Errors: an unknown topic or partition → UNKNOWN_TOPIC_OR_PARTITION; a partition named
//     twice in one request → INVALID_REQUEST for each occurrence; a CurrentLeaderEpoch below
//     the view's → FENCED_LEADER_EPOCH, above → UNKNOWN_LEADER_EPOCH; not led or not taken
//     over here → NOT_LEADER_OR_FOLLOWER; offline → KAFKA_STORAGE_ERROR. Apache's
//     OFFSET_NOT_AVAILABLE (a new leader's high watermark below its epoch start) cannot
//     happen: a takeover makes the high watermark the log end before it serves.
//   - Authorization (Apache's handleListOffsetRequest): DESCRIBE on each topic, else its
//     partitions answer TOPIC_AUTHORIZATION_FAILED, before any other check.
//
// Version notes:
//   - v0: OldStyleOffsets, at most MaxNumOffsets of them: [high watermark] for -1, [log start]
//     for -2, and for a timestamp the offset of the first record at or after it (or the high
//     watermark when there is none). Apache's v0 lists segment base offsets by file
//     modification time; paddock never dates data by file times (a deviation listed at the
//     end of docs/dataplane.md).
//   - v1: one offset per partition; a partition named twice is refused from here.
//   - v2: IsolationLevel.
//   - v4: CurrentLeaderEpoch.
//   - v7: timestamp -3; v8: timestamp -4.
func init() { register(2, 0, 8, handleListOffsets) }

// ListOffsets special timestamps.
const (
	listLatest        = -1
	listEarliest      = -2
	listMaxTimestamp  = -3
	listEarliestLocal = -4
)

func handleListOffsets(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	seen := map[hintKey]int{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			seen[hintKey{rt.Topic, rp.Partition}]++
		}
	}
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		ot := &resp.Topics[i]
		*ot = kmsg.NewListOffsetsResponseTopic()
		ot.Topic = rt.Topic
		ot.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
		t, known := rc.view.Topic(rt.Topic)
		authorized := rc.allowedTopic(acl.OpDescribe, rt.Topic)
		for j, rp := range rt.Partitions {
			op := &ot.Partitions[j]
			*op = kmsg.NewListOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			switch {
			case !authorized:
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case req.Version >= 1 && seen[hintKey{rt.Topic, rp.Partition}] > 1:
				op.ErrorCode = kerr.InvalidRequest.Code
			case rt.Topic == topicname.ConsumerOffsets:
				rc.listOffsetsTopic(op, rp, req.Version)
			case !known:
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				current := int32(-1)
				if req.Version >= 4 {
					current = rp.CurrentLeaderEpoch
				}
				sp := rc.partition(t, rp.Partition, current)
				if op.ErrorCode = sp.code; sp.code == 0 {
					if req.Version == 0 {
						listOffsetsV0(op, sp.log, rp)
					} else {
						listOffset(op, sp.log, rp.Timestamp, storage.Isolation(req.IsolationLevel))
					}
				}
			}
		}
	}
	return resp, nil
}

// listOffset answers one v1+ partition from its log at isolation iso (v1 has none: its
// IsolationLevel is 0, READ_UNCOMMITTED).
func listOffset(op *kmsg.ListOffsetsResponseTopicPartition, l *storage.Log, ts int64, iso storage.Isolation) {
	var (
		found storage.TimestampOffset
		ok    bool
		err   error
	)
	switch ts {
	case listLatest:
		var o storage.Offsets
		if o, err = l.Offsets(); err == nil {
			latest := o.HighWatermark
			if iso == storage.ReadCommitted {
				latest, _ = l.LastStableOffset()
			}
			found, ok = storage.TimestampOffset{Timestamp: -1, Offset: latest, LeaderEpoch: l.Epoch()}, true
		}
	case listEarliest, listEarliestLocal:
		var o storage.Offsets
		if o, err = l.Offsets(); err == nil {
			found, ok = storage.TimestampOffset{Timestamp: -1, Offset: o.LogStart, LeaderEpoch: l.EpochAt(o.LogStart)}, true
		}
	case listMaxTimestamp:
		found, ok, err = l.MaxTimestamp()
	default:
		found, ok, err = l.OffsetForTimestamp(ts)
	}
	if op.ErrorCode = storageCode(err); err != nil || !ok {
		return
	}
	if iso == storage.ReadCommitted && ts != listLatest && ts != listEarliest && ts != listEarliestLocal {
		if lso, _ := l.LastStableOffset(); found.Offset >= lso {
			return // not committed yet: not found
		}
	}
	op.Timestamp, op.Offset, op.LeaderEpoch = found.Timestamp, found.Offset, found.LeaderEpoch
}

// listOffsetsV0 answers one v0 partition (OldStyleOffsets).
func listOffsetsV0(op *kmsg.ListOffsetsResponseTopicPartition, l *storage.Log, rp kmsg.ListOffsetsRequestTopicPartition) {
	o, err := l.Offsets()
	if err != nil {
		op.ErrorCode = storageCode(err)
		return
	}
	offset := o.HighWatermark
	switch rp.Timestamp {
	case listLatest:
	case listEarliest:
		offset = o.LogStart
	default:
		found, ok, err := l.OffsetForTimestamp(rp.Timestamp)
		if err != nil {
			op.ErrorCode = storageCode(err)
			return
		}
		if ok {
			offset = found.Offset
		}
	}
	op.OldStyleOffsets = []int64{}
	if rp.MaxNumOffsets > 0 {
		op.OldStyleOffsets = append(op.OldStyleOffsets, offset)
	}
}
