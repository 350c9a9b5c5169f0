package broker

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/acl"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// Fetch (key 1): versions 4-16 (docs/dataplane.md, "Fetch").
//
// Behaviour:
//   - Record batches v2 only: versions 0-3 read the old message formats, which paddock does
//     not store (Apache 3.7 offers 0-16).
//   - Per partition, in Apache's order: an unknown topic or partition index is answered with
//     its error and does not end the wait; a CurrentLeaderEpoch below the view's epoch →
//     FENCED_LEADER_EPOCH, above → UNKNOWN_LEADER_EPOCH; not led or not taken over here →
//     NOT_LEADER_OR_FOLLOWER (KAFKA_STORAGE_ERROR when a storage error took it offline); a
//     LastFetchedEpoch whose epoch ended before the fetch offset → DivergingEpoch, one newer
//     than every epoch of the log (no end to truncate to) → OFFSET_OUT_OF_RANGE; a fetch
//     offset below the log start or past the log end → OFFSET_OUT_OF_RANGE. Any of these but
//     the unknown topic or partition ends the wait. Error partitions carry high watermark,
//     last stable offset and log start -1.
//   - Records are never null: a partition without data (or with an error) carries an empty
//     record set, as Apache's MemoryRecords.EMPTY (librdkafka rejects a null one: "invalid
//     MessageSetSize -1").
//   - Records are whole stored batches below the high watermark only (a consumer never reads
//     a record a takeover could lose), passed from the log file into the answer as bytes,
//     never decoded, and written around the encoded answer (codec.go, encodeFetchFrame).
//   - Isolation (docs/transactions.md, "Reading committed data"): READ_COMMITTED
//     (isolation_level 1) reads only below the last stable offset and answers the aborted
//     transactions overlapping the returned batches (storage.Log.ReadSectionCommitted,
//     Apache's collectAbortedTxns) — an empty list when there are none, null under
//     READ_UNCOMMITTED. Both levels answer LastStableOffset = the log's LSO, as Apache does.
//   - Sizes: at most min(max_bytes, fetch.max.bytes = 55 MiB) of records, each partition at
//     most its partition_max_bytes, except that the first partition with data returns its
//     first batch whole even when it is larger than both (a consumer always makes progress);
//     a later partition whose first batch does not fit returns nothing.
//   - Waiting: the answer goes at once when max_wait_ms ≤ 0, when no partition is served,
//     when an error above ends the wait, or when min_bytes (capped by the size limit) are
//     there; otherwise it waits on the high-watermark channels of the partitions that had no
//     data (storage closes them when a durable append moves the high watermark, or the log
//     stops — the last stable offset moves only with the high watermark or the log start, so
//     they wake a READ_COMMITTED wait too), re-reads those that moved, and answers at
//     min_bytes or max_wait_ms — never polling. A broker shutting down ends every wait at once.
//   - __consumer_offsets is read from the offsets topic view (offsets_topic.go,
//     docs/groups.md "The offsets topic view") under the same size and waiting rules.
//   - Sessions (KIP-227) are not kept: a full fetch (session epoch 0 or -1) is answered with
//     session id 0, which clients read as "no session" (Apache does the same when its session
//     cache is full); an incremental fetch → FETCH_SESSION_ID_NOT_FOUND, so the client falls
//     back to full fetches. Forgotten topics are ignored (nothing is remembered).
//   - Authorization (Apache's handleFetchRequest): READ on each topic, else its partitions
//     answer TOPIC_AUTHORIZATION_FAILED (below v13 before the existence check; from v13 an
//     unknown topic id is UNKNOWN_TOPIC_ID first).
//
// Version notes:
//   - v9: CurrentLeaderEpoch (-1 = none).
//   - v4-v9: a zstd batch → UNSUPPORTED_COMPRESSION_TYPE (zstd came with v10).
//   - v12: LastFetchedEpoch and DivergingEpoch.
//   - v13: topics by id; an unknown id → UNKNOWN_TOPIC_ID (below v13 an unknown name →
//     UNKNOWN_TOPIC_OR_PARTITION).
//   - v16 (KIP-951): CurrentLeader and the response's NodeEndpoints for NOT_LEADER_OR_FOLLOWER
//     and FENCED_LEADER_EPOCH partitions.
func init() { register(1, 4, 16, handleFetch) }

