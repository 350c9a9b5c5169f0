package groups

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func staticJoin(v int16, group, member, instance string, protocols ...string) *kmsg.JoinGroupRequest {
	r := joinReq(v, group, member, protocols...)
	r.InstanceID = &instance
	return r
}

// staticPair makes a Stable group of static member "a" (the leader) and dynamic member b.
func (e *env) staticPair(v int16) (a, b string, gen int32) {
	e.t.Helper()
	ach := e.join(e.c, staticJoin(v, "g", "", "a"))
	e.waitState("g", "PreparingRebalance")
	bid, bch := e.joinDynamic(e.c, "g")
	rs := e.collect([]<-chan *kmsg.JoinGroupResponse{ach, bch})
	a, gen = rs[0].MemberID, rs[0].Generation
	if rs[0].LeaderID != a || rs[1].MemberID != bid {
		e.t.Fatalf("leader %q, want the static member %q", rs[0].LeaderID, a)
	}
	f := e.sync(e.c, "g", bid, gen, nil)
	await(e.t, e.sync(e.c, "g", a, gen, map[string][]byte{a: []byte("A"), bid: []byte("B")}))
	await(e.t, f)
	return a, bid, gen
}

func TestStaticMemberRejoiningAStableGroupIsReplacedWithoutRebalance(t *testing.T) {
	e := newEnv(t)
	a, b, gen := e.staticPair(5)
	r := await(t, e.join(e.c, staticJoin(5, "g", "", "a")))
	if r.ErrorCode != 0 || r.Generation != gen || r.MemberID == a {
		t.Fatalf("%s gen %d member %q, want the current generation %d and a new member id", codeName(r.ErrorCode), r.Generation, r.MemberID, gen)
	}
	// Before v9 the replaced leader is told the old leader id, so it does not assign.
	if r.LeaderID != a || len(r.Members) != 0 || r.SkipAssignment {
		t.Fatalf("leader %q members %d skip %v, want the old leader id %q and no members", r.LeaderID, len(r.Members), r.SkipAssignment, a)
	}
	if st := e.describe(e.c, "g").State; st != "Stable" {
		t.Fatalf("state %s, want Stable (no rebalance)", st)
	}
	if code := e.heartbeat(e.c, "g", b, gen, nil); code != 0 {
		t.Fatalf("other member: %s, want NONE (no rebalance)", codeName(code))
	}
	// The new member id syncs and gets the assignment the old one had.
	if s := await(t, e.sync(e.c, "g", r.MemberID, gen, nil)); s.ErrorCode != 0 || string(s.MemberAssignment) != "A" {
		t.Fatalf("sync of the new member id: %s %q", codeName(s.ErrorCode), s.MemberAssignment)
	}
}

func TestStaticLeaderRejoiningV9IsToldToSkipAssignment(t *testing.T) {
	e := newEnv(t)
	a, _, gen := e.staticPair(9)
	r := await(t, e.join(e.c, staticJoin(9, "g", "", "a")))
	if r.ErrorCode != 0 || r.Generation != gen || !r.SkipAssignment || r.LeaderID != r.MemberID || len(r.Members) != 2 {
		t.Fatalf("%s gen %d skip %v leader %q member %q members %d", codeName(r.ErrorCode), r.Generation, r.SkipAssignment, r.LeaderID, r.MemberID, len(r.Members))
	}
	if r.MemberID == a {
		t.Fatal("the member id was not replaced")
	}
}

func TestStaticMemberRejoiningWithAnotherSelectedProtocolRebalances(t *testing.T) {
	e := newEnv(t, noDelay)
	r := await(t, e.join(e.c, staticJoin(5, "g", "", "a", "range", "roundrobin")))
	await(t, e.sync(e.c, "g", r.MemberID, r.Generation, nil))
	again := await(t, e.join(e.c, staticJoin(5, "g", "", "a", "roundrobin", "range")))
	if again.ErrorCode != 0 || again.Generation != r.Generation+1 || *again.Protocol != "roundrobin" {
		t.Fatalf("%s gen %d protocol %s, want a new generation with roundrobin", codeName(again.ErrorCode), again.Generation, *again.Protocol)
	}
}

