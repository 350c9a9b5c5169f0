package groups

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// failoverWalk is one seeded walk of a consumer group across a coordinator move, with a
// ledger of acknowledged commits.
type failoverWalk struct {
	t      *testing.T
	e      *env
	rng    *rand.Rand
	ms     []*cm
	n      int             // members created so far (for fresh ids)
	next   int64           // the next offset a commit carries: every commit is higher than all before
	acked  map[int32]int64 // partition → the last acknowledged commit
	before map[*cm]bool    // members that joined the first coordinator
}

func (w *failoverWalk) live() []*cm {
	var out []*cm
	for _, m := range w.ms {
		if !m.gone {
			out = append(out, m)
		}
	}
	return out
}

func (w *failoverWalk) join(c *Coordinator) *cm {
	w.n++
	m := w.e.member(c, "g", fmt.Sprintf("m%d", w.n), "t")
	m.slow = w.rng.IntN(2) == 0
	w.ms = append(w.ms, m)
	m.mustBeat()
	return m
}

// commit commits one higher offset for every partition m holds, at its epoch, and records
// what was acknowledged. It returns the first partition error (0 when all were taken).
func (w *failoverWalk) commit(m *cm) int16 {
	w.t.Helper()
	if len(m.held) == 0 {
		return 0
	}
	offsets := map[int32]int64{}
	for p := range m.held {
		w.next++
		offsets[p.p] = w.next
	}
	r := commitReq("g", m.id, m.epoch, map[string]map[int32]int64{"t": offsets})
	r.Version = 9
	var first int16
	for p, code := range firstTopicCodes(w.e.commitResp(m.c, r)) {
		if code == 0 {
			w.acked[p] = offsets[p]
		} else if first == 0 {
			first = code
		}
	}
	return first
}

// ownersOf fails if two live members of coordinator c hold one partition.
func (w *failoverWalk) ownersOf(c *Coordinator) {
	w.t.Helper()
	var at []*cm
	for _, m := range w.ms {
		if m.c == c && !w.before[m] {
			at = append(at, m)
		}
	}
	noTwoOwners(w.t, at)
}

// overlap counts the partitions held both by a member of the first coordinator that has not
// yet heard of the move and by a member of the new one: the documented gap of a move while
// membership does not move with the coordinator (at least once, never a lost commit).
func (w *failoverWalk) overlap() int {
	stale := pset{}
	for _, m := range w.live() {
		if w.before[m] {
			for p := range m.held {
				stale[p] = struct{}{}
			}
		}
	}
	n := 0
	for _, m := range w.live() {
		if !w.before[m] {
			for p := range m.held {
				if _, ok := stale[p]; ok {
					n++
				}
			}
		}
	}
	return n
}

// beforeMove is the first coordinator's walk: joins, full heartbeats, keepalives of members
// still revoking, lost answers, leaves and commits; no partition ever has two owners.
func (w *failoverWalk) beforeMove(steps int) {
	for step := range steps {
		l := w.live()
		switch r := w.rng.IntN(100); {
		case len(l) == 0 || r < 15:
			w.join(w.e.c)
		case r < 65:
			m := l[w.rng.IntN(len(l))]
			beat := m.beat
			if len(m.revoked) > 0 && w.rng.IntN(2) == 0 {
				beat = m.keepalive
			}
			if code := beat(); code == kerr.FencedMemberEpoch.Code {
				m.held, m.epoch = pset{}, 0
			} else if code != 0 {
				w.t.Fatalf("step %d: heartbeat: %s", step, codeName(code))
			}
		case r < 72:
			m := l[w.rng.IntN(len(l))]
			if _, err := w.e.c.ConsumerGroupHeartbeat(ctxT(w.t), Client{}, m.request()); err != nil {
				w.t.Fatal(err) // the answer is lost: the member keeps what it had
			}
		case r < 77:
			l[w.rng.IntN(len(l))].leave(-1)
		default:
			if code := w.commit(l[w.rng.IntN(len(l))]); code != 0 {
				w.t.Fatalf("step %d: commit of a member at its epoch: %s", step, codeName(code))
			}
		}
		noTwoOwners(w.t, w.ms)
	}
}

