package broker_test

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// TestUntilItsTakeoverCompletesAPartitionAnswersNotLeaderAndTheBrokerIsNotReady: a takeover
// held up in its fence claim keeps the partition NOT_LEADER_OR_FOLLOWER and /readyz 503; once
// it completes the partition serves and the broker is ready.
func TestUntilItsTakeoverCompletesAPartitionAnswersNotLeaderAndTheBrokerIsNotReady(t *testing.T) {
	var hold atomic.Bool
	release := make(chan struct{})
	fsFor := func(id int32) storage.FS {
		return storage.FaultFS{FS: storage.OSFS{}, Fault: func(op storage.Op, path string) error {
			if id == 1 && op == storage.OpSyncDir && strings.HasSuffix(path, "fence") && hold.Load() {
				<-release
			}
			return nil
		}}
	}
	c := brokertest.Start(t, brokertest.Options{Brokers: 2, StorageFS: fsFor})
	c.CreateTopic("t", 1, nil)
	from, _ := c.Leader("t", 0)
	if from != 0 {
		c.Move("t", 0, 0)
		c.WaitServed()
	}
	hold.Store(true)
	c.Move("t", 0, 1)
	b1 := c.Broker(1)
	testkit.Eventually(t, "broker 1 claiming the fence", func() bool { return metric(t, b1, "paddock_broker_partitions_under_takeover") == 1 })
	if b1.Ready() {
		t.Fatal("broker 1 ready while its takeover is held")
	}
	conn := brokertest.Dial(t, b1.Addr)
	if p, _ := produceOne(t, conn, 10, "t", 0, brokertest.Plain([]byte("early")).Bytes()); p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce during the takeover: %+v, want NOT_LEADER_OR_FOLLOWER", p)
	}
	hold.Store(false)
	close(release)
	c.WaitServed()
	if p, _ := produceOne(t, conn, 10, "t", 0, brokertest.Plain([]byte("served")).Bytes()); p.ErrorCode != 0 {
		t.Fatalf("produce after the takeover: %+v", p)
	}
	if n := metric(t, b1, "paddock_broker_partitions_led"); n != 1 {
		t.Fatalf("partitions_led %v, want 1", n)
	}
}

// TestAStorageErrorTakesThePartitionOfflineAndAFailingVolumeTheBroker: an I/O error fails the
// partition (KAFKA_STORAGE_ERROR, acknowledging nothing); when the volume itself fails the
// broker's probe it reports itself unhealthy (heartbeat, /readyz) until the volume works
// again; the partition serves again once the view gives it a new epoch.
func TestAStorageErrorTakesThePartitionOfflineAndAFailingVolumeTheBroker(t *testing.T) {
	var failing atomic.Bool
	fsys := storage.FaultFS{FS: storage.OSFS{}, Fault: func(op storage.Op, _ string) error {
		if failing.Load() && (op == storage.OpWrite || op == storage.OpSync || op == storage.OpOpen) {
			return syscall.EIO
		}
		return nil
	}}
	c := brokertest.Start(t, brokertest.Options{StorageFS: func(int32) storage.FS { return fsys }})
	tp := c.CreateTopic("t", 2, nil)
	b := c.Broker(0)
	conn := brokertest.Dial(t, b.Addr)
	if p, _ := produceOne(t, conn, 10, "t", 0, brokertest.Plain([]byte("kept")).Bytes()); p.ErrorCode != 0 {
		t.Fatal(p)
	}
	failing.Store(true)
	for range 2 {
		if p, _ := produceOne(t, conn, 10, "t", 0, brokertest.Plain([]byte("lost")).Bytes()); p.ErrorCode != kerr.KafkaStorageError.Code {
			t.Fatalf("produce on a failing disk: %+v, want KAFKA_STORAGE_ERROR", p)
		}
	}
	if f := fetchOne(t, conn, fetchReq(16, "t", tp.ID, 0, 0)); f.ErrorCode != kerr.KafkaStorageError.Code || f.HighWatermark != -1 {
		t.Fatalf("fetch from the failed partition: %+v, want KAFKA_STORAGE_ERROR", f)
	}
	testkit.Eventually(t, "the broker to report itself unhealthy", func() bool { return !b.B.Healthy() })
	if b.Ready() {
		t.Fatal("/readyz 200 with a failing volume")
	}
	resp, err := http.Get("http://" + b.HealthAddr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz %d: a storage failure must not get the process restarted", resp.StatusCode)
	}
	failing.Store(false)
	testkit.Eventually(t, "the volume probe to pass again", b.B.Healthy)
	if p, _ := produceOne(t, conn, 10, "t", 0, brokertest.Plain([]byte("x")).Bytes()); p.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("the failed partition before it moves: %+v, want KAFKA_STORAGE_ERROR (offline at this epoch)", p)
	}
	c.Move("t", 0, 0) // the same broker at the next epoch: a fresh takeover
	c.WaitServed()
	if p, _ := produceOne(t, conn, 10, "t", 0, brokertest.Plain([]byte("again")).Bytes()); p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("after the new takeover: %+v, want offset 1 (the acknowledged record kept, nothing else)", p)
	}
	if f := fetchOne(t, conn, fetchReq(16, "t", tp.ID, 0, 0)); f.HighWatermark != 2 {
		t.Fatalf("high watermark %d, want 2", f.HighWatermark)
	}
}

// TestDataPlaneMetrics: the data plane's series are exported and move.
func TestDataPlaneMetrics(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{})
	tp := c.CreateTopic("m", 1, nil)
	b := c.Broker(0)
	conn := brokertest.Dial(t, b.Addr)
	if p, _ := produceOne(t, conn, 10, "m", 0, brokertest.Plain([]byte("counted")).Bytes()); p.ErrorCode != 0 {
		t.Fatal(p)
	}
	fetchOne(t, conn, fetchReq(16, "m", tp.ID, 0, 0))
	for _, name := range []string{
		`paddock_broker_bytes_in_total{topic="m"}`,
		`paddock_broker_bytes_out_total{topic="m"}`,
		`paddock_broker_produce_latency_seconds_count`,
		`paddock_broker_fetch_latency_seconds_count`,
		`paddock_broker_takeover_duration_seconds_count`,
		`paddock_broker_partitions_led`,
		`paddock_broker_fsync_duration_seconds_count`,
	} {
		if v := metric(t, b, name); v <= 0 {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	if v := metric(t, b, "paddock_broker_partitions_under_takeover"); v != 0 {
		t.Errorf("under takeover %v, want 0", v)
	}
}

// metric scrapes one series of b's /metrics (-1 when absent).
func metric(t *testing.T, b *brokertest.Broker, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + b.HealthAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
