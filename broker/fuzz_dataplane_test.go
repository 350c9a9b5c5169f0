package broker

import (
	"bytes"
	"testing"

	"github.com/paddock-dev/paddock/broker/internal/recordbatch"
)

// FuzzProduceRecordsChecks feeds arbitrary partition records through the checks Produce and
// Fetch make on client and stored bytes before storage looks at them (checkProduceRecords,
// checkTimestamps, hasZstd). Nothing may panic, and an accepted batch is a prefix of what was
// sent, never longer.
func FuzzProduceRecordsChecks(f *testing.F) {
	one := recordbatch.Plain([]byte("v")).Bytes()
	f.Add(int16(10), one)
	f.Add(int16(6), recordbatch.Batch{Values: [][]byte{[]byte("z")}, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Zstd: true}.Bytes())
	f.Add(int16(3), append(append([]byte{}, one...), one...))
	f.Add(int16(10), one[:30])
	f.Fuzz(func(t *testing.T, version int16, b []byte) {
		got, code, _ := checkProduceRecords(version, b)
		if code == 0 && (len(got) < batchOverhead || len(got) > len(b) || !bytes.Equal(got, b[:len(got)])) {
			t.Fatalf("accepted %d bytes of %d that are not a prefix of at least a batch overhead", len(got), len(b))
		}
		checkTimestamps(b, 60000, 60000, 1_700_000_000_000)
		hasZstd(b)
	})
}
