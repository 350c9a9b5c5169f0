package broker_test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/brokertest"
)

// epochHistory is a partition written at two leader epochs on two brokers:
//
//	offsets 0-1  epoch 1  timestamp t0
//	offset  2    epoch 1  timestamp t0+2s
//	offset  3    epoch 2  timestamp t0+1s   (after moving to the other broker)
type epochHistory struct {
	c          *brokertest.Cluster
	t0         int64
	old, cur   int32 // the first leader and the current one
	oldC, curC *brokertest.Conn
}

func newEpochHistory(t *testing.T) *epochHistory {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2})
	c.CreateTopic("t", 1, nil)
	h := &epochHistory{c: c, t0: time.Now().Add(-10 * time.Minute).UnixMilli()}
	h.old, _ = c.Leader("t", 0)
	h.cur = 1 - h.old
	h.oldC, h.curC = brokertest.Dial(t, c.Addrs()[h.old]), brokertest.Dial(t, c.Addrs()[h.cur])
	b := func(ts int64, values ...string) []byte {
		bb := brokertest.Plain()
		for _, v := range values {
			bb.Values = append(bb.Values, []byte(v))
		}
		bb.Timestamp = ts
		return bb.Bytes()
	}
	for _, batch := range [][]byte{b(h.t0, "a", "b"), b(h.t0+2000, "c")} {
		if p, _ := produceOne(t, h.oldC, 10, "t", 0, batch); p.ErrorCode != 0 {
			t.Fatal(p)
		}
	}
	if epoch := c.Move("t", 0, h.cur); epoch != 2 {
		t.Fatalf("moved at epoch %d, want 2", epoch)
	}
	c.WaitServed()
	if p, _ := produceOne(t, h.curC, 10, "t", 0, b(h.t0+1000, "d")); p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Fatal(p)
	}
	return h
}

func listReq(v int16, parts ...kmsg.ListOffsetsRequestTopicPartition) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = v, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic, rt.Partitions = "t", parts
	req.Topics = append(req.Topics, rt)
	return req
}

func listPart(partition int32, ts int64, current int32) kmsg.ListOffsetsRequestTopicPartition {
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, ts, current
	return rp
}

