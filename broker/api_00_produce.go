package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/storage"
)

// Produce (key 0), versions 3–10 (DATAPLANE.md §1–§3; docs/dataplane.md, "Produce").
//
// Versions 0–2 carry the old message formats (v0/v1 message sets), which paddock does not
// store, so they are not advertised; record batches v2 only. Apache 3.7 offers 0–10.
//
// Per partition, in Apache's order (KafkaApis.handleProduceRequest, ReplicaManager): an
// unknown topic or partition index → UNKNOWN_TOPIC_OR_PARTITION; then the records
// (ProduceRequest.validateRecords): no whole batch or magic ≠ 2 → INVALID_RECORD, zstd with
// Produce < 7 → UNSUPPORTED_COMPRESSION_TYPE, more than one batch → INVALID_RECORD (a
// trailing partial batch is dropped, as Apache's batch iterator drops it); a transactional
// batch → INVALID_TXN_STATE (no transaction can be ongoing: paddock has no transactions
// yet); acks ∉ {-1, 0, 1} → INVALID_REQUIRED_ACKS; not led or not taken over here →
// NOT_LEADER_OR_FOLLOWER; a CreateTime batch outside message.timestamp.before/after.max.ms
// (unbounded by default; batch base and max timestamps checked) → INVALID_TIMESTAMP; then
// storage.Append, whose typed errors map as storageCode says
// (CORRUPT_MESSAGE on a bad length or CRC, INVALID_RECORD, MESSAGE_TOO_LARGE against
// max.message.bytes, RECORD_LIST_TOO_LARGE, KAFKA_STORAGE_ERROR, OUT_OF_ORDER_SEQUENCE_NUMBER,
// INVALID_PRODUCER_EPOCH, and REQUEST_TIMED_OUT when timeout_ms passes first). A producer's
// retry of one of its last five batches gets the original offsets back. Every requested
// partition gets an entry; failures carry base offset -1 and (v8+) an error message.
//
// Acknowledgement (DESIGN.md "Produce, Fetch and the idempotent producer"): acks=-1 once the
// batch is fsynced and the fence still holds the leader's epoch, acks=1 once written and
// fence-checked, acks=0 once written — and acks=0 gets no answer at all; if any of its
// partitions failed the connection is closed, as Apache does, so the producer notices. A
// broker that has not renewed its Lease for a session timeout (self-fenced) refuses appends
// with NOT_LEADER_OR_FOLLOWER, and refuses to acknowledge an append that completes after it
// became self-fenced. timeout_ms ≤ 0 sets no deadline of its own. The partitions of one
// request are appended in parallel (one goroutine each; a partition named twice is
// appended in request order).
//
// Answers carry the append time for message.timestamp.type=LogAppendTime topics (else -1)
// and the log-start offset (v5+). KIP-951 (v10): a NOT_LEADER_OR_FOLLOWER partition carries
// CurrentLeader (the view's leader and epoch) and the response NodeEndpoints lists those
// leaders' endpoints on the request's listener, so a client switches to the new leader
// without a metadata round trip; below v10 neither is sent.
func init() { register(0, 3, 10, handleProduce) }

// errAcksZeroFailed closes the connection of an acks=0 Produce that failed somewhere.
var errAcksZeroFailed = errors.New("acks=0 produce failed on a partition; closing the connection so the producer notices")

// produceJob is one requested partition that reached the append.
type produceJob struct {
	topic   string
	log     *storage.Log
	records []byte // until Begin: it aliases the connection's frame buffer
	size    int
	out     *kmsg.ProduceResponseTopicPartition
	pending *storage.PendingAppend // Begin's, when it wrote the batch
	err     error                  // Begin's, when it refused it
}

