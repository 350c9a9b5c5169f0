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

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/broker/storage/records"
	"github.com/paddock-dev/paddock/internal/acl"
)

// Produce (key 0): versions 3-10 (docs/dataplane.md, "Produce").
//
// Behaviour:
//   - Record batches v2 only: versions 0-2 carry the old message formats, which paddock does
//     not store, so they are not advertised (Apache 3.7 offers 0-10).
//   - Per partition, in Apache's order (KafkaApis.handleProduceRequest, ReplicaManager): an
//     unknown topic or partition → UNKNOWN_TOPIC_OR_PARTITION; the records
//     (ProduceRequest.validateRecords): no whole batch or magic ≠ 2 → INVALID_RECORD, zstd
//     below v7 → UNSUPPORTED_COMPRESSION_TYPE, more than one batch → INVALID_RECORD (a
//     trailing partial batch is dropped, as Apache's batch iterator drops it); a
//     transactional batch → INVALID_TXN_STATE (no transaction can be ongoing yet); acks ∉
//     {-1, 0, 1} → INVALID_REQUIRED_ACKS; not led or not taken over here →
//     NOT_LEADER_OR_FOLLOWER; self-fenced → NOT_LEADER_OR_FOLLOWER; a CreateTime batch
//     outside message.timestamp.before/after.max.ms (unbounded by default; the batch's base
//     and max timestamps) → INVALID_TIMESTAMP; then storage.Append, whose errors map as
//     storageCode says (CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE,
//     RECORD_LIST_TOO_LARGE, KAFKA_STORAGE_ERROR, OUT_OF_ORDER_SEQUENCE_NUMBER,
//     INVALID_PRODUCER_EPOCH, REQUEST_TIMED_OUT when timeout_ms passes first).
//   - Every requested partition gets an entry; failures carry base offset -1.
//   - Authorization (docs/security.md, "Authorization"; Apache's handleProduceRequest): a
//     request with a transactional batch needs WRITE on its transactional id, else every
//     partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then each topic needs WRITE,
//     else its partitions answer TOPIC_AUTHORIZATION_FAILED (before the existence check, so
//     an unauthorized client learns nothing of which topics exist). Nothing refused is
//     written.
//   - A producer's retry of one of its last five batches gets the original offsets back.
//   - Acknowledgement (docs/dataplane.md, "Produce"): acks=-1 once the batch is fsynced and
//     the fence still holds the leader's epoch, acks=1 once written and fence-checked, acks=0
//     once written. acks=0 gets no answer at all; if any of its partitions failed the
//     connection is closed, as Apache does, so the producer notices.
//   - A broker that has not renewed its Lease for a session timeout (self-fenced,
//     docs/dataplane.md "Self-fence") refuses appends, and refuses to acknowledge one that
//     completes after it became self-fenced.
//   - timeout_ms ≤ 0 sets no deadline of its own.
//   - The partitions of one request are appended in parallel, one goroutine each; a
//     partition named twice is appended in request order. The wait for acknowledgements is
//     answered later (pipelining: the connection reads on meanwhile).
//   - Answers carry the append time for message.timestamp.type=LogAppendTime topics (else
//     -1).
//
// Version notes:
//   - v5: the log-start offset.
//   - v8: an error message per failed partition.
//   - v10 (KIP-951): a NOT_LEADER_OR_FOLLOWER partition carries CurrentLeader (the view's
//     leader and epoch) and the response's NodeEndpoints lists those leaders on the request's
//     listener, so a client switches leader without a metadata round trip.
func init() { register(0, 3, 10, handleProduce) }

// errAcksZeroFailed closes the connection of an acks=0 Produce that failed somewhere.
var errAcksZeroFailed = errors.New("acks=0 produce failed on a partition; closing the connection so the producer notices")

