package broker

import (
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// The benchmarks compare round trips of the same request bytes against paddock and against
// franz-go's kfake (the fake broker the franz-go tests use), both three brokers with three
// topics of three partitions, on the same machine. Requests alternate between the two servers
// within each iteration, so machine load hits both alike. Reported: paddock-ns/op,
// kfake-ns/op and kfake/paddock (above 1 means paddock is faster).

func benchPaddock(b *testing.B) string {
	b.Helper()
	view := cluster.NewMemoryView(cluster.Snapshot{})
	var rows []v1alpha1.BrokerRow
	var addr string
	for i := range 3 {
		ln := testkit.Listen(b)
		host, portStr, _ := net.SplitHostPort(ln.Addr().String())
		port, _ := strconv.Atoi(portStr)
		srv := newTestServer(b, &Handler{View: view, Self: int32(i), Log: logr.Discard()})
		go func() { _ = srv.Serve(ln) }()
		rows = append(rows, v1alpha1.BrokerRow{ID: int32(i), Host: host, Port: int32(port), State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive})
		if i == 0 {
			addr = ln.Addr().String()
		}
	}
	var topics []cluster.Topic
	for _, name := range []string{"a", "b", "c"} {
		t := cluster.Topic{Name: name}
		for p := range int32(3) {
			t.Partitions = append(t.Partitions, cluster.Partition{Index: p, Leader: p})
		}
		topics = append(topics, t)
	}
	view.Set(cluster.Snapshot{ClusterID: testClusterID, Brokers: rows, Topics: topics})
	return addr
}

func benchKfake(b *testing.B) string {
	b.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "a", "b", "c"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

// benchRoundTrips sends frame (correlation id 7) alternately to both servers b.N times.
func benchRoundTrips(b *testing.B, req kmsg.Request) {
	paddock, fake := dialBench(b, benchPaddock(b)), dialBench(b, benchKfake(b))
	frame := appendRequestFrame(nil, req, 7)
	buf := make([]byte, 64<<10)
	// Both answers must be real answers of the request, not errors or closed connections.
	for _, c := range []net.Conn{paddock, fake} {
		if _, err := tryRoundTrip(c, req, 7); err != nil {
			b.Fatalf("warm-up %s: %v", c.RemoteAddr(), err)
		}
	}
	var paddockTime, fakeTime time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		buf = rawRoundTrip(b, paddock, frame, buf)
		t1 := time.Now()
		buf = rawRoundTrip(b, fake, frame, buf)
		fakeTime += time.Since(t1)
		paddockTime += t1.Sub(t0)
	}
	b.StopTimer()
	b.ReportMetric(float64(paddockTime.Nanoseconds())/float64(b.N), "paddock-ns/op")
	b.ReportMetric(float64(fakeTime.Nanoseconds())/float64(b.N), "kfake-ns/op")
	b.ReportMetric(float64(fakeTime)/float64(paddockTime), "kfake/paddock")
}

func dialBench(b *testing.B, addr string) net.Conn {
	b.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

func rawRoundTrip(b *testing.B, c net.Conn, frame, buf []byte) []byte {
	if _, err := c.Write(frame); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf[:4]); err != nil {
		b.Fatal(err)
	}
	n := int(binary.BigEndian.Uint32(buf))
	if n > cap(buf) {
		buf = make([]byte, n)
	}
	if _, err := io.ReadFull(c, buf[:n]); err != nil {
		b.Fatal(err)
	}
	return buf
}

func BenchmarkMetadataRoundTrip(b *testing.B) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	benchRoundTrips(b, req)
}

func BenchmarkDescribeClusterRoundTrip(b *testing.B) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version = 1
	benchRoundTrips(b, req)
}
