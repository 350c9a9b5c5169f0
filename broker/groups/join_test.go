package groups

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func noDelay(c *Config) { c.InitialRebalanceDelay = 0 }

func TestJoinV4WithoutMemberIDIsMemberIDRequiredThenJoins(t *testing.T) {
	e := newEnv(t, noDelay)
	first := await(t, e.join(e.c, joinReq(4, "g", "")))
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %s, want MEMBER_ID_REQUIRED", codeName(first.ErrorCode))
	}
	if !strings.HasPrefix(first.MemberID, "client-") || first.Generation != -1 {
		t.Fatalf("first join: member %q generation %d, want client-<uuid> and -1", first.MemberID, first.Generation)
	}
	second := await(t, e.join(e.c, joinReq(4, "g", first.MemberID)))
	if second.ErrorCode != 0 || second.MemberID != first.MemberID || second.Generation != 1 || second.LeaderID != first.MemberID {
		t.Fatalf("second join: %s member %q gen %d leader %q", codeName(second.ErrorCode), second.MemberID, second.Generation, second.LeaderID)
	}
	if len(second.Members) != 1 || second.Members[0].MemberID != first.MemberID {
		t.Fatalf("leader's members: %+v", second.Members)
	}
}

func TestJoinBeforeV4WithoutMemberIDJoinsAtOnce(t *testing.T) {
	e := newEnv(t, noDelay)
	for _, v := range []int16{0, 1, 2, 3} {
		r := await(t, e.join(e.c, joinReq(v, "g"+string(rune('0'+v)), "")))
		if r.ErrorCode != 0 || r.MemberID == "" || r.Generation != 1 {
			t.Fatalf("v%d: %s member %q gen %d", v, codeName(r.ErrorCode), r.MemberID, r.Generation)
		}
		if r.Protocol == nil || *r.Protocol != "range" {
			t.Fatalf("v%d protocol %v", v, r.Protocol)
		}
	}
}

func TestPendingMemberExpiresAfterSessionTimeout(t *testing.T) {
	e := newEnv(t)
	first := await(t, e.join(e.c, joinReq(5, "g", "")))
	e.step(10 * time.Second) // the request's session timeout
	r := await(t, e.join(e.c, joinReq(5, "g", first.MemberID)))
	if r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("rejoin after expiry: %s, want UNKNOWN_MEMBER_ID", codeName(r.ErrorCode))
	}
}

func TestPendingMemberHoldsTheRebalanceUntilItJoins(t *testing.T) {
	e := newEnv(t)
	ids, gen := e.stableGroup(e.c, "g", 1)
	// A new member gets its id; the leader's rejoin must then wait for it.
	first := await(t, e.join(e.c, joinReq(5, "g", "")))
	leader := e.join(e.c, joinReq(5, "g", ids[0]))
	pending(t, leader)
	newcomer := e.join(e.c, joinReq(5, "g", first.MemberID))
	l, n := await(t, leader), await(t, newcomer)
	if l.ErrorCode != 0 || n.ErrorCode != 0 || l.Generation != gen+1 || n.Generation != gen+1 {
		t.Fatalf("leader %s gen %d, newcomer %s gen %d", codeName(l.ErrorCode), l.Generation, codeName(n.ErrorCode), n.Generation)
	}
	if len(l.Members) != 2 || len(n.Members) != 0 {
		t.Fatalf("leader sees %d members, follower %d", len(l.Members), len(n.Members))
	}
}

func TestJoinWithMemberIDToMissingGroupIsUnknownMember(t *testing.T) {
	e := newEnv(t)
	r := await(t, e.join(e.c, joinReq(5, "nope", "someone")))
	if r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("%s, want UNKNOWN_MEMBER_ID", codeName(r.ErrorCode))
	}
	if got := e.describe(e.c, "nope").State; got != "Dead" {
		t.Fatalf("the failed join created group: state %s", got)
	}
}