func handleProduce(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	p := newProduce(rc, kreq.(*kmsg.ProduceRequest))
	p.plan() // answer what cannot be appended, queue the rest
	ctx, cancel := p.deadline()
	p.begin() // write the batches: the next request appends after them
	finish := func() (kmsg.Response, error) {
		defer cancel()
		return p.finish(ctx), nil
	}
	switch {
	case p.req.Acks == 0:
		_, _ = finish() // written is all acks=0 waits for
		return nil, p.acksZeroOutcome()
	case len(p.order) == 0:
		return finish()
	}
	// The batches are in the logs, in request order; only their acknowledgement is left,
	// which may wait for an fsync. Let the connection read its next request meanwhile.
	rc.answerLater(finish)
	return nil, nil
}

// produce is one Produce request in progress.
type produce struct {
	rc         *requestContext
	req        *kmsg.ProduceRequest
	resp       *kmsg.ProduceResponse
	start      time.Time
	selfFenced bool // when the request arrived
	// jobs are the partitions that reach the append, by partition in request order; order
	// lists their keys in request order.
	jobs  map[partitionKey][]*produceJob
	order []partitionKey
	// notLeader collects the partitions answered NOT_LEADER_OR_FOLLOWER, for their KIP-951
	// hints.
	notLeader hintTargets
}

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

func newProduce(rc *requestContext, req *kmsg.ProduceRequest) *produce {
	return &produce{
		rc: rc, req: req, resp: req.ResponseKind().(*kmsg.ProduceResponse),
		start: time.Now(), selfFenced: rc.selfFenced(),
		jobs: map[partitionKey][]*produceJob{},
	}
}

// selfFenced reports the self-fence now (docs/dataplane.md, "Self-fence").
func (rc *requestContext) selfFenced() bool { return rc.h.SelfFenced != nil && rc.h.SelfFenced() }

// plan gives every requested partition its answer entry, answers those that cannot reach
// the append and queues the others as jobs.
func (p *produce) plan() {
	p.resp.Topics = make([]kmsg.ProduceResponseTopic, len(p.req.Topics))
	txnRefused := p.rc.enforcing() && hasTransactionalBatch(p.req) &&
		(p.req.TransactionID == nil || !p.rc.allowed(v1alpha1.ACLTransactionalID, *p.req.TransactionID, acl.OpWrite))
	for i, rt := range p.req.Topics {
		out := &p.resp.Topics[i]
		*out = kmsg.NewProduceResponseTopic()
		out.Topic = rt.Topic
		out.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		t, known := p.rc.view.Topic(rt.Topic)
		internal, msg := produceInternalRefusal(rt.Topic)
		authorized := p.rc.allowedTopic(acl.OpWrite, rt.Topic)
		for j, rp := range rt.Partitions {
			pr := &out.Partitions[j]
			*pr = kmsg.NewProduceResponseTopicPartition()
			pr.Partition, pr.BaseOffset = rp.Partition, -1
			if txnRefused {
				setProduceError(pr, kerr.TransactionalIDAuthorizationFailed.Code, msgTxnAuthorizationFailed)
				continue
			}
			if !authorized {
				setProduceError(pr, kerr.TopicAuthorizationFailed.Code, msgTopicAuthorizationFailed)
				continue
			}
			if internal != 0 {
				setProduceError(pr, internal, msg)
				continue
			}
			if !known {
				setProduceError(pr, kerr.UnknownTopicOrPartition.Code, "This server does not host this topic-partition.")
				continue
			}
			p.planPartition(t, rp, pr)
		}
	}
}

// planPartition checks one partition of known topic t in Apache's order and queues its job,
// or answers its error.
func (p *produce) planPartition(t *cluster.Topic, rp kmsg.ProduceRequestTopicPartition, pr *kmsg.ProduceResponseTopicPartition) {
	sp := p.rc.partitionAfterTakeover(t, rp.Partition, -1, time.Duration(p.req.TimeoutMillis)*time.Millisecond)
	if sp.code == kerr.UnknownTopicOrPartition.Code {
		setProduceError(pr, sp.code, "This server does not host this topic-partition.")
		return
	}
	records, code, msg := p.check(t, sp, rp.Records)
	if code != 0 {
		setProduceError(pr, code, msg)
		if code == kerr.NotLeaderForPartition.Code {
			p.notLeader.add(t.Name, rp.Partition, produceLeaderSetter(pr))
		}
		return
	}
	key := partitionKey{t.ID, rp.Partition}
	if _, seen := p.jobs[key]; !seen {
		p.order = append(p.order, key)
	}
	p.jobs[key] = append(p.jobs[key], &produceJob{topic: t.Name, log: sp.log, records: records, out: pr})
}

