package interop

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/paddock-dev/paddock/internal/testkit"
)

// header is one record header.
type header struct{ Key, Value string }

// record is what a client wrote or read: the partition and offset it landed at (offset −1
// when the writing client does not report it), key, value and headers.
type record struct {
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []header
}

func (r record) String() string {
	return fmt.Sprintf("p%d@%d key %q value %d bytes %v", r.Partition, r.Offset, r.Key, len(r.Value), r.Headers)
}

// sameContent says whether a and b have the same key, value and headers (in order).
func sameContent(a, b record) bool {
	return bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) && slices.Equal(a.Headers, b.Headers)
}

// testRecords are n records with unique keys "<prefix>-<i>", binary values of varied sizes
// (0 to 4 KiB, every byte value) and, when withHeaders, up to two headers each.
func testRecords(prefix string, n int, withHeaders bool) []record {
	rng := rand.New(rand.NewPCG(uint64(len(prefix)), uint64(n)))
	out := make([]record, n)
	for i := range out {
		v := make([]byte, rng.IntN(4097))
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		out[i] = record{Partition: -1, Offset: -1, Key: fmt.Appendf(nil, "%s-%d", prefix, i), Value: v}
		if withHeaders {
			for h := range i % 3 {
				out[i].Headers = append(out[i].Headers, header{Key: fmt.Sprintf("h%d", h), Value: fmt.Sprintf("v%d-%d", i, h)})
			}
		}
	}
	return out
}

// checkReadBack fails the test unless read holds exactly the records of wrote, each once with
// the same content, matched by key; where the writer reported a partition and offset, the
// reader must have found it there. Within a partition the reader must see increasing offsets.
func checkReadBack(t *testing.T, wrote, read []record) {
	t.Helper()
	byKey := map[string]record{}
	for _, r := range wrote {
		byKey[string(r.Key)] = r
	}
	seen := map[string]bool{}
	last := map[int32]int64{}
	for _, r := range read {
		w, ok := byKey[string(r.Key)]
		switch {
		case !ok:
			t.Errorf("read a record nobody wrote: %v", r)
			continue
		case seen[string(r.Key)]:
			t.Errorf("read twice: %v", r)
		case !sameContent(w, r):
			t.Errorf("read %v, wrote %v: content differs", r, w)
		case w.Partition >= 0 && (w.Partition != r.Partition || w.Offset >= 0 && w.Offset != r.Offset):
			t.Errorf("read %v, but the producer was told p%d@%d", r, w.Partition, w.Offset)
		}
		if prev, ok := last[r.Partition]; ok && r.Offset <= prev {
			t.Errorf("partition %d: offset %d after %d", r.Partition, r.Offset, prev)
		}
		last[r.Partition] = r.Offset
		seen[string(r.Key)] = true
	}
	if len(seen) != len(wrote) {
		var missing []string
		for k := range byKey {
			if !seen[k] {
				missing = append(missing, k)
			}
		}
		slices.Sort(missing)
		t.Errorf("read back %d of %d records; missing %s", len(seen), len(wrote), strings.Join(missing, " "))
	}
}

// createTopic creates topic name with partitions partitions through kadm and waits until
// every broker gives every partition a leader.
func createTopic(t *testing.T, addrs []string, name string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(kgoClient(t, addrs))
	if _, err := adm.CreateTopic(testCtx(t), partitions, 1, nil, name); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	waitLeaders(t, addrs, name, partitions)
}

// waitLeaders waits until every broker's Metadata gives topic partitions partitions, each
// with a leader and no error.
func waitLeaders(t *testing.T, addrs []string, topic string, partitions int32) {
	t.Helper()
	ctx := testCtx(t)
	for _, addr := range addrs {
		adm := kadm.NewClient(kgoClient(t, []string{addr}))
		testkit.Eventually(t, fmt.Sprintf("%s to lead every partition of %s", addr, topic), func() bool {
			md, err := adm.Metadata(ctx, topic)
			if err != nil {
				return false
			}
			td, ok := md.Topics[topic]
			if !ok || td.Err != nil || len(td.Partitions) != int(partitions) {
				return false
			}
			for _, p := range td.Partitions {
				if p.Err != nil || p.Leader < 0 {
					return false
				}
			}
			return true
		})
	}
}

// kgoClient is a franz-go client seeded with addrs, closed when the test ends.
func kgoClient(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// testCtx is the context of a test's requests (testkit.Context).
var testCtx = testkit.Context
