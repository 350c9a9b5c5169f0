package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/brokertest"
)

// DescribeLogDirs reports the one shared volume honestly: every broker names the same
// directory and volume, and lists only the partitions it leads, each with the bytes of its
// record batches; together the brokers cover each partition once, and a moved partition is
// reported by its new leader only (docs/dataplane.md, "DescribeLogDirs: one shared volume").
func TestDescribeLogDirsListsEachPartitionOnceAtItsLeaderWithItsSize(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2})
	c.CreateTopic("t", 4, nil)
	conns := []*brokertest.Conn{brokertest.Dial(t, c.Addrs()[0]), brokertest.Dial(t, c.Addrs()[1])}
	want := map[int32]int64{}
	for p := range int32(4) {
		leader, _ := c.Leader("t", p)
		for i := int32(0); i <= p; i++ { // partition p holds p+1 batches
			b := brokertest.Plain([]byte("value"), []byte("of partition"))
			b.Timestamp = int64(1000 + i)
			batch := b.Bytes()
			if r, _ := produceOne(t, conns[leader], 9, "t", p, batch); r.ErrorCode != 0 {
				t.Fatalf("produce to %d: %+v", p, r)
			}
			want[p] += int64(len(batch))
		}
	}

	adm := kadm.NewClient(c.Client())
	all, err := adm.DescribeAllLogDirs(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int32]int32{}
	var dirName string
	for broker, dirs := range all {
		if len(dirs) != 1 {
			t.Fatalf("broker %d: %d log dirs, want the one data directory", broker, len(dirs))
		}
		for _, d := range dirs {
			if d.Err != nil || dirName != "" && d.Dir != dirName || d.TotalBytes <= 0 || d.UsableBytes < 0 || d.UsableBytes > d.TotalBytes {
				t.Fatalf("broker %d: dir %q err %v total %d usable %d (another broker named %q)", broker, d.Dir, d.Err, d.TotalBytes, d.UsableBytes, dirName)
			}
			dirName = d.Dir
			for _, ps := range d.Topics {
				for p, dp := range ps {
					if leader, _ := c.Leader("t", p); leader != broker {
						t.Errorf("partition %d reported by broker %d, its leader is %d", p, broker, leader)
					}
					if dp.Size != want[p] || dp.OffsetLag != 0 || dp.IsFuture {
						t.Errorf("partition %d: size %d lag %d future %v, want size %d", p, dp.Size, dp.OffsetLag, dp.IsFuture, want[p])
					}
					seen[p]++
				}
			}
		}
	}
	for p := range int32(4) {
		if seen[p] != 1 {
			t.Errorf("partition %d reported %d times, want once", p, seen[p])
		}
	}

	// Named partitions: only those led here; an unknown topic or index is left out.
	from, _ := c.Leader("t", 0)
	to := 1 - from
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.Version = 0
	req.Topics = []kmsg.DescribeLogDirsRequestTopic{{Topic: "t", Partitions: []int32{0, 0, 99}}, {Topic: "nope", Partitions: []int32{0}}}
	resp := conns[from].Request(req).(*kmsg.DescribeLogDirsResponse)
	if len(resp.Dirs) != 1 || len(resp.Dirs[0].Topics) != 1 || len(resp.Dirs[0].Topics[0].Partitions) != 1 || resp.Dirs[0].Topics[0].Partitions[0].Size != want[0] {
		t.Fatalf("v0 naming partition 0 (twice), 99 and an unknown topic: %+v", resp.Dirs)
	}
	c.Move("t", 0, to)
	c.WaitServed()
	for id, conn := range conns {
		resp := conn.Request(req).(*kmsg.DescribeLogDirsResponse)
		got := len(resp.Dirs[0].Topics)
		if wantN := map[bool]int{true: 1, false: 0}[int32(id) == to]; got != wantN {
			t.Fatalf("after the move to %d, broker %d lists partition 0 in %d topics, want %d", to, id, got, wantN)
		}
	}
}

// DeleteRecords moves a partition's log start on its leader, durably, and what was below it
// is gone for every reader: Fetch below it is OFFSET_OUT_OF_RANGE, ListOffsets' earliest and
// a timestamp lookup answer from it (docs/dataplane.md, "DeleteRecords").
func TestDeleteRecordsMovesTheLogStartForEveryReader(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 1})
	c.CreateTopic("t", 2, nil)
	cl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "t", Partition: 0, Value: []byte{byte(i)}, Timestamp: time.UnixMilli(int64(1000 + i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(cl)
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "t", Partition: 0, At: 4})
	offsets.Add(kadm.Offset{Topic: "t", Partition: 1, At: 1}) // past its (empty) high watermark
	got, err := adm.DeleteRecords(context.Background(), offsets)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := got.Lookup("t", 0); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("partition 0 to 4: %+v", r)
	}
	if r, _ := got.Lookup("t", 1); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("partition 1 past its high watermark: %+v", r)
	}
	starts, err := adm.ListStartOffsets(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("t", 0); o.Offset != 4 {
		t.Fatalf("earliest offset %+v, want 4", o)
	}
	at, err := adm.ListOffsetsAfterMilli(context.Background(), 0, "t")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := at.Lookup("t", 0); o.Offset != 4 || o.Timestamp != 1004 {
		t.Fatalf("the first record at or after timestamp 0: %+v, want offset 4 at 1004", o)
	}
	conn := brokertest.Dial(t, c.Addrs()[0])
	if p := fetchOne(t, conn, fetchReq(12, "t", c.Topic("t").ID, 0, 2)); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the log start: %s", kerr.ErrorForCode(p.ErrorCode))
	}

	// -1 is the high watermark; an older offset changes nothing; the errors.
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version, req.TimeoutMillis = 0, 0
	req.Topics = []kmsg.DeleteRecordsRequestTopic{
		{Topic: "t", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 2}, {Partition: 0, Offset: -1}, {Partition: 1, Offset: -2}, {Partition: 7, Offset: 0}}},
		{Topic: "nope", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}},
	}
	resp := conn.Request(req).(*kmsg.DeleteRecordsResponse)
	type out struct {
		code int16
		low  int64
	}
	want := [][]out{{{0, 4}, {0, 10}, {kerr.OffsetOutOfRange.Code, -1}, {kerr.UnknownTopicOrPartition.Code, -1}}, {{kerr.UnknownTopicOrPartition.Code, -1}}}
	for i, rt := range resp.Topics {
		for j, rp := range rt.Partitions {
			if g := (out{rp.ErrorCode, rp.LowWatermark}); g != want[i][j] {
				t.Errorf("%s[%d] (asked %d): %s low %d, want %s low %d", rt.Topic, rp.Partition, req.Topics[i].Partitions[j].Offset,
					kerr.ErrorForCode(g.code), g.low, kerr.ErrorForCode(want[i][j].code), want[i][j].low)
			}
		}
	}
}
