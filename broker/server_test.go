package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/wire"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// expectServing asserts a fresh connection to addr is answered.
func expectServing(t *testing.T, addr string) {
	t.Helper()
	c := dialKafka(t, addr)
	if resp := roundTrip(t, c, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse); len(resp.Brokers) == 0 {
		t.Fatal("metadata lists no broker")
	}
}

func TestUnknownKeyClosesOnlyThatConnection(t *testing.T) {
	tc := newTestCluster(t, 1)
	other := dialKafka(t, tc.addrs[0])
	roundTrip(t, other, kmsg.NewPtrMetadataRequest())

	bad := dialKafka(t, tc.addrs[0])
	frame := appendRequestFrame(nil, kmsg.NewPtrMetadataRequest(), 1)
	binary.BigEndian.PutUint16(frame[4:], 200) // api key 200: nothing knows it
	_, _ = bad.Write(frame)
	expectClosed(t, bad)

	roundTrip(t, other, kmsg.NewPtrMetadataRequest())
	expectServing(t, tc.addrs[0])
}

func TestKnownKeyWithoutHandlerClosesConnection(t *testing.T) {
	tc := newTestCluster(t, 1)
	c := dialKafka(t, tc.addrs[0])
	_, _ = c.Write(appendRequestFrame(nil, kmsg.NewPtrAlterReplicaLogDirsRequest(), 1)) // kmsg knows AlterReplicaLogDirs; paddock does not serve it
	expectClosed(t, c)
	expectServing(t, tc.addrs[0])
}

func TestVersionOutsideAdvertisedRangeClosesConnection(t *testing.T) {
	tc := newTestCluster(t, 1)
	c := dialKafka(t, tc.addrs[0])
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.Version = 5 // kmsg knows it (Kafka 4.1's); we advertise 0-4
	_, _ = c.Write(appendRequestFrame(nil, req, 1))
	expectClosed(t, c)
	expectServing(t, tc.addrs[0])
}

func TestGarbageFramesCloseTheConnection(t *testing.T) {
	tc := newTestCluster(t, 1)
	meta := appendRequestFrame(nil, kmsg.NewPtrMetadataRequest(), 1)
	for _, tt := range []struct {
		name  string
		frame []byte
	}{
		{"frame smaller than a header", []byte{0, 0, 0, 3, 0, 3, 0}},
		{"negative size", []byte{0xff, 0xff, 0xff, 0xfe}},
		{"client id longer than the frame", func() []byte {
			f := append([]byte(nil), meta...)
			binary.BigEndian.PutUint16(f[12:], 0x7fff)
			return f
		}()},
		{"body cut short", func() []byte {
			req := kmsg.NewPtrMetadataRequest()
			name := "some-topic"
			req.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
			f := appendRequestFrame(nil, req, 1)
			f = f[:len(f)-4]
			binary.BigEndian.PutUint32(f, uint32(len(f)-4))
			return f
		}()},
		{"truncated frame then EOF", meta[:len(meta)-2]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dialKafka(t, tc.addrs[0])
			_, _ = c.Write(tt.frame)
			if tt.name == "truncated frame then EOF" {
				_ = c.(*net.TCPConn).CloseWrite()
			}
			expectClosed(t, c)
			expectServing(t, tc.addrs[0])
		})
	}
}

// TestHugeSizePrefixRefusedWithoutAllocating pins that the frame cap is checked before the
// body buffer is allocated: a 2 GiB prefix must cost nothing.
func TestHugeSizePrefixRefusedWithoutAllocating(t *testing.T) {
	tc := newTestCluster(t, 1)
	for _, size := range []uint32{2 << 30, 2<<30 - 1, wire.DefaultMaxFrameBytes + 1} {
		c := dialKafka(t, tc.addrs[0])
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var prefix [4]byte
		binary.BigEndian.PutUint32(prefix[:], size)
		_, _ = c.Write(prefix[:])
		expectClosed(t, c)
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
			t.Fatalf("size prefix %d: process allocated %d bytes while refusing it", size, grew)
		}
	}
	expectServing(t, tc.addrs[0])

	t.Run("the cap is configurable", func(t *testing.T) {
		srv := newTestServer(t, &Handler{View: cluster.NewMemoryView(cluster.Snapshot{}), Log: testr.New(t)})
		srv.MaxFrameBytes = 64
		ln := testkit.Listen(t)
		go func() { _ = srv.Serve(ln) }()
		c := dialKafka(t, ln.Addr().String())
		req := kmsg.NewPtrMetadataRequest()
		name := string(make([]byte, 100))
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
		_, _ = c.Write(appendRequestFrame(nil, req, 1))
		expectClosed(t, c)
	})
}

