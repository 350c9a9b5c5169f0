package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/internal/recordbatch"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/broker/wire"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// dataServer is one wire server with a partition manager over an in-memory view that gives
// it topic "t" (one partition, epoch 1), on a fresh data directory.
type dataServer struct {
	srv   *wire.Server
	parts *Partitions
	addr  string
	id    [16]byte
	// fetches counts the Fetch requests the handler has begun: a test that must act while a
	// fetch waits waits for it here instead of sleeping.
	fetches *atomic.Int64
}

func startDataServer(t *testing.T, fsys storage.FS, selfFenced func() bool) *dataServer {
	t.Helper()
	id := [16]byte{7, 7, 7}
	view := cluster.NewMemoryView(cluster.Snapshot{
		ClusterID: testClusterID,
		Brokers:   []v1alpha1.BrokerRow{{ID: 0, State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive}},
		Topics:    []cluster.Topic{{Name: "t", ID: id, Partitions: []cluster.Partition{{Index: 0, Leader: 0, LeaderEpoch: 1}}}},
	})
	parts := NewPartitions(PartitionsConfig{Self: 0, DataDir: t.TempDir(), View: view, FS: fsys, Log: testr.New(t)})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { parts.Run(ctx); close(ran) }()
	srv := newTestServer(t, &Handler{View: view, Self: 0, Log: testr.New(t), Partitions: parts, SelfFenced: selfFenced})
	fetches := new(atomic.Int64)
	inner := srv.Handler
	srv.Handler = wire.HandlerFunc(func(r *wire.Request) wire.Answer {
		if r.Key == 1 {
			fetches.Add(1)
		}
		return inner.ServeKafka(r)
	})
	ln := testkit.Listen(t)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close() // always nil
		if err := <-served; !errors.Is(err, wire.ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
		cancel()
		<-ran
	})
	testkit.Eventually(t, "the partition taken over", parts.CaughtUp)
	return &dataServer{srv: srv, parts: parts, addr: ln.Addr().String(), id: id, fetches: fetches}
}

func produceV10(t *testing.T, ds *dataServer, acks int16, value string) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	c := dialKafka(t, ds.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 10, acks, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = recordbatch.Plain([]byte(value)).Bytes()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return roundTrip(t, c, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

func TestSelfFenceRule(t *testing.T) {
	for _, tt := range []struct {
		age, session time.Duration
		want         bool
	}{
		{0, 6 * time.Second, false},
		{5999 * time.Millisecond, 6 * time.Second, false},
		{6 * time.Second, 6 * time.Second, true},
		{time.Minute, 6 * time.Second, true},
	} {
		if got := leaseExpired(tt.age, tt.session); got != tt.want {
			t.Errorf("leaseExpired(%s, %s) = %v, want %v", tt.age, tt.session, got, tt.want)
		}
	}
	if (&Broker{}).selfFenced() {
		t.Error("a broker without a heartbeat (an in-memory view) self-fenced")
	}
	b := &Broker{Heartbeat: &cluster.Heartbeat{SessionTimeout: time.Second}, started: time.Now().Add(-2 * time.Second)}
	if !b.selfFenced() {
		t.Error("a broker that has not renewed its Lease once in a session timeout since its start is not self-fenced")
	}
}

// TestASelfFencedBrokerAcknowledgesNoAppend: while the Lease is older than a session timeout
// the broker refuses appends, and an append that completes after it became self-fenced is
// not acknowledged either.
func TestASelfFencedBrokerAcknowledgesNoAppend(t *testing.T) {
	var fenced, fenceOnNextSync atomic.Bool
	fsys := storage.FaultFS{FS: storage.OSFS{}, Fault: func(op storage.Op, path string) error {
		if op == storage.OpSync && strings.HasSuffix(path, ".log") && fenceOnNextSync.Load() {
			fenced.Store(true) // the Lease expires while the append waits for its fsync
		}
		return nil
	}}
	ds := startDataServer(t, fsys, fenced.Load)
	if p := produceV10(t, ds, -1, "a"); p.ErrorCode != 0 {
		t.Fatalf("healthy broker: %+v", p)
	}
	fenced.Store(true)
	p := produceV10(t, ds, -1, "b")
	if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "Lease") {
		t.Fatalf("self-fenced broker: %+v, want NOT_LEADER_OR_FOLLOWER naming the Lease", p)
	}
	fenced.Store(false)
	fenceOnNextSync.Store(true)
	if p := produceV10(t, ds, -1, "c"); p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("append that completed after the Lease expired: %+v, want it unacknowledged", p)
	}
	fenceOnNextSync.Store(false)
	fenced.Store(false)
	if p := produceV10(t, ds, 1, "d"); p.ErrorCode != 0 || p.BaseOffset != 2 {
		t.Fatalf("renewed broker: %+v, want offset 2 (a and c are in the log; c was durable, just not acknowledged)", p)
	}
}