// TestListOffsets pins ListOffsets' lookups and errors (docs/dataplane.md, "ListOffsets,
// OffsetForLeaderEpoch, InitProducerId").
func TestListOffsets(t *testing.T) {
	h := newEpochHistory(t)
	t0 := h.t0
	type want struct {
		code      *kerr.Error
		ts, off   int64
		epoch     int32
		oldOffset []int64
	}
	none := want{ts: -1, off: -1, epoch: -1}
	fail := func(e *kerr.Error) want { return want{code: e, ts: -1, off: -1, epoch: -1} }
	for _, tt := range []struct {
		name string
		conn *brokertest.Conn
		req  *kmsg.ListOffsetsRequest
		want want
	}{
		{"latest: the high watermark and the leader's epoch", h.curC, listReq(8, listPart(0, -1, -1)), want{ts: -1, off: 4, epoch: 2}},
		{"earliest: the log start and its epoch", h.curC, listReq(8, listPart(0, -2, -1)), want{ts: -1, off: 0, epoch: 1}},
		{"max timestamp: the last offset of the batch holding it", h.curC, listReq(8, listPart(0, -3, -1)), want{ts: t0 + 2000, off: 2, epoch: 1}},
		{"earliest local (v8): the log start", h.curC, listReq(8, listPart(0, -4, -1)), want{ts: -1, off: 0, epoch: 1}},
		{"a timestamp before everything: the first record", h.curC, listReq(8, listPart(0, t0-5000, -1)), want{ts: t0, off: 0, epoch: 1}},
		{"a timestamp between batches: the first record at or after it", h.curC, listReq(8, listPart(0, t0+500, -1)), want{ts: t0 + 2000, off: 2, epoch: 1}},
		{"a timestamp after everything: nothing, no error", h.curC, listReq(8, listPart(0, t0+9000, -1)), none},
		{"v1 has no epoch", h.curC, listReq(1, listPart(0, -1, -1)), want{ts: -1, off: 4, epoch: -1}},
		{"the current leader epoch", h.curC, listReq(4, listPart(0, -1, 2)), want{ts: -1, off: 4, epoch: 2}},
		{"an older current leader epoch", h.curC, listReq(4, listPart(0, -1, 1)), fail(kerr.FencedLeaderEpoch)},
		{"a newer current leader epoch", h.curC, listReq(4, listPart(0, -1, 3)), fail(kerr.UnknownLeaderEpoch)},
		{"the old leader", h.oldC, listReq(8, listPart(0, -1, -1)), fail(kerr.NotLeaderForPartition)},
		{"an unknown partition", h.curC, listReq(8, listPart(4, -1, -1)), fail(kerr.UnknownTopicOrPartition)},
		{"v0 latest", h.curC, listReq(0, listPart(0, -1, -1)), want{ts: -1, off: -1, epoch: -1, oldOffset: []int64{4}}},
		{"v0 earliest", h.curC, listReq(0, listPart(0, -2, -1)), want{ts: -1, off: -1, epoch: -1, oldOffset: []int64{0}}},
		{"v0 by timestamp", h.curC, listReq(0, listPart(0, t0+500, -1)), want{ts: -1, off: -1, epoch: -1, oldOffset: []int64{2}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := tt.conn.Request(tt.req).(*kmsg.ListOffsetsResponse)
			p := resp.Topics[0].Partitions[0]
			code := int16(0)
			if tt.want.code != nil {
				code = tt.want.code.Code
			}
			if p.ErrorCode != code || p.Timestamp != tt.want.ts || p.Offset != tt.want.off || p.LeaderEpoch != tt.want.epoch ||
				(tt.req.Version == 0 && !slices.Equal(p.OldStyleOffsets, tt.want.oldOffset)) {
				t.Fatalf("answer %+v, want %+v", p, tt.want)
			}
		})
	}
	t.Run("a partition named twice (v1+): INVALID_REQUEST for each", func(t *testing.T) {
		resp := h.curC.Request(listReq(7, listPart(0, -1, -1), listPart(0, -2, -1))).(*kmsg.ListOffsetsResponse)
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != kerr.InvalidRequest.Code {
				t.Fatalf("answer %+v, want INVALID_REQUEST", resp.Topics[0].Partitions)
			}
		}
	})
	t.Run("an unknown topic", func(t *testing.T) {
		req := listReq(8, listPart(0, -1, -1))
		req.Topics[0].Topic = "nope"
		if p := h.curC.Request(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("answer %+v", p)
		}
	})
}

