package broker

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/wire"
)

// TestFetchFrameIsTheEncodedResponse: the vectored Fetch frame (encodeFetchFrame) writes
// exactly the bytes of the one-buffer encoding at every version, large and small and empty
// record sets mixed, and leaves the response as it was.
func TestFetchFrameIsTheEncodedResponse(t *testing.T) {
	big := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = seed + byte(i*7)
		}
		return b
	}
	for v := int16(4); v <= 16; v++ {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = v
		sizes := [][]int{{vectoredMinRecords, 10, 0, 300 << 10}, {1 << 20}, {vectoredMinRecords - 1, 70000}}
		for ti, ps := range sizes {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = fmt.Sprintf("topic-%d", ti), [16]byte{byte(ti + 1)}
			for pi, n := range ps {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.HighWatermark, rp.RecordBatches = int32(pi), int64(n), big(n, byte(ti*16+pi))
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		want := appendResponse(nil, 77, resp)
		pieces := encodeFetchFrame(77, resp, nil)
		if pieces == nil {
			t.Fatalf("v%d: no vectored frame for large record sets", v)
		}
		if got := joinPieces(t, pieces); !bytes.Equal(got, want) {
			t.Fatalf("v%d: vectored frame (%d bytes) differs from the encoded response (%d bytes)", v, len(got), len(want))
		}
		if again := appendResponse(nil, 77, resp); !bytes.Equal(again, want) {
			t.Fatalf("v%d: encodeFetchFrame changed the response", v)
		}
		var parsed kmsg.FetchResponse
		parsed.Version = v
		body := want[8:]
		if resp.IsFlexible() {
			body = body[1:]
		}
		if err := parsed.ReadFrom(body); err != nil || len(parsed.Topics[1].Partitions[0].RecordBatches) != 1<<20 {
			t.Fatalf("v%d: the frame does not decode: %v", v, err)
		}
	}
	small := kmsg.NewPtrFetchResponse()
	small.Version = 16
	if encodeFetchFrame(1, small, nil) != nil {
		t.Fatal("a Fetch answer without large record sets got a vectored frame")
	}
}

// joinPieces is the bytes an answer's pieces write, file ranges read from their files.
func joinPieces(t *testing.T, pieces []wire.Piece) []byte {
	t.Helper()
	var out []byte
	for _, p := range pieces {
		if p.File == nil {
			out = append(out, p.Bytes...)
			continue
		}
		b := make([]byte, p.Len)
		if _, err := p.File.ReadAt(b, p.Offset); err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}