func TestJoinProtocolChecks(t *testing.T) {
	e := newEnv(t)
	e.stableGroup(e.c, "g", 1)
	cases := []struct {
		name string
		req  func() *kmsg.JoinGroupRequest
		want int16
	}{
		{"another protocol type is inconsistent", func() *kmsg.JoinGroupRequest {
			r := joinReq(3, "g", "")
			r.ProtocolType = "connect"
			return r
		}, kerr.InconsistentGroupProtocol.Code},
		{"no protocol in common is inconsistent", func() *kmsg.JoinGroupRequest { return joinReq(3, "g", "", "roundrobin") }, kerr.InconsistentGroupProtocol.Code},
		{"an empty protocol type cannot create a group", func() *kmsg.JoinGroupRequest {
			r := joinReq(3, "fresh", "")
			r.ProtocolType = ""
			return r
		}, kerr.InconsistentGroupProtocol.Code},
		{"no protocols cannot create a group", func() *kmsg.JoinGroupRequest {
			r := joinReq(3, "fresh2", "")
			r.Protocols = nil
			return r
		}, kerr.InconsistentGroupProtocol.Code},
		{"session timeout below group.min.session.timeout.ms", func() *kmsg.JoinGroupRequest {
			r := joinReq(3, "g", "")
			r.SessionTimeoutMillis = 5999
			return r
		}, kerr.InvalidSessionTimeout.Code},
		{"session timeout above group.max.session.timeout.ms", func() *kmsg.JoinGroupRequest {
			r := joinReq(3, "g", "")
			r.SessionTimeoutMillis = 1800001
			return r
		}, kerr.InvalidSessionTimeout.Code},
		{"an empty group id is invalid", func() *kmsg.JoinGroupRequest { return joinReq(3, "", "") }, kerr.InvalidGroupID.Code},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := await(t, e.join(e.c, tc.req()))
			if r.ErrorCode != tc.want || r.Generation != -1 {
				t.Fatalf("%s gen %d, want %s", codeName(r.ErrorCode), r.Generation, codeName(tc.want))
			}
		})
	}
}

func TestJoinAboveGroupMaxSizeIsRefused(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxGroupSize = 2 })
	e.stableGroup(e.c, "g", 2)
	r := await(t, e.join(e.c, joinReq(3, "g", "")))
	if r.ErrorCode != kerr.GroupMaxSizeReached.Code || r.MemberID != "" {
		t.Fatalf("%s member %q, want GROUP_MAX_SIZE_REACHED and no member id", codeName(r.ErrorCode), r.MemberID)
	}
}

func TestProtocolIsChosenByVoteAmongCommonProtocols(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.InitialRebalanceDelay = time.Second })
	// Three members support range and roundrobin; two prefer roundrobin. "sticky" is not
	// common, so it cannot win though one member lists it first.
	a := e.join(e.c, joinReq(3, "g", "", "sticky", "range", "roundrobin"))
	b := e.join(e.c, joinReq(3, "g", "", "roundrobin", "range"))
	c := e.join(e.c, joinReq(3, "g", "", "roundrobin", "range"))
	time.Sleep(50 * time.Millisecond)
	e.step(time.Second)
	e.step(time.Second)
	for _, ch := range []<-chan *kmsg.JoinGroupResponse{a, b, c} {
		r := await(t, ch)
		if r.ErrorCode != 0 || r.Protocol == nil || *r.Protocol != "roundrobin" {
			t.Fatalf("%s protocol %v, want roundrobin", codeName(r.ErrorCode), r.Protocol)
		}
	}
}

func TestLeaderIsTheFirstMemberAndAloneGetsTheMemberList(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.InitialRebalanceDelay = time.Second })
	a := e.join(e.c, joinReq(3, "g", ""))
	time.Sleep(20 * time.Millisecond)
	b := e.join(e.c, joinReq(3, "g", ""))
	time.Sleep(20 * time.Millisecond)
	e.step(time.Second)
	e.step(time.Second)
	ra, rb := await(t, a), await(t, b)
	if ra.LeaderID != ra.MemberID || rb.LeaderID != ra.MemberID {
		t.Fatalf("leader %q / %q, want the first member %q", ra.LeaderID, rb.LeaderID, ra.MemberID)
	}
	if len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("leader got %d members, follower %d", len(ra.Members), len(rb.Members))
	}
	if string(ra.Members[1].ProtocolMetadata) != string(subscription("t")) {
		t.Fatalf("member metadata not passed to the leader: %q", ra.Members[1].ProtocolMetadata)
	}
}

func TestInitialRebalanceDelayWaitsBeforeTheFirstGeneration(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	a := e.join(e.c, joinReq(3, "g", ""))
	pending(t, a)
	e.step(2999 * time.Millisecond)
	pending(t, a)
	e.step(time.Millisecond)
	if r := await(t, a); r.ErrorCode != 0 || r.Generation != 1 {
		t.Fatalf("%s gen %d", codeName(r.ErrorCode), r.Generation)
	}
}