// panicView panics on Snapshot while armed: a fault hook for the handler path.
type panicView struct {
	cluster.View
	armed atomic.Bool
}

func (v *panicView) Snapshot() *cluster.Snapshot {
	if v.armed.Load() {
		panic("injected handler fault")
	}
	return v.View.Snapshot()
}

func TestHandlerPanicClosesOnlyThatConnection(t *testing.T) {
	pv := &panicView{View: cluster.NewMemoryView(cluster.Snapshot{})}
	srv := newTestServer(t, &Handler{View: pv, Log: testr.New(t)})
	ln := testkit.Listen(t)
	go func() { _ = srv.Serve(ln) }()

	healthy := dialKafka(t, ln.Addr().String())
	roundTrip(t, healthy, kmsg.NewPtrMetadataRequest())

	victim := dialKafka(t, ln.Addr().String())
	pv.armed.Store(true)
	_, _ = victim.Write(appendRequestFrame(nil, kmsg.NewPtrMetadataRequest(), 1))
	expectClosed(t, victim)
	pv.armed.Store(false)

	roundTrip(t, healthy, kmsg.NewPtrMetadataRequest())
}

func TestResponsesComeInRequestOrder(t *testing.T) {
	tc := newTestCluster(t, 1)
	c := dialKafka(t, tc.addrs[0])
	var frames []byte
	for i := range 200 {
		var req kmsg.Request = kmsg.NewPtrMetadataRequest()
		if i%3 == 1 {
			req = kmsg.NewPtrDescribeClusterRequest()
		}
		frames = appendRequestFrame(frames, req, int32(i))
	}
	if _, err := c.Write(frames); err != nil { // one write: the server sees them pipelined
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := readResponseFrame(c, int32(i)); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
	}
}

func TestShutdownFlushesAnswersThenCloses(t *testing.T) {
	srv := newTestServer(t, &Handler{View: cluster.NewMemoryView(cluster.Snapshot{}), Log: testr.New(t)})
	ln := testkit.Listen(t)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	c := dialKafka(t, ln.Addr().String())
	roundTrip(t, c, kmsg.NewPtrMetadataRequest())

	var frames []byte
	for i := range 20 {
		frames = appendRequestFrame(frames, kmsg.NewPtrMetadataRequest(), int32(i))
	}
	_, _ = c.Write(frames)
	if _, err := readResponseFrame(c, 0); err != nil { // the requests are being handled
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for i := 1; i < 20; i++ {
		if _, err := readResponseFrame(c, int32(i)); err != nil {
			t.Fatalf("response %d after Shutdown: %v", i, err)
		}
	}
	expectClosed(t, c)
	if err := <-served; !errors.Is(err, wire.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Fatal("listener still accepts after Shutdown")
	}
	if err := srv.Serve(ln); !errors.Is(err, wire.ErrServerClosed) {
		t.Fatalf("Serve after Shutdown returned %v", err)
	}
	_ = srv.Close()
	_ = srv.Close() // safe twice
}

// TestNoGoroutineLeak opens and breaks connections every way the server handles, then closes
// it, and checks that every goroutine it started has ended.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		h := &Handler{View: cluster.NewMemoryView(cluster.Snapshot{}), Log: testr.New(t)}
		srv := newWireServer(h, DefaultBounds(), 0, h.Log)
		ln := testkit.Listen(t)
		go func() { _ = srv.Serve(ln) }()
		addr := ln.Addr().String()
		var idle []net.Conn
		for i := range 30 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			switch i % 3 {
			case 0: // served, then left idle
				_, _ = tryRoundTrip(c, kmsg.NewPtrMetadataRequest(), 1)
				idle = append(idle, c)
			case 1: // unknown key
				f := appendRequestFrame(nil, kmsg.NewPtrMetadataRequest(), 1)
				binary.BigEndian.PutUint16(f[4:], 200)
				_, _ = c.Write(f)
				_, _ = c.Read(make([]byte, 1))
				_ = c.Close()
			case 2: // client hangs up mid-frame
				_, _ = c.Write([]byte{0, 0, 0, 50, 0, 3})
				_ = c.Close()
			}
		}
		_ = srv.Close()
		h.Close()
		for _, c := range idle {
			_ = c.Close()
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines, %d before the server ran:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestSaramaDescribeCluster drives the broker with IBM/sarama's ClusterAdmin, which picks the
// DescribeCluster version from its configured Kafka version: 4.0 sends v2 with
// IncludeFencedBrokers (so the fenced broker is listed), 3.7 sends v1 (so it is not).
func TestSaramaDescribeCluster(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.rows[2].State = v1alpha1.BrokerFenced
	tc.publish(nil)

	for _, tt := range []struct {
		version sarama.KafkaVersion
		wantIDs []int32
	}{
		{sarama.V4_0_0_0, []int32{0, 1, 2}},
		{sarama.V3_7_0_0, []int32{0, 1}},
	} {
		t.Run(tt.version.String(), func(t *testing.T) {
			cfg := sarama.NewConfig()
			cfg.Version = tt.version
			cfg.Net.DialTimeout, cfg.Net.ReadTimeout = 5*time.Second, 5*time.Second
			admin, err := sarama.NewClusterAdmin([]string{tc.addrs[0]}, cfg)
			if err != nil {
				t.Fatalf("cluster admin: %v", err)
			}
			defer func() { _ = admin.Close() }()
			brokers, controller, err := admin.DescribeCluster()
			if err != nil {
				t.Fatalf("DescribeCluster: %v", err)
			}
			var ids []int32
			for _, b := range brokers {
				ids = append(ids, b.ID())
			}
			if !equalSets(ids, tt.wantIDs) || controller != 0 {
				t.Fatalf("brokers %v controller %d, want %v and 0", ids, controller, tt.wantIDs)
			}
		})
	}

	t.Run("IsFenced as sarama decodes it", func(t *testing.T) {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V4_0_0_0
		b := sarama.NewBroker(tc.addrs[1])
		if err := b.Open(cfg); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = b.Close() }()
		resp, err := b.DescribeCluster(sarama.NewDescribeClusterRequest(sarama.V4_0_0_0))
		if err != nil {
			t.Fatal(err)
		}
		fenced := map[int32]bool{}
		for _, br := range resp.Brokers {
			fenced[br.BrokerID] = br.IsFenced
		}
		if len(fenced) != 3 || !fenced[2] || fenced[0] || fenced[1] {
			t.Fatalf("fenced by id %v, want only 2 fenced", fenced)
		}
	})
}