// check runs the checks between a partition's existence and its append, in Apache's order:
// the records, acks, leadership here, the self-fence, the timestamps. It returns the batch to
// append (without trailing partial bytes), or the error code and message.
func (p *produce) check(t *cluster.Topic, sp servedPartition, raw []byte) ([]byte, int16, string) {
	records, code, msg := checkProduceRecords(p.req.Version, raw)
	switch {
	case code != 0:
	case p.req.Acks != -1 && p.req.Acks != 0 && p.req.Acks != 1:
		code, msg = kerr.InvalidRequiredAcks.Code, fmt.Sprintf("acks=%d: must be -1, 0 or 1", p.req.Acks)
	case sp.code != 0:
		code = sp.code
	case p.selfFenced:
		code, msg = kerr.NotLeaderForPartition.Code, "this broker has not renewed its heartbeat Lease for a session timeout and acknowledges nothing"
		p.rc.h.Metrics.selfFencedAppend()
	case !t.Config.LogAppendTime():
		code, msg = checkTimestamps(records, t.Config.MessageTimestampBeforeMaxMs, t.Config.MessageTimestampAfterMaxMs, p.start.UnixMilli())
	}
	if code == 0 && t.Config.Compact() {
		code, msg = checkKeys(records, t.Name, sp.part.Index)
	}
	return records, code, msg
}

// checkKeys refuses a batch for a compacted topic holding a record without a key, as Apache's
// LogValidator does (the cleaner would drop it): INVALID_RECORD. The records are decompressed
// to look, within a bound (a batch decompressing past it is refused too, never allocated).
func checkKeys(b []byte, topic string, partition int32) (int16, string) {
	if len(b) < batchHeaderBytes {
		return 0, "" // storage refuses it with the right error
	}
	attrs := binary.BigEndian.Uint16(b[batchAttributesOffset:])
	count := int32(binary.BigEndian.Uint32(b[batchRecordCountOffset:]))
	limit := min(max(64*len(b), 1<<20), 256<<20)
	keyless, err := records.NullKey(attrs, b[batchHeaderBytes:], count, limit)
	switch {
	case err != nil:
		return kerr.InvalidRecord.Code, fmt.Sprintf("The records of a batch for compacted topic partition %s-%d do not decode: %v", topic, partition, err)
	case keyless:
		return kerr.InvalidRecord.Code, fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d.", topic, partition)
	}
	return 0, ""
}

// begin writes every job's batch (storage.Log.Begin), the partitions in parallel and a
// partition named twice in request order, and returns once all are written or refused: so a
// connection's next request appends after this one. A refused job is answered here.
func (p *produce) begin() {
	acks := storage.Acks(p.req.Acks)
	write := func(jobs []*produceJob) {
		for _, j := range jobs {
			j.pending, j.err = j.log.Begin(j.records, acks)
			j.size, j.records = len(j.records), nil // the frame buffer is reused by the next request
		}
	}
	if len(p.order) == 1 {
		write(p.jobs[p.order[0]])
	} else {
		var wg sync.WaitGroup
		for _, key := range p.order {
			wg.Add(1)
			go func() {
				defer wg.Done()
				write(p.jobs[key])
			}()
		}
		wg.Wait()
	}
	for _, key := range p.order {
		for _, j := range p.jobs[key] {
			if j.err != nil {
				p.answer(j, storage.AppendResult{}, j.err)
			}
		}
	}
}

// deadline is the context the acknowledgements are awaited under: the request's timeout_ms
// (none of its own when ≤ 0) within the request's context.
func (p *produce) deadline() (context.Context, context.CancelFunc) {
	if p.req.TimeoutMillis <= 0 {
		return p.rc.ctx, func() {}
	}
	return context.WithTimeout(p.rc.ctx, time.Duration(p.req.TimeoutMillis)*time.Millisecond)
}