func handleProduce(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	start := time.Now()
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	acksValid := req.Acks == -1 || req.Acks == 0 || req.Acks == 1
	selfFenced := rc.h.SelfFenced != nil && rc.h.SelfFenced()

	byPartition := map[partitionKey][]*produceJob{}
	var order []partitionKey
	var notLeader hintTargets // partitions answered NOT_LEADER_OR_FOLLOWER (KIP-951)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		out := &resp.Topics[i]
		*out = kmsg.NewProduceResponseTopic()
		out.Topic = rt.Topic
		out.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		t, known := rc.view.Topic(rt.Topic)
		for j, rp := range rt.Partitions {
			pr := &out.Partitions[j]
			*pr = kmsg.NewProduceResponseTopicPartition()
			pr.Partition, pr.BaseOffset = rp.Partition, -1
			if !known {
				setProduceError(pr, kerr.UnknownTopicOrPartition.Code, "This server does not host this topic-partition.")
				continue
			}
			sp := rc.partition(t, rp.Partition, -1)
			if sp.code == kerr.UnknownTopicOrPartition.Code {
				setProduceError(pr, sp.code, "This server does not host this topic-partition.")
				continue
			}
			records, code, msg := checkProduceRecords(req.Version, rp.Records)
			switch {
			case code != 0:
			case !acksValid:
				code, msg = kerr.InvalidRequiredAcks.Code, fmt.Sprintf("acks=%d: must be -1, 0 or 1", req.Acks)
			case sp.code != 0:
				code = sp.code
			case selfFenced:
				code, msg = kerr.NotLeaderForPartition.Code, "this broker has not renewed its heartbeat Lease for a session timeout and acknowledges nothing"
				rc.h.Metrics.selfFencedAppend()
			case !t.Config.LogAppendTime():
				code, msg = checkTimestamps(records, t.Config.MessageTimestampBeforeMaxMs, t.Config.MessageTimestampAfterMaxMs, start.UnixMilli())
			}
			if code != 0 {
				setProduceError(pr, code, msg)
				if code == kerr.NotLeaderForPartition.Code {
					notLeader.add(t.Name, rp.Partition, produceLeaderSetter(pr))
				}
				continue
			}
			key := partitionKey{t.ID, rp.Partition}
			if _, seen := byPartition[key]; !seen {
				order = append(order, key)
			}
			byPartition[key] = append(byPartition[key], &produceJob{topic: t.Name, log: sp.log, records: records, out: pr})
		}
	}

	ctx, cancel := rc.ctx, context.CancelFunc(func() {})
	if req.TimeoutMillis > 0 {
		ctx, cancel = context.WithTimeout(rc.ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
	}
	rc.beginAppends(storage.Acks(req.Acks), order, byPartition, &notLeader)

	finish := func() (kmsg.Response, error) {
		defer cancel()
		for _, key := range order {
			for _, j := range byPartition[key] {
				rc.awaitAppend(ctx, j, &notLeader)
			}
		}
		rc.h.Metrics.produceLatency(time.Since(start))
		if req.Version >= 10 && len(notLeader) > 0 {
			for _, e := range notLeader.resolve(rc) {
				b := kmsg.NewProduceResponseBroker()
				b.NodeID, b.Host, b.Port, b.Rack = e.id, e.host, e.port, e.rack
				resp.Brokers = append(resp.Brokers, b)
			}
		}
		return resp, nil
	}
	if req.Acks == 0 {
		// Written is all acks=0 waits for: nothing to defer, and no answer.
		_, _ = finish()
		for i := range resp.Topics {
			for _, pr := range resp.Topics[i].Partitions {
				if pr.ErrorCode != 0 {
					return nil, errAcksZeroFailed
				}
			}
		}
		return nil, nil
	}
	if len(order) == 0 {
		return finish()
	}
	// The batches are in the logs, in request order; only their acknowledgement is left,
	// which may wait for an fsync. Let the connection read its next request meanwhile.
	rc.answerLater(finish)
	return nil, nil
}

// beginAppends writes every job's batch (storage.Log.Begin), the partitions in parallel and
// a partition named twice in request order, and returns once all are written or refused: so
// a connection's next request appends after this one. A refused job is answered here.
func (rc *requestContext) beginAppends(acks storage.Acks, order []partitionKey, byPartition map[partitionKey][]*produceJob, notLeader *hintTargets) {
	begin := func(jobs []*produceJob) {
		for _, j := range jobs {
			j.pending, j.err = j.log.Begin(j.records, acks)
			j.size, j.records = len(j.records), nil // the frame buffer is reused by the next request
		}
	}
	if len(order) == 1 {
		begin(byPartition[order[0]])
	} else {
		var wg sync.WaitGroup
		for _, key := range order {
			wg.Add(1)
			go func() {
				defer wg.Done()
				begin(byPartition[key])
			}()
		}
		wg.Wait()
	}
	for _, key := range order {
		for _, j := range byPartition[key] {
			if j.err != nil {
				rc.answerAppend(j, storage.AppendResult{}, j.err, notLeader)
			}
		}
	}
}

// awaitAppend waits for one begun job's acknowledgement and fills its answer.
func (rc *requestContext) awaitAppend(ctx context.Context, j *produceJob, notLeader *hintTargets) {
	if j.pending == nil {
		return // refused by Begin, answered already
	}
	err := j.pending.Wait(ctx)
	if err == nil && rc.h.SelfFenced != nil && rc.h.SelfFenced() {
		// Durable, perhaps, but the broker may have been declared dead while it waited: a
		// newer leader may already serve the partition. Unacknowledged records may exist;
		// acknowledged ones must never be lost, so this one is not acknowledged.
		rc.h.Metrics.selfFencedAppend()
		err = fmt.Errorf("%w: the heartbeat Lease expired while the append waited", storage.ErrNotLeader)
	}
	rc.answerAppend(j, j.pending.Result, err, notLeader)
}

