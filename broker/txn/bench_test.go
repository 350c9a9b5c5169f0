package txn

import (
	"testing"
)

// BenchmarkTransaction is one whole transaction over real files: AddPartitions (one durable
// write), EndTxn commit (one more), the markers (in memory, instant) and CompleteCommit (a
// third), measured to Complete.
func BenchmarkTransaction(b *testing.B) {
	h := newHarness(b)
	c := New(Config{FS: h.fs, Root: h.root, Epoch: 1, Clock: h.clock, ProducerIDs: h.pids, Markers: h.markers, Leader: leaderOf})
	defer c.Close()
	pid, epoch, code := c.InitProducerID("tx", InitInput{TimeoutMs: 60000, ProducerID: NoProducerID, ProducerEpoch: NoEpoch, Version: 4})
	if code != 0 {
		b.Fatal(code)
	}
	p := Producer{ProducerID: pid, ProducerEpoch: epoch, Version: 3}
	tps := []TopicPartition{{"a", 0}, {"a", 1}, {"a", 2}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if code := c.AddPartitions("tx", p, tps); code != 0 {
			b.Fatal(code)
		}
		if code := c.EndTxn("tx", p, true); code != 0 {
			b.Fatal(code)
		}
		for {
			d, _ := c.Describe("tx")
			if d.State == CompleteCommit {
				break
			}
		}
	}
}