// TestOffsetForLeaderEpoch pins OffsetForLeaderEpoch's answers from the epochs the segments
// carry (docs/dataplane.md, "ListOffsets, OffsetForLeaderEpoch, InitProducerId"), at every
// version, v2 (librdkafka's) included.
func TestOffsetForLeaderEpoch(t *testing.T) {
	h := newEpochHistory(t)
	req := func(v int16, epoch, current int32) *kmsg.OffsetForLeaderEpochRequest {
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		r.Version, r.ReplicaID = v, -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.LeaderEpoch, rp.CurrentLeaderEpoch = epoch, current
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return r
	}
	for v := int16(0); v <= 4; v++ {
		for _, tt := range []struct {
			name           string
			conn           *brokertest.Conn
			epoch, current int32
			code           *kerr.Error
			wantEpoch      int32
			wantEnd        int64
		}{
			{"the current epoch: the log end", h.curC, 2, -1, nil, 2, 4},
			{"an older epoch: where the next one starts", h.curC, 1, -1, nil, 1, 3},
			{"older than every epoch: the first epoch's start", h.curC, 0, -1, nil, 0, 0},
			{"newer than every epoch: unknown", h.curC, 5, -1, nil, -1, -1},
			{"the old leader", h.oldC, 1, -1, kerr.NotLeaderForPartition, -1, -1},
			{"an older current leader epoch", h.curC, 1, 1, kerr.FencedLeaderEpoch, -1, -1},
			{"a newer current leader epoch", h.curC, 1, 3, kerr.UnknownLeaderEpoch, -1, -1},
		} {
			if v < 2 && tt.current >= 0 {
				continue // CurrentLeaderEpoch exists from v2
			}
			t.Run(tt.name, func(t *testing.T) {
				resp := tt.conn.Request(req(v, tt.epoch, tt.current)).(*kmsg.OffsetForLeaderEpochResponse)
				p := resp.Topics[0].Partitions[0]
				code := int16(0)
				if tt.code != nil {
					code = tt.code.Code
				}
				wantEpoch := tt.wantEpoch
				if v == 0 {
					wantEpoch = -1 // v0 answers carry no epoch
				}
				if p.ErrorCode != code || p.LeaderEpoch != wantEpoch || p.EndOffset != tt.wantEnd {
					t.Fatalf("v%d: answer %+v, want error %d, epoch %d, end offset %d", v, p, code, wantEpoch, tt.wantEnd)
				}
			})
		}
	}
	t.Run("an unknown topic", func(t *testing.T) {
		r := req(4, 1, -1)
		r.Topics[0].Topic = "nope"
		if p := h.curC.Request(r).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("answer %+v", p)
		}
	})
}

// TestFetchWithALastFetchedEpochThatEndedEarlierAnswersTheDivergingEpoch: a fetcher whose
// last fetched epoch ended before its fetch offset here is told where that epoch ends
// (DivergingEpoch, v12+), with no records; one whose epoch reaches its offset reads on.
func TestFetchWithALastFetchedEpochThatEndedEarlierAnswersTheDivergingEpoch(t *testing.T) {
	h := newEpochHistory(t)
	id := h.c.Topic("t").ID
	req := fetchReq(16, "t", id, 0, 4)
	req.Topics[0].Partitions[0].LastFetchedEpoch = 1
	p := fetchOne(t, h.curC, req)
	if p.ErrorCode != 0 || p.DivergingEpoch.Epoch != 1 || p.DivergingEpoch.EndOffset != 3 || len(p.RecordBatches) != 0 || p.HighWatermark != 4 {
		t.Fatalf("answer %+v, want DivergingEpoch (1, 3) and no records", p)
	}
	req = fetchReq(16, "t", id, 0, 3)
	req.Topics[0].Partitions[0].LastFetchedEpoch = 1
	if p := fetchOne(t, h.curC, req); p.ErrorCode != 0 || p.DivergingEpoch.Epoch != -1 || len(batches(t, p.RecordBatches)) != 1 {
		t.Fatalf("epoch 1 ends at 3, the fetch offset: answer %+v, want the record at 3", p)
	}
}

// TestFetchWithALastFetchedEpochNewerThanTheLogAnswersOffsetOutOfRange: a fetcher whose last
// fetched epoch is newer than every epoch of the log here (its log diverged from one that
// vanished) has nothing to truncate to. Apache answers OFFSET_OUT_OF_RANGE ("could not
// determine the end offset of the last fetched epoch"), so the client resets its position;
// a DivergingEpoch of (-1, -1) would tell it to truncate to offset -1.
func TestFetchWithALastFetchedEpochNewerThanTheLogAnswersOffsetOutOfRange(t *testing.T) {
	h := newEpochHistory(t)
	for _, v := range []int16{12, 16} {
		req := fetchReq(v, "t", h.c.Topic("t").ID, 0, 3)
		req.Topics[0].Partitions[0].LastFetchedEpoch = 5
		p := fetchOne(t, h.curC, req)
		if p.ErrorCode != kerr.OffsetOutOfRange.Code || p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1 || len(p.RecordBatches) != 0 {
			t.Fatalf("v%d: answer %+v, want OFFSET_OUT_OF_RANGE, no DivergingEpoch, no records", v, p)
		}
	}
}