// fetchMaxBytes is Apache's fetch.max.bytes: the most record bytes one answer carries.
const fetchMaxBytes = 55 << 20

// fetchPart is one requested partition that is served here.
type fetchPart struct {
	topic    string
	log      *storage.Log
	offset   int64
	maxBytes int32
	// isolation is the request's isolation level: ReadCommitted reads below the LSO only.
	isolation storage.Isolation
	out       *kmsg.FetchResponseTopicPartition
	// pending: served but without data so far; read again when hw (the channel taken before
	// its last read) is closed.
	pending bool
	hw      <-chan struct{}
	// view, when set, is __consumer_offsets' (offsets_topic.go), read instead of log.
	view *offsetsView
}

// fetchState is one Fetch in progress.
type fetchState struct {
	rc        *requestContext
	version   int16
	remaining int         // record bytes the answer may still take
	total     int         // record bytes in the answer so far
	anyData   bool        // some partition returned records (the first-batch rule is used up)
	ended     bool        // an error that ends the wait at once
	notLeader hintTargets // partitions answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
}

func handleFetch(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	start := time.Now()
	defer func() { rc.h.Metrics.fetchLatency(time.Since(start)) }()
	req := kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SessionID = 0
	if req.SessionEpoch != 0 && req.SessionEpoch != -1 {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, nil
	}
	f := &fetchState{
		rc: rc, version: req.Version,
		remaining: int(max(min(req.MaxBytes, fetchMaxBytes), 0)),
	}
	parts := f.resolve(req, resp)

	minBytes := min(int(max(req.MinBytes, 0)), f.remaining)
	var timer *time.Timer
	for {
		for _, p := range parts {
			if p.pending && closedOrNil(p.hw) {
				f.read(p)
			}
		}
		if f.ended || f.total >= minBytes || f.remaining <= 0 || req.MaxWaitMillis <= 0 || !anyPending(parts) {
			break
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(start.Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)))
			defer timer.Stop()
		}
		if !f.wait(parts, timer.C) {
			// Time is up (or the broker is stopping): one last look, as Apache completes a
			// delayed fetch by reading again.
			for _, p := range parts {
				if p.pending && closedOrNil(p.hw) {
					f.read(p)
				}
			}
			break
		}
	}
	if req.Version >= 16 && len(f.notLeader) > 0 {
		for _, e := range f.notLeader.resolve(rc) {
			b := kmsg.NewFetchResponseBroker()
			b.NodeID, b.Host, b.Port, b.Rack = e.id, e.host, e.port, e.rack
			resp.Brokers = append(resp.Brokers, b)
		}
	}
	return resp, nil
}

// resolve builds the answer's topics and partitions, answering every partition that is not
// served here, and returns the served ones.
func (f *fetchState) resolve(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) []*fetchPart {
	rc := f.rc
	var parts []*fetchPart
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		ot := &resp.Topics[i]
		*ot = kmsg.NewFetchResponseTopic()
		ot.Topic, ot.TopicID = rt.Topic, rt.TopicID
		var (
			t     *cluster.Topic
			known bool
		)
		unknown := kerr.UnknownTopicOrPartition.Code
		if req.Version >= 13 {
			t, known = rc.view.TopicByID(rt.TopicID)
			unknown = kerr.UnknownTopicID.Code
		} else {
			t, known = rc.view.Topic(rt.Topic)
		}
		offsetsTopic := rc.isOffsetsTopic(req.Version, rt.Topic, rt.TopicID)
		authorized := rc.allowedTopic(acl.OpRead, fetchedTopicName(req.Version, rt.Topic, t, known, offsetsTopic))
		ot.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			op := &ot.Partitions[j]
			*op = kmsg.NewFetchResponseTopicPartition()
			op.Partition, op.RecordBatches = rp.Partition, noRecords
			if !authorized && (known || offsetsTopic || req.Version < 13) {
				setFetchError(op, kerr.TopicAuthorizationFailed.Code)
				continue
			}
			if offsetsTopic {
				if p := f.offsetsTopicPart(rp, op, req.IsolationLevel); p != nil {
					parts = append(parts, p)
				}
				continue
			}
			if !known {
				setFetchError(op, unknown)
				continue
			}
			current := int32(-1)
			if req.Version >= 9 {
				current = rp.CurrentLeaderEpoch
			}
			sp := rc.partitionAfterTakeover(t, rp.Partition, current, time.Duration(req.MaxWaitMillis)*time.Millisecond)
			if sp.code != 0 {
				setFetchError(op, sp.code)
				if sp.code != kerr.UnknownTopicOrPartition.Code {
					f.ended = true
				}
				if sp.code == kerr.NotLeaderForPartition.Code || sp.code == kerr.FencedLeaderEpoch.Code {
					f.notLeader.add(t.Name, rp.Partition, func(l, e int32) { op.CurrentLeader.LeaderID, op.CurrentLeader.LeaderEpoch = l, e })
				}
				continue
			}
			p := &fetchPart{topic: t.Name, log: sp.log, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, out: op, pending: true}
			if req.IsolationLevel == 1 {
				p.isolation = storage.ReadCommitted
				op.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			}
			if req.Version >= 12 && rp.LastFetchedEpoch >= 0 && f.diverged(p, rp.LastFetchedEpoch) {
				continue
			}
			parts = append(parts, p)
		}
	}
	return parts
}