// finish waits for every begun append's acknowledgement, in request order, and completes the
// answer (from v10 with the KIP-951 leader endpoints).
func (p *produce) finish(ctx context.Context) kmsg.Response {
	for _, key := range p.order {
		for _, j := range p.jobs[key] {
			p.await(ctx, j)
		}
	}
	p.rc.h.Metrics.produceLatency(time.Since(p.start))
	if p.req.Version >= 10 && len(p.notLeader) > 0 {
		for _, e := range p.notLeader.resolve(p.rc) {
			b := kmsg.NewProduceResponseBroker()
			b.NodeID, b.Host, b.Port, b.Rack = e.id, e.host, e.port, e.rack
			p.resp.Brokers = append(p.resp.Brokers, b)
		}
	}
	return p.resp
}

// acksZeroOutcome is what an acks=0 request, which gets no answer, ends with: nothing, or
// errAcksZeroFailed (closing the connection) when any partition failed.
func (p *produce) acksZeroOutcome() error {
	for i := range p.resp.Topics {
		for _, pr := range p.resp.Topics[i].Partitions {
			if pr.ErrorCode != 0 {
				return errAcksZeroFailed
			}
		}
	}
	return nil
}

// await waits for one begun job's acknowledgement and fills its answer.
func (p *produce) await(ctx context.Context, j *produceJob) {
	if j.pending == nil {
		return // refused by Begin, answered already
	}
	err := j.pending.Wait(ctx)
	if err == nil && p.rc.selfFenced() {
		// Durable, perhaps, but the broker may have been declared dead while it waited: a
		// newer leader may already serve the partition. Unacknowledged records may exist;
		// acknowledged ones must never be lost, so this one is not acknowledged.
		p.rc.h.Metrics.selfFencedAppend()
		err = fmt.Errorf("%w: the heartbeat Lease expired while the append waited", storage.ErrNotLeader)
	}
	p.answer(j, j.pending.Result, err)
}

// answer fills one job's answer from its append's result or error; a NOT_LEADER_OR_FOLLOWER
// answer is recorded for the KIP-951 hints.
func (p *produce) answer(j *produceJob, res storage.AppendResult, err error) {
	if code := storageCode(err); code != 0 {
		setProduceError(j.out, code, err.Error())
		if code == kerr.NotLeaderForPartition.Code {
			p.notLeader.add(j.topic, j.out.Partition, produceLeaderSetter(j.out))
		}
		return
	}
	j.out.BaseOffset, j.out.LogAppendTime, j.out.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
	if !res.Duplicate {
		p.rc.h.Metrics.bytesIn(j.topic, j.size)
	}
}

func setProduceError(pr *kmsg.ProduceResponseTopicPartition, code int16, msg string) {
	pr.ErrorCode, pr.BaseOffset = code, -1
	if msg != "" {
		pr.ErrorMessage = &msg
	}
}

// Record batch v2 header fields the handler reads (docs/dataplane.md, "Record batch v2").
const (
	batchLengthOffset      = 8
	batchMagicOffset       = 16
	batchAttributesOffset  = 21
	batchOverhead          = 12 // baseOffset + batchLength: the bytes batchLength does not count
	codecMask              = 0x07
	codecZstd              = 4
	attrTransactional      = 0x10
	batchRecordCountOffset = 57
)

// checkProduceRecords is ProduceRequest.validateRecords for v3+: exactly one batch, magic 2,
// no zstd before v7. A transactional batch is checked by storage (the producer's open
// transaction on the partition, docs/transactions.md).
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
	return b[:size], 0, ""
}

// hasTransactionalBatch reports whether any partition of req carries a batch whose
// transactional attribute is set (Apache's RequestUtils.hasTransactionalRecords).
func hasTransactionalBatch(req *kmsg.ProduceRequest) bool {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			b := rp.Records
			if len(b) >= batchAttributesOffset+2 && b[batchMagicOffset] == 2 && binary.BigEndian.Uint16(b[batchAttributesOffset:])&attrTransactional != 0 {
				return true
			}
		}
	}
	return false
}

// Record batch v2 timestamp fields (docs/dataplane.md, "Record batch v2").
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
