package balance

import (
	"fmt"
	"testing"
)

// BenchmarkRebalance is one decision over 100 brokers and 10,000 partitions (100 topics of
// 100), starting from the balancer's own even assignment. "moves" is the number of leader
// changes the decision makes; ns/op is its cost. Reproduce with `make bench-balance`.
//
//   - steady: nothing changed (the cost of every reconcile that finds nothing to do);
//   - broker-lost: one broker dies or drains (its 100 partitions move, nothing else);
//   - broker-joined: a 101st broker joins and takes its share;
//   - cold-start: all 10,000 partitions are new.
func BenchmarkRebalance(b *testing.B) {
	const brokers, topics, partitions = 100, 100, 100
	all := make([]Broker, brokers)
	for i := range all {
		all[i] = Broker{ID: int32(i), Incarnation: 1}
	}
	cold := Input{Alive: all}
	for t := range topics {
		cold.Topics = append(cold.Topics, fresh(fmt.Sprintf("topic-%03d", t), partitions))
	}
	even := next(mustAssign(b, cold), all)

	cases := []struct {
		name  string
		in    Input
		moves int
	}{
		{"steady", even, 0},
		{"broker-lost", Input{Alive: all[1:], Topics: even.Topics}, partitions},
		{"broker-joined", Input{Alive: append(all[:brokers:brokers], Broker{ID: brokers, Incarnation: 1}), Topics: even.Topics}, -1},
		{"cold-start", cold, brokers * partitions},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			moves := leaderChanges(mustAssign(b, c.in))
			if c.moves >= 0 && moves != c.moves {
				b.Fatalf("%d moves, want %d", moves, c.moves)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Assign(c.in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(moves), "moves")
		})
	}
}