func equalSets(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[int32]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		seen[x]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// wedgedListener accepts nothing: Accept blocks until the listener is closed, as a wedged
// accept loop would. The kernel still completes the TCP handshake, so a dial succeeds.
type wedgedListener struct {
	net.Listener
	closed chan struct{}
}

func (l *wedgedListener) Accept() (net.Conn, error) {
	<-l.closed
	return nil, net.ErrClosed
}

func (l *wedgedListener) Close() error {
	select {
	case <-l.closed:
	default:
		close(l.closed)
	}
	return l.Listener.Close()
}

// The idle liveness tick goes through a real connection — the accept loop, the connection's
// goroutines, decode and dispatch — so a wedge anywhere on that path stops the ticks and the
// broker reports itself unhealthy, instead of a self-check that bypasses it staying green.
func TestIdleTicksCoverTheAcceptLoop(t *testing.T) {
	for _, tc := range []struct {
		name        string
		wedged      bool
		wantHealthy bool
	}{
		{"a serving broker keeps ticking while idle", false, true},
		{"a wedged accept loop stops the ticks", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mono atomic.Int64
			live := NewLiveness(func() time.Duration { return time.Duration(mono.Load()) })
			h := &Handler{View: cluster.NewMemoryView(cluster.Snapshot{}), Liveness: live, Log: testr.New(t)}
			srv := newWireServer(h, DefaultBounds(), 0, h.Log)
			ln := net.Listener(testkit.Listen(t))
			if tc.wedged {
				ln = &wedgedListener{Listener: ln, closed: make(chan struct{})}
			}
			go func() { _ = srv.Serve(ln) }()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); RunIdleTicks(ctx, srv, 20*time.Millisecond, h.Log, nil) }()
			t.Cleanup(func() { cancel(); _ = srv.Close(); <-done })

			mono.Add(int64(WedgedAfter + time.Second)) // six seconds without a client request
			deadline := time.Now().Add(testkit.Deadline)
			for live.Healthy() != tc.wantHealthy && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond) // ten more probe periods
			if got := live.Healthy(); got != tc.wantHealthy {
				t.Fatalf("healthy = %v, want %v", got, tc.wantHealthy)
			}
		})
	}
}
