package broker_test

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker"
	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// The Fetch side of docs/bounds.md: records sent from their segment files, and the answer
// budget and per-connection bound for records read into memory.

// fillPartition appends n batches of size bytes each to partition 0 of topic and returns
// the topic's id.
func fillPartition(t *testing.T, c *brokertest.Cluster, topic string, n, size int) [16]byte {
	t.Helper()
	tp := c.CreateTopic(topic, 1, nil)
	producer := brokertest.Dial(t, c.Addrs()[0])
	value := bytes.Repeat([]byte{'v'}, size)
	for range n {
		if p, _ := produceOne(t, producer, 10, topic, 0, brokertest.Plain(value).Bytes()); p.ErrorCode != 0 {
			t.Fatal(p)
		}
	}
	return tp.ID
}

// heapAfterGC is the process's live heap once garbage is collected.
func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestAFetchDoesNotCopyItsRecordsIntoMemory: every byte a Fetch returned used to be read
// into the heap first; now large record sets go from the segment file to the socket, so
// fetching 32 MiB allocates a small fraction of that (the client reads into one reused
// buffer).
func TestAFetchDoesNotCopyItsRecordsIntoMemory(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{})
	id := fillPartition(t, c, "t", 32, 1<<20-200)
	conn := brokertest.Dial(t, c.Addrs()[0])
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var got int
	for offset := int64(0); offset < 32; {
		req := fetchReq(16, "t", id, 0, offset)
		req.Topics[0].Partitions[0].PartitionMaxBytes = 8 << 20
		p := fetchOne(t, conn, req)
		n := len(batches(t, p.RecordBatches))
		if p.ErrorCode != 0 || n == 0 {
			t.Fatalf("fetch at %d: %+v", offset, p.ErrorCode)
		}
		got += len(p.RecordBatches)
		offset += int64(n)
	}
	runtime.ReadMemStats(&after)
	// The client reads every answer into a fresh buffer: subtract what it received.
	serverSide := int64(after.TotalAlloc-before.TotalAlloc) - int64(got)
	t.Logf("fetched %d MiB; the process allocated %d MiB beyond the client's copy", got>>20, serverSide>>20)
	if serverSide > int64(got)/4 {
		t.Fatalf("fetching %d bytes allocated %d bytes beyond the client's own copies, want the records sent from the file", got, serverSide)
	}
}

// TestFetchFromTheFileAndFromMemoryAnswerTheSameBytes: the zero-copy answer and the answer
// read into memory (CopyFetchData) carry the same records at every version.
func TestFetchFromTheFileAndFromMemoryAnswerTheSameBytes(t *testing.T) {
	answers := map[bool][]kmsg.RecordBatch{}
	for _, copyData := range []bool{false, true} {
		c := brokertest.Start(t, brokertest.Options{CopyFetchData: copyData})
		id := fillPartition(t, c, "t", 12, 10_000)
		conn := brokertest.Dial(t, c.Addrs()[0])
		for v := int16(4); v <= 16; v++ {
			req := fetchReq(v, "t", id, 0, int64(v%3))
			req.Topics[0].Partitions[0].PartitionMaxBytes = 50_000
			answers[copyData] = append(answers[copyData], batches(t, fetchOne(t, conn, req).RecordBatches)...)
		}
	}
	// Two clusters: the batches differ in their timestamps and CRCs only.
	if len(answers[false]) != len(answers[true]) || len(answers[false]) < 13*2 {
		t.Fatalf("%d batches from the file, %d from memory", len(answers[false]), len(answers[true]))
	}
	for i, a := range answers[false] {
		b := answers[true][i]
		if a.FirstOffset != b.FirstOffset || a.Length != b.Length || a.NumRecords != b.NumRecords || !bytes.Equal(a.Records, b.Records) {
			t.Fatalf("batch %d: offset %d, %d bytes from the file; offset %d, %d bytes from memory", i, a.FirstOffset, a.Length, b.FirstOffset, b.Length)
		}
	}
}

