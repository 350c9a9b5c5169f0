package groups

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// cm is a consumer-protocol member as a client runs it, in miniature: it holds exactly what
// the coordinator last assigned it (dropping revoked partitions at once, as a client does
// after committing), and reports that on every heartbeat.
type cm struct {
	e        *env
	c        *Coordinator
	group    string
	id       string
	instance *string
	epoch    int32
	names    []string
	regex    *string
	assignor *string
	held     pset
	// gone: left, or fenced and not rejoined; it holds nothing and does not heartbeat.
	gone bool
	// slow: the member keeps consuming revoked partitions (committing their offsets) until it
	// calls finishRevoke, as a client does while its revoke callback runs; meanwhile it sends
	// keepalives that do not say what it owns. revoked is what it still holds that way.
	slow    bool
	revoked pset
	// mayDescribe is the DESCRIBE check its heartbeats carry (Client.MayDescribeTopic); nil:
	// every topic.
	mayDescribe func(topic string) bool
}

func (e *env) member(c *Coordinator, group, id string, names ...string) *cm {
	return &cm{e: e, c: c, group: group, id: id, names: names, held: pset{}}
}

// request builds this member's next full heartbeat.
func (m *cm) request() *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch = m.group, m.id, m.epoch
	r.InstanceID = m.instance
	r.RebalanceTimeoutMillis = 30000
	r.SubscribedTopicNames = m.names
	if m.names == nil && m.regex == nil {
		r.SubscribedTopicNames = []string{}
	}
	r.SubscribedTopicRegex = m.regex
	r.ServerAssignor = m.assignor
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if m.epoch != 0 {
		m.finishRevoke() // a full heartbeat says what it owns: it has let go
		for _, t := range byTopicID(m.held) {
			r.Topics = append(r.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.id, Partitions: t.partitions})
		}
	}
	return r
}

// send sends r and applies a successful answer.
func (m *cm) send(r *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	m.e.t.Helper()
	resp, err := m.c.ConsumerGroupHeartbeat(ctxT(m.e.t), Client{ID: "client-" + m.id, Host: "/127.0.0.1", MayDescribeTopic: m.mayDescribe}, r)
	if err != nil {
		m.e.t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		return resp
	}
	if resp.MemberID != nil {
		m.id = *resp.MemberID
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		next := pset{}
		for _, t := range resp.Assignment.Topics {
			for _, p := range t.Partitions {
				next[tpid{t.TopicID, p}] = struct{}{}
			}
		}
		if m.slow {
			if m.revoked == nil {
				m.revoked = pset{}
			}
			for p := range m.held.minus(next) {
				m.revoked[p] = struct{}{}
			}
			for p := range m.revoked {
				next[p] = struct{}{}
			}
		}
		m.held = next
	}
	return resp
}

// keepalive is the heartbeat of a member still revoking: nothing but its id and epoch.
func (m *cm) keepalive() int16 {
	m.e.t.Helper()
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = 1, m.group, m.id, m.epoch, -1
	return m.send(r).ErrorCode
}

// finishRevoke stops consuming what a slow member was told to give up.
func (m *cm) finishRevoke() {
	for p := range m.revoked {
		delete(m.held, p)
	}
	m.revoked = nil
}

// beat sends a full heartbeat; a non-zero error code is returned, not fatal.
func (m *cm) beat() int16 {
	m.e.t.Helper()
	return m.send(m.request()).ErrorCode
}

// mustBeat is beat that must succeed.
func (m *cm) mustBeat() {
	m.e.t.Helper()
	if code := m.beat(); code != 0 {
		m.e.t.Fatalf("member %s heartbeat: %s", m.id, codeName(code))
	}
}

// leave sends epoch -1 (or -2 for a static member leaving for now).
func (m *cm) leave(epoch int32) int16 {
	m.e.t.Helper()
	r := m.request()
	r.MemberEpoch = epoch
	code := m.send(r).ErrorCode
	m.held, m.gone, m.epoch = pset{}, true, 0
	return code
}

// count is how many partitions m holds.
func (m *cm) count() int { return len(m.held) }

// noTwoOwners fails if a partition is held by two live members.
func noTwoOwners(t *testing.T, ms []*cm) {
	t.Helper()
	owner := map[tpid]string{}
	for _, m := range ms {
		if m.gone {
			continue
		}
		for p := range m.held {
			if o, ok := owner[p]; ok {
				t.Fatalf("partition %v owned by %s and %s at once", p, o, m.id)
			}
			owner[p] = m.id
		}
	}
}

// converge heartbeats every live member in rounds until nothing changes (at most rounds
// rounds) and returns how many rounds it took.
func converge(t *testing.T, ms []*cm, rounds int) int {
	t.Helper()
	for r := 1; r <= rounds; r++ {
		changed := false
		for _, m := range ms {
			if m.gone {
				continue
			}
			before, epoch := m.held, m.epoch
			m.mustBeat()
			noTwoOwners(t, ms)
			if !before.equal(m.held) || epoch != m.epoch {
				changed = true
			}
		}
		if !changed {
			return r
		}
	}
	t.Fatalf("members did not converge in %d rounds", rounds)
	return rounds
}

// counts is every live member's partition count, sorted.
func counts(ms []*cm) []int {
	var out []int
	for _, m := range ms {
		if !m.gone {
			out = append(out, m.count())
		}
	}
	slices.Sort(out)
	return out
}

// balanced fails unless the live members hold total partitions between them, spread ±1.
func balanced(t *testing.T, ms []*cm, total int) {
	t.Helper()
	c := counts(ms)
	sum := 0
	for _, n := range c {
		sum += n
	}
	if sum != total || len(c) > 0 && c[len(c)-1]-c[0] > 1 {
		t.Fatalf("counts %v (sum %d), want %d partitions spread ±1", c, sum, total)
	}
}

// cgDescribe describes group through ConsumerGroupDescribe v1.
func (e *env) cgDescribe(c *Coordinator, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	e.t.Helper()
	r := kmsg.NewPtrConsumerGroupDescribeRequest()
	r.Version, r.Groups = 1, []string{group}
	resp, err := c.ConsumerGroupDescribe(ctxT(e.t), r)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.Groups[0]
}

func memberIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%02d", i)
	}
	return out
}