// diverged applies the LastFetchedEpoch check (Partition.fetchRecords): when the fetcher's
// last epoch ended before its fetch offset here (or is unknown below it), the answer is the
// DivergingEpoch to truncate to, with no records, and the wait ends. When this log cannot say
// where that epoch ends at all — it is newer than every epoch here, (-1, -1) — there is
// nothing to truncate to: OFFSET_OUT_OF_RANGE, as Apache answers, so the client resets.
func (f *fetchState) diverged(p *fetchPart, lastFetched int32) bool {
	epoch, end, err := p.log.EpochEndOffset(lastFetched)
	if err == nil && (epoch < 0 || end < 0) {
		err = fmt.Errorf("%w: the end of last fetched epoch %d is unknown here", storage.ErrOffsetOutOfRange, lastFetched)
	}
	if err != nil {
		f.readError(p, err)
		return true
	}
	if end >= p.offset && epoch >= lastFetched {
		return false
	}
	p.out.DivergingEpoch.Epoch, p.out.DivergingEpoch.EndOffset = epoch, end
	if o, err := p.log.Offsets(); err == nil {
		lso, _ := p.log.LastStableOffset()
		p.out.HighWatermark, p.out.LastStableOffset, p.out.LogStartOffset = o.HighWatermark, lso, o.LogStart
	}
	p.pending, f.ended = false, true
	return true
}

// read reads p once, taking its high-watermark channel first so an append after the read
// always wakes the wait. The records are kept from their file or in memory (keepRecords).
func (f *fetchState) read(p *fetchPart) {
	if p.view != nil {
		f.readOffsetsTopic(p)
		return
	}
	if p.isolation == storage.ReadCommitted {
		_, p.hw = p.log.LastStableOffset() // the high watermark's channel: the LSO moves with it
	} else {
		_, p.hw = p.log.HighWatermark()
	}
	res, sec, err := readSection(p, f.partitionLimit(p), !f.anyData)
	if err != nil {
		f.readError(p, err)
		return
	}
	p.out.HighWatermark, p.out.LastStableOffset, p.out.LogStartOffset = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
	setAborted(p, res.Aborted)
	if sec.Len == 0 {
		sec.Release()
		return
	}
	if f.version < 10 && sec.HasCodec(codecZstd) {
		sec.Release()
		p.pending = false
		setFetchError(p.out, kerr.UnsupportedCompressionType.Code)
		f.ended = true
		return
	}
	n := f.keepRecords(p, sec, !f.anyData)
	if n == 0 {
		setAborted(p, nil) // no records: no aborted transactions either
		return             // the answer budget had no room: this partition waits for the next fetch
	}
	p.pending = false
	f.anyData = true
	f.total += int(n)
	f.remaining -= int(n)
	f.rc.h.Metrics.bytesOut(p.topic, int(n))
}