// Apache's InitialDelayedJoin: each new member in generation 0 extends the wait by another
// delay, but never past the rebalance timeout (30 s here, 3 s steps).
func TestInitialRebalanceDelayGrowsPerNewMemberUpToTheRebalanceTimeout(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	var chans []<-chan *kmsg.JoinGroupResponse
	add := func() {
		chans = append(chans, e.join(e.c, joinReq(3, "g", "")))
		time.Sleep(20 * time.Millisecond)
	}
	add()
	// A new member arrives before every 3 s step ends, so each step is followed by another;
	// Apache's remaining time shrinks by a step each time: 27, 24, ..., 0 at 27 s.
	for range 9 {
		e.step(2 * time.Second)
		add()
		e.step(time.Second)
		pending(t, chans[0])
	}
	// 27 s in: one more member, but the rebalance timeout (30 s) caps the wait.
	e.step(2 * time.Second)
	add()
	e.step(999 * time.Millisecond)
	pending(t, chans[0])
	e.step(time.Millisecond)
	for i, ch := range chans {
		if r := await(t, ch); r.ErrorCode != 0 || r.Generation != 1 {
			t.Fatalf("member %d: %s gen %d", i, codeName(r.ErrorCode), r.Generation)
		}
	}
}

func TestInitialRebalanceDelayAppliesOnlyToAnEmptyGroup(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	a := e.join(e.c, joinReq(3, "g", ""))
	time.Sleep(20 * time.Millisecond)
	e.step(3 * time.Second)
	ra := await(t, a)
	if r := await(t, e.sync(e.c, "g", ra.MemberID, ra.Generation, nil)); r.ErrorCode != 0 {
		t.Fatalf("sync: %s", codeName(r.ErrorCode))
	}
	// A rebalance of a non-empty group completes as soon as everyone has joined.
	r := await(t, e.join(e.c, joinReq(3, "g", ra.MemberID)))
	if r.ErrorCode != 0 || r.Generation != 2 {
		t.Fatalf("leader rejoin: %s gen %d, want generation 2 at once", codeName(r.ErrorCode), r.Generation)
	}
}

func TestRebalanceTimeoutDropsDynamicMembersThatDoNotRejoin(t *testing.T) {
	e := newEnv(t)
	ids, gen := e.stableGroup(e.c, "g", 2)
	// The leader rejoins (a rebalance); the follower never does.
	l := e.join(e.c, joinReq(5, "g", ids[0]))
	pending(t, l)
	if code := e.heartbeat(e.c, "g", ids[1], gen, nil); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("follower heartbeat during the rebalance: %s", codeName(code))
	}
	e.step(30 * time.Second)
	r := await(t, l)
	if r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("%s gen %d members %d, want generation %d with the leader alone", codeName(r.ErrorCode), r.Generation, len(r.Members), gen+1)
	}
	if code := e.heartbeat(e.c, "g", ids[1], gen, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("dropped follower heartbeat: %s, want UNKNOWN_MEMBER_ID", codeName(code))
	}
}

func TestNewMemberJoinExpiresAfterFiveMinutes(t *testing.T) {
	e := newEnv(t, noDelay)
	// A leader with a 30-minute session that never rejoins, and a rebalance timeout of 10
	// minutes: the rebalance the new member starts cannot finish within 5 minutes.
	lr := joinReq(3, "g", "")
	lr.SessionTimeoutMillis, lr.RebalanceTimeoutMillis = 1800000, 600000
	l := await(t, e.join(e.c, lr))
	if r := await(t, e.sync(e.c, "g", l.MemberID, l.Generation, nil)); r.ErrorCode != 0 {
		t.Fatalf("sync: %s", codeName(r.ErrorCode))
	}
	n := e.join(e.c, joinReq(3, "g", ""))
	pending(t, n)
	e.step(5*time.Minute - time.Millisecond)
	pending(t, n)
	e.step(time.Millisecond)
	if got := await(t, n); got.ErrorCode != kerr.UnknownMemberID.Code || got.MemberID != "" {
		t.Fatalf("new member after 5 minutes: %s member %q, want UNKNOWN_MEMBER_ID", codeName(got.ErrorCode), got.MemberID)
	}
}