// TestShutdownEndsAWaitingFetch: a long-polling fetch answers as soon as the server begins
// shutting down, instead of holding the shutdown for its max_wait_ms.
func TestShutdownEndsAWaitingFetch(t *testing.T) {
	ds := startDataServer(t, nil, nil)
	c := dialKafka(t, ds.addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 16, 240000, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = ds.id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	answered := make(chan error, 1)
	go func() {
		_, err := tryRoundTrip(c, req, 9)
		answered <- err
	}()
	testkit.Eventually(t, "the fetch reached the handler", func() bool { return ds.fetches.Load() == 1 })
	// Shutdown's bound is a quarter of max_wait_ms: a shutdown held by the fetch's wait fails
	// it, however loaded the machine.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(req.MaxWaitMillis)*time.Millisecond/4)
	defer cancel()
	if err := ds.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v (after %s; want the waiting fetch answered at once)", err, time.Since(start))
	}
	if err := <-answered; err != nil {
		t.Fatalf("the waiting fetch got no answer: %v", err)
	}
	t.Logf("Shutdown with a fetch waiting took %s", time.Since(start))
}

// TestStorageErrorCodes pins storageCode: every storage error to its Kafka code
// (docs/storage.md's table).
func TestStorageErrorCodes(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want *kerr.Error
	}{
		{storage.ErrNotLeader, kerr.NotLeaderForPartition},
		{&storage.FencedError{Epoch: 1, Fence: 2}, kerr.NotLeaderForPartition},
		{&storage.StorageError{Op: "fsync", Err: errors.New("EIO")}, kerr.KafkaStorageError},
		{&storage.StorageError{Op: "index", Err: storage.ErrCorruptLog}, kerr.KafkaStorageError},
		{fmt.Errorf("x: %w", storage.ErrInvalidRecord), kerr.InvalidRecord},
		{storage.ErrCorruptMessage, kerr.CorruptMessage},
		{storage.ErrMessageTooLarge, kerr.MessageTooLarge},
		{storage.ErrRecordListTooLarge, kerr.RecordListTooLarge},
		{storage.ErrInvalidRequiredAcks, kerr.InvalidRequiredAcks},
		{storage.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
		{storage.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
		{storage.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
		{errors.New("something else"), kerr.UnknownServerError},
	} {
		if got := storageCode(tt.err); got != tt.want.Code {
			t.Errorf("storageCode(%v) = %d, want %s (%d)", tt.err, got, tt.want.Message, tt.want.Code)
		}
	}
	if storageCode(nil) != 0 {
		t.Error("storageCode(nil) != 0")
	}
}

// TestProduceRecordsShapeRules pins checkProduceRecords (ProduceRequest.validateRecords).
func TestProduceRecordsShapeRules(t *testing.T) {
	one := recordbatch.Plain([]byte("v")).Bytes()
	zstd := recordbatch.Batch{Values: [][]byte{[]byte("v")}, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Zstd: true}.Bytes()
	for _, tt := range []struct {
		name    string
		version int16
		b       []byte
		code    int16
		size    int
	}{
		{"one batch", 10, one, 0, len(one)},
		{"a trailing partial batch is dropped", 10, append(append([]byte{}, one...), one[:20]...), 0, len(one)},
		{"two whole batches", 10, append(append([]byte{}, one...), one...), kerr.InvalidRecord.Code, 0},
		{"nothing", 10, nil, kerr.InvalidRecord.Code, 0},
		{"a truncated batch", 10, one[:len(one)-1], kerr.InvalidRecord.Code, 0},
		{"magic 1", 10, func() []byte { b := append([]byte{}, one...); b[16] = 1; return b }(), kerr.InvalidRecord.Code, 0},
		{"zstd at v6", 6, zstd, kerr.UnsupportedCompressionType.Code, 0},
		{"zstd at v7", 7, zstd, 0, len(zstd)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, code, msg := checkProduceRecords(tt.version, tt.b)
			if code != tt.code || len(got) != tt.size || (code != 0) != (msg != "") {
				t.Fatalf("checkProduceRecords = (%d bytes, %d, %q), want (%d bytes, %d)", len(got), code, msg, tt.size, tt.code)
			}
		})
	}
	if !hasZstd(append(append([]byte{}, one...), zstd...)) || hasZstd(append(append([]byte{}, one...), one...)) {
		t.Error("hasZstd does not find exactly the zstd batch")
	}
}

// TestWantedHereFollowsTheView pins which partitions the view gives a broker to take over.
func TestWantedHereFollowsTheView(t *testing.T) {
	id := [16]byte{1}
	v := cluster.NewMemoryView(cluster.Snapshot{
		ClusterID: testClusterID,
		Topics: []cluster.Topic{
			{Name: "t", ID: id, Partitions: []cluster.Partition{{Index: 0, Leader: 3, LeaderEpoch: 4}, {Index: 1, Leader: 2, LeaderEpoch: 1}, {Index: 2, Leader: -1}}},
			{Name: "no-id-yet", Partitions: []cluster.Partition{{Index: 0, Leader: 3, LeaderEpoch: 1}}},
		},
	})
	got := wantedHere(v.Snapshot(), 3, "/data")
	w, ok := got[partitionKey{id, 0}]
	if len(got) != 1 || !ok || w.epoch != 4 || w.dir != storage.PartitionDir("/data", testClusterID, "t", id, 0) || w.cfg != storage.DefaultConfig() {
		t.Fatalf("wanted %+v: want only t/0 at epoch 4 in its directory, with Apache's default config", got)
	}
	noCluster := cluster.NewMemoryView(cluster.Snapshot{Topics: v.Snapshot().Topics})
	if got := wantedHere(noCluster.Snapshot(), 3, "/data"); len(got) != 0 {
		t.Fatalf("without a cluster id: %+v, want nothing (no directory name)", got)
	}
}

// TestStorageConfigTakesEveryValueKafkaAccepts: Kafka's smallest segment.bytes,
// max.message.bytes and index.interval.bytes are below storage's; they are raised to values
// that answer the same, so a topic with them is served rather than failing its takeover.
func TestStorageConfigTakesEveryValueKafkaAccepts(t *testing.T) {
	v := cluster.NewMemoryView(cluster.Snapshot{ClusterID: testClusterID, Topics: []cluster.Topic{{Name: "t", ID: [16]byte{1},
		ConfigMap:  map[string]string{"segment.bytes": "14", "max.message.bytes": "0", "index.interval.bytes": "0", "message.timestamp.type": "LogAppendTime", "retention.ms": "-1"},
		Partitions: []cluster.Partition{{Index: 0, Leader: 0, LeaderEpoch: 1}}}}})
	s := v.Snapshot()
	cfg := storageConfig(&s.Topics[0], s)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config %+v refused by storage: %v", cfg, err)
	}
	if cfg.SegmentBytes != 61 || cfg.MaxMessageBytes != 61 || cfg.IndexIntervalBytes != 1 || !cfg.LogAppendTime || cfg.RetentionMs != -1 {
		t.Fatalf("config %+v", cfg)
	}
}

