package broker_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker"
	"github.com/paddock-dev/paddock/broker/brokertest"
)

// stormClientEnv makes the test binary BenchmarkFetchStorm's clients (TestStormClientHelper).
const stormClientEnv = "PADDOCK_STORM_CLIENT"

// BenchmarkFetchStorm measures the broker's memory under a fetch storm (docs/bounds.md): 50
// consumers catching up on 1 GiB (16 partitions, from offset 0 to the end, max_bytes 16 MiB
// each) plus one client pipelining 64 Fetches (max_wait 0, 55 MiB) and reading its answers
// slowly, all in a child process, against one broker: records sent from the segment files
// (the default), and read into memory within a 256 MiB queued.max.response.bytes. Reported:
// the broker process's peak RSS above its RSS before the storm, and the budget.
func BenchmarkFetchStorm(b *testing.B) {
	const (
		partitions = 16
		consumers  = 50
		dataBytes  = 1 << 30
	)
	raiseFileLimit(b, 4096)
	for _, copyData := range []bool{false, true} {
		b.Run(fmt.Sprintf("copy=%v", copyData), func(b *testing.B) {
			discard := logr.Discard()
			var budget int64
			c := brokertest.Start(b, brokertest.Options{Log: &discard, CopyFetchData: copyData,
				Bounds: func(bd *broker.Bounds) { budget = bd.QueuedMaxResponseBytes }})
			tp := c.CreateTopic("storm", partitions, nil)
			writeData(b, c.Addrs(), dataBytes)
			for range b.N {
				base := settledRSS()
				peak := base
				stop := make(chan struct{})
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						case <-time.After(50 * time.Millisecond):
							peak = max(peak, rss())
						}
					}
				}()
				child := exec.Command(os.Args[0], "-test.run=^TestStormClientHelper$")
				child.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%d,%d", stormClientEnv, c.Addrs()[0], hex.EncodeToString(tp.ID[:]), partitions, consumers))
				child.Stderr = os.Stderr
				out, err := child.Output()
				close(stop)
				wg.Wait()
				if err != nil || !strings.Contains(string(out), "done") {
					b.Fatalf("storm clients: %v: %s", err, out)
				}
				b.ReportMetric(float64(peak-base)/(1<<20), "MiB_rss_peak_over_base")
				b.ReportMetric(float64(base)/(1<<20), "MiB_rss_base")
				b.ReportMetric(float64(budget)/(1<<20), "MiB_budget")
			}
		})
	}
}

// writeData produces n bytes of 1 KiB records to topic "storm" (acks=1), untimed.
func writeData(b *testing.B, seeds []string, n int) {
	p, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("storm"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	value := randomValue()
	var wg sync.WaitGroup
	for range n / len(value) {
		wg.Add(1)
		p.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
}

// rss is the process's resident set now (VmRSS).
func rss() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestStormClientHelper is BenchmarkFetchStorm's clients, run with stormClientEnv set:
// consumers that each fetch every partition from offset 0 to its high watermark, and one slow
// pipelining client; it prints "done" when the consumers have caught up. Without it, it does
// nothing.
func TestStormClientHelper(t *testing.T) {
	spec := os.Getenv(stormClientEnv)
	if spec == "" {
		return
	}
	f := strings.Split(spec, ",")
	addr := f[0]
	idBytes, _ := hex.DecodeString(f[1])
	var id [16]byte
	copy(id[:], idBytes)
	partitions, _ := strconv.Atoi(f[2])
	consumers, _ := strconv.Atoi(f[3])
	done := make(chan struct{})
	go slowPipeliner(t, addr, id, done)
	var wg sync.WaitGroup
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := catchUp(addr, id, partitions); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	close(done)
	fmt.Println("done")
}

// stormFetch is a Fetch v12 (topics by name are not needed: by id from v13, so v13) of the
// given partitions' offsets.
func stormFetch(id [16]byte, offsets []int64, maxBytes int32, partitionMax int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 13, -1, maxBytes, 1, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = id
	for p, o := range offsets {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(p), o, partitionMax
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	return req
}

// catchUp reads every partition from 0 to its high watermark, 16 MiB per Fetch.
func catchUp(addr string, id [16]byte, partitions int) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	offsets := make([]int64, partitions)
	var buf []byte
	for corr := int32(1); ; corr++ {
		req := stormFetch(id, offsets, 16<<20, 1<<20)
		if _, err := c.Write(rawRequest(req, corr)); err != nil {
			return err
		}
		if buf, err = readFrameInto(c, buf); err != nil {
			return err
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = req.Version
		if err := resp.ReadFrom(buf[5:]); err != nil { // correlation id, header tags
			return err
		}
		caughtUp := true
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("partition %d: error %d", p.Partition, p.ErrorCode)
			}
			for b := p.RecordBatches; len(b) >= 61; {
				size := 12 + int(binary.BigEndian.Uint32(b[8:]))
				offsets[p.Partition] = int64(binary.BigEndian.Uint64(b)) + int64(binary.BigEndian.Uint32(b[23:])) + 1
				b = b[size:]
			}
			if offsets[p.Partition] < p.HighWatermark {
				caughtUp = false
			}
		}
		if caughtUp {
			return nil
		}
	}
}

// slowPipeliner keeps 64 Fetches of 55 MiB (max_wait 0) in flight on one connection and
// reads the answers at about 8 MiB/s, until done.
func slowPipeliner(t *testing.T, addr string, id [16]byte, done <-chan struct{}) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	defer func() { _ = c.Close() }()
	req := stormFetch(id, make([]int64, 16), 55<<20, 55<<20)
	var frames []byte
	for corr := range int32(64) {
		frames = append(frames, rawRequest(req, corr)...)
	}
	go func() { _, _ = c.Write(frames) }()
	r := bufio.NewReaderSize(c, 64<<10)
	chunk := make([]byte, 64<<10)
	for {
		select {
		case <-done:
			return
		case <-time.After(8 * time.Millisecond):
		}
		if _, err := io.ReadFull(r, chunk); err != nil {
			return
		}
	}
}

func rawRequest(req kmsg.Request, corr int32) []byte {
	f := binary.BigEndian.AppendUint32(nil, 0)
	f = binary.BigEndian.AppendUint16(f, uint16(req.Key()))
	f = binary.BigEndian.AppendUint16(f, uint16(req.GetVersion()))
	f = binary.BigEndian.AppendUint32(f, uint32(corr))
	f = binary.BigEndian.AppendUint16(f, 5)
	f = append(f, "storm"...)
	if req.IsFlexible() {
		f = append(f, 0)
	}
	f = req.AppendTo(f)
	binary.BigEndian.PutUint32(f, uint32(len(f)-4))
	return f
}

func readFrameInto(c net.Conn, buf []byte) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return buf, err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(c, buf)
	return buf, err
}
