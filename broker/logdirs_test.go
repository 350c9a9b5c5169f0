package broker_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
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