// A consumer group's coordinator moves in the middle of a rebalance (members joined, some
// still revoking, a lost answer pending), and the deposed coordinator may or may not have
// learned it. After the new coordinator claims the group:
//   - the deposed one answers every heartbeat and commit NOT_COORDINATOR: it hands out no
//     partition and acknowledges no commit;
//   - member epochs do not move with the coordinator (docs/groups.md "Persisting consumer-group
//     membership"): every member of the first coordinator is answered UNKNOWN_MEMBER_ID there,
//     its heartbeat and its commit, so no stale epoch is ever taken;
//   - among the new coordinator's members no partition has two owners at any step;
//   - committed offsets never go back: what the new coordinator serves is the last commit
//     acknowledged by either;
//   - the group converges to every partition assigned, spread ±1, Stable.
func TestACoordinatorMoveMidRebalanceNeverTakesAStaleMemberOrLosesACommit(t *testing.T) {
	for seed := range uint64(16) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 4848))
			e := newEnv(t)
			e.topics.set("t", tID, 12)
			w := &failoverWalk{t: t, e: e, rng: rng, acked: map[int32]int64{}, before: map[*cm]bool{}}
			w.beforeMove(20 + rng.IntN(60))
			// Mid-rebalance: newcomers join, and only some members hear of it.
			for range 1 + rng.IntN(3) {
				w.join(e.c)
			}
			for _, m := range w.live() {
				if rng.IntN(2) == 0 {
					_ = m.beat()
				}
			}
			noTwoOwners(t, w.ms)
			old := e.c
			for _, m := range w.ms {
				w.before[m] = true
			}
			rebalancing := e.cgDescribe(old, "g").State

			// The move: the next coordinator claims the group on its first request.
			next := e.start(2)
			if rng.IntN(2) == 0 {
				old.SetView(2, func(string) bool { return false }) // the deposed one learns it
			}
			claimer := w.join(next)
			w.before[claimer] = false
			stale, worst := 0, 0
			for step := 0; step < 400; step++ {
				l := w.live()
				if len(l) == 0 {
					break
				}
				m := l[rng.IntN(len(l))]
				switch {
				case m.c == old:
					// A member that has not heard of the move yet: the deposed coordinator
					// takes nothing from it.
					if code := m.beat(); code != kerr.NotCoordinator.Code {
						t.Fatalf("step %d: the deposed coordinator answered a heartbeat %s (group was %s)", step, codeName(code), rebalancing)
					}
					if code := w.commit(m); len(m.held) > 0 && code != kerr.NotCoordinator.Code {
						t.Fatalf("step %d: the deposed coordinator answered a commit %s", step, codeName(code))
					}
					m.c = next // it finds the new coordinator
				case w.before[m]:
					// Its first heartbeat and commit at the new coordinator.
					if len(m.held) > 0 {
						stale++
					}
					if code := w.commit(m); len(m.held) > 0 && code != kerr.UnknownMemberID.Code {
						t.Fatalf("step %d: a commit of the first coordinator's member %s at epoch %d: %s", step, m.id, m.epoch, codeName(code))
					}
					if code := m.beat(); code != kerr.UnknownMemberID.Code {
						t.Fatalf("step %d: a heartbeat of the first coordinator's member %s at epoch %d: %s", step, m.id, m.epoch, codeName(code))
					}
					// As kgo does: abandon everything and rejoin, under a fresh id or its own.
					m.held, m.revoked, m.epoch, w.before[m] = pset{}, nil, 0, false
					if rng.IntN(2) == 0 {
						w.n++
						m.id = fmt.Sprintf("m%d", w.n)
					}
					m.mustBeat()
				default:
					switch r := rng.IntN(100); {
					case r < 10:
						w.join(next)
					case r < 60:
						if code := m.beat(); code == kerr.FencedMemberEpoch.Code {
							m.held, m.epoch = pset{}, 0
						} else if code != 0 {
							t.Fatalf("step %d: heartbeat at the new coordinator: %s", step, codeName(code))
						}
					case r < 65:
						m.leave(-1)
					default:
						if code := w.commit(m); code != 0 {
							t.Fatalf("step %d: commit at the new coordinator: %s", step, codeName(code))
						}
					}
				}
				w.ownersOf(next)
				worst = max(worst, w.overlap())
				allMoved := true
				for _, m := range w.live() {
					allMoved = allMoved && !w.before[m]
				}
				if allMoved && step > 40 {
					break
				}
			}
			for _, m := range w.live() {
				if w.before[m] {
					t.Fatalf("member %s never reached the new coordinator", m.id)
				}
			}
			t.Logf("group %s at the move; %d members reached the new coordinator holding partitions; at most %d of 12 partitions were read by two clients at once", rebalancing, stale, worst)
			converge(t, w.live(), 20)
			balanced(t, w.live(), 12)
			if d := e.cgDescribe(next, "g"); d.State != "Stable" {
				t.Fatalf("after converging: %s", d.State)
			}
			got, code := e.fetch(next, "g")
			if code != 0 {
				t.Fatalf("fetch: %s", codeName(code))
			}
			for p, want := range w.acked {
				if got[p] != want {
					t.Fatalf("partition %d: the new coordinator serves offset %d, the last acknowledged commit was %d", p, got[p], want)
				}
			}
		})
	}
}