// answerAppend fills one job's answer from its append's result or error; a
// NOT_LEADER_OR_FOLLOWER answer is recorded in notLeader for the KIP-951 hints.
func (rc *requestContext) answerAppend(j *produceJob, res storage.AppendResult, err error, notLeader *hintTargets) {
	if code := storageCode(err); code != 0 {
		setProduceError(j.out, code, err.Error())
		if code == kerr.NotLeaderForPartition.Code {
			notLeader.add(j.topic, j.out.Partition, produceLeaderSetter(j.out))
		}
		return
	}
	j.out.BaseOffset, j.out.LogAppendTime, j.out.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
	if !res.Duplicate {
		rc.h.Metrics.bytesIn(j.topic, j.size)
	}
}

func setProduceError(pr *kmsg.ProduceResponseTopicPartition, code int16, msg string) {
	pr.ErrorCode, pr.BaseOffset = code, -1
	if msg != "" {
		pr.ErrorMessage = &msg
	}
}

// Record batch v2 header fields the handler reads (DATAPLANE.md §1.1).
const (
	batchLengthOffset     = 8
	batchMagicOffset      = 16
	batchAttributesOffset = 21
	batchOverhead         = 12 // baseOffset + batchLength: the bytes batchLength does not count
	codecMask             = 0x07
	codecZstd             = 4
	attrTransactional     = 0x10
)

// checkProduceRecords is ProduceRequest.validateRecords for v3+: exactly one batch, magic 2,
// no zstd before v7; and no transactional batch (there is no transaction to be part of).
// It returns the batch without any trailing partial bytes. Storage checks the rest (CRC,
// counts, sizes, sequences).
func checkProduceRecords(version int16, b []byte) ([]byte, int16, string) {
	if len(b) < batchAttributesOffset+2 {
		return nil, kerr.InvalidRecord.Code, fmt.Sprintf("Produce requests with version %d must have at least one record batch per partition", version)
	}
	if b[batchMagicOffset] != 2 {
		return nil, kerr.InvalidRecord.Code, fmt.Sprintf("Produce requests with version %d are only allowed to contain record batches with magic version 2", version)
	}
	size := batchOverhead + int64(int32(binary.BigEndian.Uint32(b[batchLengthOffset:])))
	if size < batchOverhead || size > int64(len(b)) {
		return nil, kerr.InvalidRecord.Code, fmt.Sprintf("Produce requests with version %d must have at least one record batch per partition", version)
	}
	attrs := binary.BigEndian.Uint16(b[batchAttributesOffset:])
	if version < 7 && attrs&codecMask == codecZstd {
		return nil, kerr.UnsupportedCompressionType.Code, fmt.Sprintf("Produce requests with version %d are not allowed to use ZStandard compression", version)
	}
	if rest := b[size:]; len(rest) >= batchOverhead {
		if next := batchOverhead + int64(int32(binary.BigEndian.Uint32(rest[batchLengthOffset:]))); next >= batchOverhead && next <= int64(len(rest)) {
			return nil, kerr.InvalidRecord.Code, fmt.Sprintf("Produce requests with version %d are only allowed to contain exactly one record batch per partition", version)
		}
	}
	if attrs&attrTransactional != 0 {
		return nil, kerr.InvalidTxnState.Code, "paddock does not support transactions yet: a transactional batch cannot be part of an ongoing transaction"
	}
	return b[:size], 0, ""
}

// Record batch v2 timestamp fields (DATAPLANE.md §1.1).
const (
	batchBaseTimestampOffset = 27
	batchMaxTimestampOffset  = 35
)

// checkTimestamps refuses a CreateTime batch whose timestamps lie more than beforeMax ms in
// the past or afterMax ms in the future (message.timestamp.before/after.max.ms; unbounded by
// default) with INVALID_TIMESTAMP. Apache checks every record; this checks the batch's base
// and max timestamps, which bound every record a client writes (deltas from the base are not
// negative in any client paddock knows), without decompressing.
func checkTimestamps(b []byte, beforeMax, afterMax, nowMs int64) (int16, string) {
	if len(b) < batchMaxTimestampOffset+8 {
		return 0, "" // storage refuses it
	}
	base := int64(binary.BigEndian.Uint64(b[batchBaseTimestampOffset:]))
	maxTs := int64(binary.BigEndian.Uint64(b[batchMaxTimestampOffset:]))
	for _, ts := range []int64{base, maxTs} {
		if ts < 0 {
			continue // no timestamp (-1): nothing to check
		}
		if (beforeMax < math.MaxInt64 && nowMs-ts > beforeMax) || (afterMax < math.MaxInt64 && ts-nowMs > afterMax) {
			return kerr.InvalidTimestamp.Code, fmt.Sprintf("Timestamp %d of message is out of range. The timestamp should be within [%d, %d]",
				ts, nowMs-min(beforeMax, nowMs), nowMs+min(afterMax, math.MaxInt64-nowMs))
		}
	}
	return 0, ""
}

// produceLeaderSetter fills pr's KIP-951 CurrentLeader.
func produceLeaderSetter(pr *kmsg.ProduceResponseTopicPartition) func(leader, epoch int32) {
	return func(leader, epoch int32) { pr.CurrentLeader.LeaderID, pr.CurrentLeader.LeaderEpoch = leader, epoch }
}