// TestAFetchReadIntoMemoryShrinksToTheAnswerBudget: with the budget mostly held by other
// answers, a Fetch whose records go through memory returns what fits (at least its first
// batch), never an error, and the budget is whole again once the answers are written.
func TestAFetchReadIntoMemoryShrinksToTheAnswerBudget(t *testing.T) {
	const budget = 3 << 20
	c := brokertest.Start(t, brokertest.Options{CopyFetchData: true, Bounds: func(b *broker.Bounds) { b.QueuedMaxResponseBytes = budget }})
	id := fillPartition(t, c, "t", 10, 1<<20-200)
	madeBefore, chunkBytes := broker.RecordChunksMade()
	conn := brokertest.Dial(t, c.Addrs()[0])
	req := fetchReq(16, "t", id, 0, 0)
	req.Topics[0].Partitions[0].PartitionMaxBytes = 20 << 20
	p := fetchOne(t, conn, req)
	if n := len(batches(t, p.RecordBatches)); p.ErrorCode != 0 || n == 0 || len(p.RecordBatches) > budget {
		t.Fatalf("answer: error %d, %d batches in %d bytes; want at least one batch within the %d-byte budget", p.ErrorCode, n, len(p.RecordBatches), budget)
	}
	t.Logf("a fetch asking for 20 MiB through a %d MiB budget got %d bytes", budget>>20, len(p.RecordBatches))

	// Many fetches at once: each gets data, none fails, and they never hold more than the
	// budget plus one batch between them (each answer is released once written): the memory
	// made for their records stays within that, however many answers come and go.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn := brokertest.Dial(t, c.Addrs()[0])
			for offset := int64(0); offset < 10; {
				p := fetchOne(t, conn, func() *kmsg.FetchRequest {
					r := fetchReq(16, "t", id, 0, offset)
					r.Topics[0].Partitions[0].PartitionMaxBytes = 20 << 20
					return r
				}())
				n := len(batches(t, p.RecordBatches))
				if p.ErrorCode != 0 || n == 0 {
					t.Errorf("fetch at %d: error %d, %d batches", offset, p.ErrorCode, n)
					return
				}
				offset += int64(n)
			}
		}()
	}
	wg.Wait()
	made, _ := broker.RecordChunksMade()
	memory := int64(made-madeBefore) * chunkBytes
	t.Logf("fetching through memory (one connection, then 8 at once, 10 MiB each) made %d bytes of record chunks (budget %d)", memory, budget)
	if memory > budget+1<<20 {
		t.Fatalf("%d bytes of memory made for records, above the %d-byte budget and one batch", memory, budget)
	}
}

// TestAPipeliningSlowReaderHoldsNoAnswersInMemory: a client pipelining 64 Fetches (max_wait
// 0) and reading none of the answers used to have every answer's records queued in the
// broker's heap; sent from the file, they cost no heap, and through memory they are bounded
// per connection.
func TestAPipeliningSlowReaderHoldsNoAnswersInMemory(t *testing.T) {
	for _, copyData := range []bool{false, true} {
		name := "from the file"
		if copyData {
			name = "through memory"
		}
		t.Run(name, func(t *testing.T) {
			c := brokertest.Start(t, brokertest.Options{CopyFetchData: copyData})
			id := fillPartition(t, c, "t", 8, 1<<20-200)
			conn := brokertest.Dial(t, c.Addrs()[0])
			base := heapAfterGC()
			req := fetchReq(16, "t", id, 0, 0)
			req.MaxWaitMillis, req.MaxBytes = 0, 55<<20
			req.Topics[0].Partitions[0].PartitionMaxBytes = 55 << 20
			var corrs []int32
			for range 64 {
				corr, err := conn.Send(req)
				if err != nil {
					t.Fatal(err)
				}
				corrs = append(corrs, corr)
			}
			var held uint64
			testkit.Eventually(t, "the broker stops reading the slow client's requests", func() bool {
				h := heapAfterGC()
				time.Sleep(300 * time.Millisecond)
				steady := heapAfterGC()
				held = max(steady, base) - base
				return h+1<<20 > steady
			})
			t.Logf("%s: 64 pipelined 8 MiB answers, unread, hold %d MiB of heap", name, held>>20)
			if limit := uint64(2 << 20); !copyData && held > limit {
				t.Fatalf("the unread answers hold %d bytes of heap, want the records left in the file", held)
			}
			if limit := uint64(32<<20 + 8<<20 + 8<<20); copyData && held > limit {
				t.Fatalf("the unread answers hold %d bytes of heap, want at most the per-connection bound and one answer", held)
			}
			for _, corr := range corrs {
				resp, err := conn.Read(req, corr)
				if err != nil {
					t.Fatal(err)
				}
				if p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]; len(batches(t, p.RecordBatches)) != 8 {
					t.Fatalf("answer %d: %d batches, want all 8", corr, len(batches(t, p.RecordBatches)))
				}
			}
		})
	}
}
