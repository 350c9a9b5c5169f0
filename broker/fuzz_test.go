package broker

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/wire"
)

// FuzzDecodeRequest feeds arbitrary bytes through the frame reader and the header/body
// decoder the way a connection does. Nothing may panic, a frame above the cap is refused, and
// a request that decodes must survive re-encoding with the same header. The committed corpus
// (testdata/fuzz/FuzzDecodeRequest) holds valid frames of every served key and version plus
// known-bad shapes; go test replays it as an ordinary test.
func FuzzDecodeRequest(f *testing.F) {
	for _, frame := range seedFrames() {
		f.Add(frame)
	}
	const maxBytes = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var buf []byte
		for {
			frame, err := wire.ReadFrame(r, buf, maxBytes)
			if err != nil {
				if errors.Is(err, wire.ErrFrameTooLarge) && len(data) >= 4 && len(frame) > maxBytes {
					t.Fatalf("refused frame still allocated %d bytes", len(frame))
				}
				return
			}
			buf = frame
			h, req, err := decodeFrame(frame)
			if err != nil {
				continue
			}
			again := appendRequestFrame(nil, req, h.CorrelationID)
			h2, req2, err := decodeFrame(again[4:])
			if err != nil {
				t.Fatalf("re-encoded %s v%d does not decode: %v", kmsg.NameForKey(h.Key), h.Version, err)
			}
			if h2.Key != h.Key || h2.Version != h.Version || h2.CorrelationID != h.CorrelationID || req2.GetVersion() != h.Version {
				t.Fatalf("header changed on re-encode: %+v → %+v", h, h2)
			}
		}
	})
}

// decodeFrame decodes a frame (without its size prefix) as a connection does: the header the
// wire server parses, then the request the Handler decodes.
func decodeFrame(frame []byte) (wire.Header, kmsg.Request, error) {
	h, rest, err := wire.ParseHeader(frame)
	if err != nil {
		return h, nil, err
	}
	req, err := decodeRequest(h, rest)
	return h, req, err
}

// seedFrames is one valid frame per served key and version, plus frames that must be refused.
func seedFrames() [][]byte {
	var out [][]byte
	for key, a := range apis {
		for v := a.min; v <= a.max; v++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			out = append(out, appendRequestFrame(nil, req, int32(v)))
		}
	}
	name := "orders"
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 12
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
	out = append(out,
		appendRequestFrame(nil, meta, 1),
		[]byte{0x80, 0, 0, 0},                                     // 2 GiB size prefix
		[]byte{0, 0, 0, 3, 0, 3, 0},                               // frame too small
		[]byte{0, 0, 0, 10, 0, 200, 0, 0, 0, 0, 0, 1, 0xff, 0xff}, // unknown key 200
	)
	return out
}
