package broker

import (
	"io"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/wire"
	"github.com/paddock-dev/paddock/internal/kafkaconfig"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// TestDefaultBoundsAreTheTables: the broker's defaults are the config table's, and the wire
// server's own defaults agree with them.
func TestDefaultBoundsAreTheTables(t *testing.T) {
	b := DefaultBounds()
	if b.SocketRequestMaxBytes != wire.DefaultMaxFrameBytes || b.QueuedMaxResponseBytesPerConnection != wire.DefaultMaxQueuedAnswerBytes ||
		b.ConnectionsMaxIdle != wire.DefaultIdleTimeout || b.MaxConnections != 20000 || b.QueuedMaxRequestBytes != 256<<20 {
		t.Fatalf("default bounds %+v disagree with the wire server's defaults", b)
	}
	for _, k := range kafkaconfig.BrokerKeys() {
		if k.Flag != "" && envName(k.Flag) != "PADDOCK_"+upperSnake(k.Name) {
			t.Errorf("key %s has flag --%s, want its name with dashes", k.Name, k.Flag)
		}
	}
}

func upperSnake(name string) string {
	out := []byte(name)
	for i, c := range out {
		switch {
		case c == '.':
			out[i] = '_'
		case c >= 'a' && c <= 'z':
			out[i] = c - 'a' + 'A'
		}
	}
	return string(out)
}

// TestRequestCostCoversWhatHandlingAllocates: a request takes its frame's cost from
// queued.max.request.bytes before it is read; crafted requests that decode into the most
// structs per byte (a Fetch of many one-partition topics, a Metadata of many empty names, a
// ListOffsets of many partitions) allocate, decoded and answered, no more than that cost —
// they used to decode to about 5× their frame with nothing counting it.
func TestRequestCostCoversWhatHandlingAllocates(t *testing.T) {
	h := &Handler{View: cluster.NewMemoryView(cluster.Snapshot{ClusterID: testClusterID}), Log: logr.Discard()}
	srv := newTestServer(t, h)
	ln := testkit.Listen(t)
	go func() { _ = srv.Serve(ln) }()
	c := dialKafka(t, ln.Addr().String())
	// Decoding and answering 40,000 items takes seconds under the race detector on a loaded
	// machine: a generous deadline, not dialKafka's 10 seconds for all three.
	_ = c.SetDeadline(time.Now().Add(3 * time.Minute))

	const items = 40_000
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.ReplicaID, fetch.MaxBytes = 12, -1, 1<<20
	for i := range items {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = strconv.Itoa(i % 10)
		rt.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
		fetch.Topics = append(fetch.Topics, rt)
	}
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.Version = 12
	for range items {
		name := ""
		metadata.Topics = append(metadata.Topics, kmsg.MetadataRequestTopic{Topic: &name})
	}
	listOffsets := kmsg.NewPtrListOffsetsRequest()
	listOffsets.Version = 8
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	for i := range items {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = int32(i)
		rt.Partitions = append(rt.Partitions, rp)
	}
	listOffsets.Topics = []kmsg.ListOffsetsRequestTopic{rt}

	if _, err := requestCost(wire.Header{Key: 3}, otherRequestMaxBytes+1); err == nil {
		t.Fatal("a Metadata request above the cap for requests other than Produce was not refused")
	}
	if _, err := requestCost(wire.Header{Key: 0}, 30<<20); err != nil {
		t.Fatalf("a 30 MiB Produce refused: %v", err)
	}
	for _, req := range []kmsg.Request{fetch, metadata, listOffsets} {
		frame := appendRequestFrame(nil, req, 1)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, io.LimitReader(c, int64(size[0])<<24|int64(size[1])<<16|int64(size[2])<<8|int64(size[3]))); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		allocated := int64(after.TotalAlloc - before.TotalAlloc)
		cost, err := requestCost(wire.Header{Key: req.Key()}, len(frame)-4)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s v%d: %d-byte frame, %d bytes allocated handling it (%.1f×), cost %d", kmsg.NameForKey(req.Key()), req.GetVersion(), len(frame)-4, allocated, float64(allocated)/float64(len(frame)-4), cost)
		if allocated > cost {
			t.Errorf("%s: %d bytes allocated for a %d-byte frame, above its cost %d", kmsg.NameForKey(req.Key()), allocated, len(frame)-4, cost)
		}
	}
}