// TestStorageConfigCarriesTheCompactionKeys: cleanup.policy becomes Compact and NoDelete, the
// compaction keys pass through, and every edge kafkaconfig accepts (a zero lag, equal lags,
// ratios 0 and 1, no tombstone retention) and a cluster whose lags make the topic's no range
// pass storage's checks.
func TestStorageConfigCarriesTheCompactionKeys(t *testing.T) {
	for _, tt := range []struct {
		rule              string
		topic, cluster    map[string]string
		compact, noDelete bool
		minLag, maxLag    int64
	}{
		{"delete, the default", nil, nil, false, false, 0, math.MaxInt64},
		{"compact only", map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0"}, nil, true, true, 0, math.MaxInt64},
		{"both", map[string]string{"cleanup.policy": "delete, compact", "min.cleanable.dirty.ratio": "1", "min.compaction.lag.ms": "5", "max.compaction.lag.ms": "5"}, nil, true, false, 5, 5},
		{"from the cluster", nil, map[string]string{"log.cleanup.policy": "compact", "log.cleaner.min.compaction.lag.ms": "7"}, true, true, 7, math.MaxInt64},
		{"the cluster's max below the topic's min", map[string]string{"cleanup.policy": "compact", "min.compaction.lag.ms": "100"},
			map[string]string{"log.cleaner.max.compaction.lag.ms": "50"}, true, true, 0, math.MaxInt64},
	} {
		v := cluster.NewMemoryView(cluster.Snapshot{ClusterID: testClusterID, ConfigMap: tt.cluster, Topics: []cluster.Topic{{Name: "t", ID: [16]byte{1},
			ConfigMap: tt.topic, Partitions: []cluster.Partition{{Index: 0, Leader: 0, LeaderEpoch: 1}}}}})
		s := v.Snapshot()
		cfg := storageConfig(&s.Topics[0], s)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: config %+v refused by storage: %v", tt.rule, cfg, err)
		}
		if cfg.Compact != tt.compact || cfg.NoDelete != tt.noDelete || cfg.MinCompactionLagMs != tt.minLag || cfg.MaxCompactionLagMs != tt.maxLag {
			t.Errorf("%s: config %+v, want compact %v, no delete %v, lags %d and %d", tt.rule, cfg, tt.compact, tt.noDelete, tt.minLag, tt.maxLag)
		}
	}
}