func TestFencedInstanceIDForTheReplacedMemberID(t *testing.T) {
	e := newEnv(t)
	a, _, gen := e.staticPair(5)
	r := await(t, e.join(e.c, staticJoin(5, "g", "", "a")))
	inst := strp("a")
	if code := e.heartbeat(e.c, "g", a, gen, inst); code != kerr.FencedInstanceID.Code {
		t.Fatalf("heartbeat: %s", codeName(code))
	}
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Version, sr.Group, sr.MemberID, sr.Generation, sr.InstanceID = 3, "g", a, gen, inst
	if resp, _ := e.c.SyncGroup(ctxT(t), sr); resp.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("sync: %s", codeName(resp.ErrorCode))
	}
	cr := kmsg.NewPtrOffsetCommitRequest()
	cr.Version, cr.Group, cr.MemberID, cr.Generation, cr.InstanceID = 7, "g", a, gen, inst
	cr.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if resp, _ := e.c.OffsetCommit(ctxT(t), cr); resp.Topics[0].Partitions[0].ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("commit: %s", codeName(resp.Topics[0].Partitions[0].ErrorCode))
	}
	if j := await(t, e.join(e.c, staticJoin(5, "g", a, "a"))); j.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("join with the old member id: %s", codeName(j.ErrorCode))
	}
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version, lr.Group = 4, "g"
	lr.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a, InstanceID: inst}}
	if resp, _ := e.c.LeaveGroup(ctxT(t), lr); resp.Members[0].ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("leave: %s", codeName(resp.Members[0].ErrorCode))
	}
	// The current member id is fine.
	if code := e.heartbeat(e.c, "g", r.MemberID, gen, inst); code != 0 {
		t.Fatalf("current member heartbeat: %s", codeName(code))
	}
}

func TestStaticMemberReplacedWhileWaitingInJoinIsFenced(t *testing.T) {
	e := newEnv(t)
	a, b, _ := e.staticPair(5)
	// The static leader rejoins (a rebalance) and waits for b.
	old := e.join(e.c, staticJoin(5, "g", a, "a"))
	pending(t, old)
	// Its instance comes back with no member id (a restart): the waiting join is fenced.
	fresh := e.join(e.c, staticJoin(5, "g", "", "a"))
	if r := await(t, old); r.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("replaced waiting join: %s, want FENCED_INSTANCE_ID", codeName(r.ErrorCode))
	}
	await(t, e.join(e.c, joinReq(5, "g", b)))
	if r := await(t, fresh); r.ErrorCode != 0 {
		t.Fatalf("replacement: %s", codeName(r.ErrorCode))
	}
}

func TestStaticMemberThatDoesNotRejoinKeepsItsPlaceUntilItsSessionEnds(t *testing.T) {
	e := newEnv(t)
	a, b, gen := e.staticPair(5)
	// b rejoins with new metadata, starting a rebalance; the static member a is silent (its
	// process is restarting). The rebalance timeout (30 s) does not drop a static member, but
	// its session (10 s) does; the rebalance then completes without it.
	jr := joinReq(5, "g", b)
	jr.Protocols[0].Metadata = subscription("t", "u")
	j := e.join(e.c, jr)
	pending(t, j)
	e.step(9 * time.Second)
	pending(t, j)
	e.step(time.Second)
	r := await(t, j)
	if r.ErrorCode != 0 || r.Generation != gen+1 || r.LeaderID != b {
		t.Fatalf("%s gen %d leader %q, want generation %d led by %q", codeName(r.ErrorCode), r.Generation, r.LeaderID, gen+1, b)
	}
	d := e.describe(e.c, "g")
	if len(d.Members) != 1 || d.Members[0].MemberID != b {
		t.Fatalf("members %+v, want b only (a %q expired)", d.Members, a)
	}
}

func TestStaticMemberThatDoesNotRejoinStaysInTheNextGeneration(t *testing.T) {
	e := newEnv(t, noDelay)
	// Static a (session 60 s, longer than the 30 s rebalance timeout) and dynamic b.
	ar := staticJoin(5, "g", "", "a")
	ar.SessionTimeoutMillis = 60000
	ra := await(t, e.join(e.c, ar))
	await(t, e.sync(e.c, "g", ra.MemberID, ra.Generation, nil))
	bid, bch := e.joinDynamic(e.c, "g")
	pending(t, bch)
	// a does not rejoin; at the rebalance timeout the dynamic b would be dropped in its place,
	// but a static member keeps its place: the generation has both, led by b (a did not join).
	e.step(30 * time.Second)
	rb := await(t, bch)
	if rb.ErrorCode != 0 || rb.Generation != ra.Generation+1 || rb.LeaderID != bid || len(rb.Members) != 2 {
		t.Fatalf("%s gen %d leader %q members %d, want generation %d of a and b led by b", codeName(rb.ErrorCode), rb.Generation, rb.LeaderID, len(rb.Members), ra.Generation+1)
	}
}