// readSection reads p's batches at its isolation level (ReadSection, or ReadSectionCommitted
// for READ_COMMITTED).
func readSection(p *fetchPart, maxBytes int, atLeastOne bool) (storage.ReadResult, *storage.Section, error) {
	if p.isolation == storage.ReadCommitted {
		return p.log.ReadSectionCommitted(p.offset, maxBytes, atLeastOne)
	}
	return p.log.ReadSection(p.offset, maxBytes, atLeastOne)
}

// setAborted answers a READ_COMMITTED partition's aborted transactions (those overlapping
// the batches read), keeping the empty, non-null list when there are none. A
// READ_UNCOMMITTED read has none (aborted is nil) and its list stays null.
func setAborted(p *fetchPart, aborted []storage.AbortedTxn) {
	if p.isolation != storage.ReadCommitted {
		return
	}
	out := make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, len(aborted))
	for i, a := range aborted {
		out[i] = kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		out[i].ProducerID, out[i].FirstOffset = a.ProducerID, a.FirstOffset
	}
	p.out.AbortedTransactions = out
}

// partitionLimit is how many record bytes p may return: its partition_max_bytes, within what
// the answer may still take.
func (f *fetchState) partitionLimit(p *fetchPart) int {
	return min(int(max(p.maxBytes, 0)), f.remaining)
}

func (f *fetchState) readError(p *fetchPart, err error) {
	code := storageCode(err)
	setFetchError(p.out, code)
	p.pending, f.ended = false, true
	if code == kerr.NotLeaderForPartition.Code {
		f.notLeader.add(p.topic, p.out.Partition, func(l, e int32) { p.out.CurrentLeader.LeaderID, p.out.CurrentLeader.LeaderEpoch = l, e })
	}
}

// wait blocks until a pending partition's high watermark moves (true), or until timeout
// fires, the broker stops or the server closes (false).
func (f *fetchState) wait(parts []*fetchPart, timeout <-chan time.Time) bool {
	cases := make([]reflect.SelectCase, 0, len(parts)+3)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timeout)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(f.rc.stopping)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(f.rc.ctx.Done())},
	)
	for _, p := range parts {
		if p.pending {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.hw)})
		}
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen >= 3
}

func anyPending(parts []*fetchPart) bool {
	for _, p := range parts {
		if p.pending {
			return true
		}
	}
	return false
}

// closedOrNil is true for a channel that is closed, and for nil (never read yet).
func closedOrNil(ch <-chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// fetchedTopicName is the name a Fetch topic is authorized by: the request's below v13, else
// the name of the topic its id resolves to ("" for an unknown id, which answers
// UNKNOWN_TOPIC_ID whatever the ACLs: Apache resolves the id first).
func fetchedTopicName(version int16, requested string, t *cluster.Topic, known, offsetsTopic bool) string {
	switch {
	case version < 13:
		return requested
	case offsetsTopic:
		return topicname.ConsumerOffsets
	case known:
		return t.Name
	}
	return ""
}

func setFetchError(op *kmsg.FetchResponseTopicPartition, code int16) {
	op.ErrorCode = code
	op.HighWatermark, op.LastStableOffset, op.LogStartOffset = -1, -1, -1
	op.RecordBatches = noRecords
	op.AbortedTransactions = nil
}

// noRecords is the empty, non-null record set (never written to).
var noRecords = []byte{}

// hasZstd reports whether any batch in b (whole stored batches) is zstd-compressed: only the
// headers are looked at.
func hasZstd(b []byte) bool {
	for len(b) >= batchAttributesOffset+2 {
		if binary.BigEndian.Uint16(b[batchAttributesOffset:])&codecMask == codecZstd {
			return true
		}
		size := batchOverhead + int(int32(binary.BigEndian.Uint32(b[batchLengthOffset:])))
		if size <= batchOverhead || size > len(b) {
			return false
		}
		b = b[size:]
	}
	return false
}

// responseSizeHint is about how many bytes resp encodes to: the record bytes of a Fetch
// answer plus room for its other fields; a small default for everything else.
func responseSizeHint(resp kmsg.Response) int {
	f, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 512
	}
	n := 64
	for i := range f.Topics {
		n += 64 + len(f.Topics[i].Topic)
		for j := range f.Topics[i].Partitions {
			n += 96 + len(f.Topics[i].Partitions[j].RecordBatches)
		}
	}
	return n
}
