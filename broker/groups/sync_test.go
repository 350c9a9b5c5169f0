package groups

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinTwo brings two dynamic members through one JoinGroup (initial delay) and returns the
// leader, the follower and the generation, with the group in CompletingRebalance.
func (e *env) joinTwo(group string) (leader, follower string, gen int32) {
	e.t.Helper()
	a, ach := e.joinDynamic(e.c, group)
	b, bch := e.joinDynamic(e.c, group)
	rs := e.collect([]<-chan *kmsg.JoinGroupResponse{ach, bch})
	leader, gen = rs[0].LeaderID, rs[0].Generation
	follower = a
	if leader == a {
		follower = b
	}
	return leader, follower, gen
}

func TestSyncFollowerWaitsForTheLeadersAssignment(t *testing.T) {
	e := newEnv(t)
	leader, follower, gen := e.joinTwo("g")
	f := e.sync(e.c, "g", follower, gen, nil)
	pending(t, f)
	if got := e.describe(e.c, "g").State; got != "CompletingRebalance" {
		t.Fatalf("state %s while the leader has not synced", got)
	}
	l := e.sync(e.c, "g", leader, gen, map[string][]byte{leader: []byte("L"), follower: []byte("F")})
	rl, rf := await(t, l), await(t, f)
	if rl.ErrorCode != 0 || string(rl.MemberAssignment) != "L" || rf.ErrorCode != 0 || string(rf.MemberAssignment) != "F" {
		t.Fatalf("leader %s %q, follower %s %q", codeName(rl.ErrorCode), rl.MemberAssignment, codeName(rf.ErrorCode), rf.MemberAssignment)
	}
	if rf.ProtocolType == nil || *rf.ProtocolType != "consumer" || rf.Protocol == nil || *rf.Protocol != "range" {
		t.Fatalf("v5 answer without protocol type/name: %v %v", rf.ProtocolType, rf.Protocol)
	}
	if got := e.describe(e.c, "g").State; got != "Stable" {
		t.Fatalf("state %s after the leader's sync", got)
	}
	// In Stable, a late or repeated sync gets the member's assignment at once.
	if r := await(t, e.sync(e.c, "g", follower, gen, nil)); string(r.MemberAssignment) != "F" {
		t.Fatalf("stable sync: %q", r.MemberAssignment)
	}
}

func TestSyncMembersTheLeaderLeftOutGetAnEmptyAssignment(t *testing.T) {
	e := newEnv(t)
	leader, follower, gen := e.joinTwo("g")
	f := e.sync(e.c, "g", follower, gen, nil)
	await(t, e.sync(e.c, "g", leader, gen, map[string][]byte{leader: []byte("L"), "stranger": []byte("x")}))
	if r := await(t, f); r.ErrorCode != 0 || len(r.MemberAssignment) != 0 {
		t.Fatalf("%s %q, want NONE and an empty assignment", codeName(r.ErrorCode), r.MemberAssignment)
	}
}

func TestSyncRules(t *testing.T) {
	e := newEnv(t)
	ids, gen := e.stableGroup(e.c, "g", 1)
	cases := []struct {
		name string
		req  func(r *kmsg.SyncGroupRequest)
		want int16
	}{
		{"another generation is illegal", func(r *kmsg.SyncGroupRequest) { r.Generation = gen + 1 }, kerr.IllegalGeneration.Code},
		{"an unknown member", func(r *kmsg.SyncGroupRequest) { r.MemberID = "who" }, kerr.UnknownMemberID.Code},
		{"an unknown group", func(r *kmsg.SyncGroupRequest) { r.Group = "nope" }, kerr.UnknownMemberID.Code},
		{"v5 another protocol name is inconsistent", func(r *kmsg.SyncGroupRequest) { r.Protocol = strp("roundrobin") }, kerr.InconsistentGroupProtocol.Code},
		{"v5 without a protocol type is inconsistent", func(r *kmsg.SyncGroupRequest) { r.ProtocolType = nil }, kerr.InconsistentGroupProtocol.Code},
		{"v4 needs no protocol name", func(r *kmsg.SyncGroupRequest) { r.Version = 4; r.ProtocolType, r.Protocol = nil, nil }, 0},
		{"an empty group id is invalid", func(r *kmsg.SyncGroupRequest) { r.Group = "" }, kerr.InvalidGroupID.Code},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := kmsg.NewPtrSyncGroupRequest()
			r.Version, r.Group, r.MemberID, r.Generation = 5, "g", ids[0], gen
			r.ProtocolType, r.Protocol = strp("consumer"), strp("range")
			tc.req(r)
			resp, err := e.c.SyncGroup(ctxT(t), r)
			if err != nil {
				t.Fatal(err)
			}
			if resp.ErrorCode != tc.want {
				t.Fatalf("%s, want %s", codeName(resp.ErrorCode), codeName(tc.want))
			}
		})
	}
}

func TestSyncDuringPreparingRebalanceIsRebalanceInProgress(t *testing.T) {
	e := newEnv(t)
	ids, gen := e.stableGroup(e.c, "g", 2)
	l := e.join(e.c, joinReq(5, "g", ids[0])) // the leader's rejoin starts a rebalance
	pending(t, l)
	if r := await(t, e.sync(e.c, "g", ids[1], gen, nil)); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("%s, want REBALANCE_IN_PROGRESS", codeName(r.ErrorCode))
	}
}

func TestMembersThatDoNotSyncWithinTheRebalanceTimeoutAreRemoved(t *testing.T) {
	e := newEnv(t)
	leader, follower, gen := e.joinTwo("g")
	await(t, e.sync(e.c, "g", leader, gen, map[string][]byte{leader: []byte("L")}))
	// The follower never syncs; it keeps heartbeating, which does not save it.
	for range 29 {
		e.step(time.Second)
		e.heartbeat(e.c, "g", follower, gen, nil)
		e.heartbeat(e.c, "g", leader, gen, nil)
	}
	e.step(time.Second)
	if code := e.heartbeat(e.c, "g", follower, gen, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("follower after the sync deadline: %s, want UNKNOWN_MEMBER_ID", codeName(code))
	}
	if code := e.heartbeat(e.c, "g", leader, gen, nil); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("leader after the sync deadline: %s, want REBALANCE_IN_PROGRESS", codeName(code))
	}
}

func TestRejoinDuringCompletingRebalanceCancelsWaitingSyncs(t *testing.T) {
	e := newEnv(t)
	leader, follower, gen := e.joinTwo("g")
	f := e.sync(e.c, "g", follower, gen, nil)
	pending(t, f)
	// The follower rejoins with other metadata: the generation is abandoned.
	r := joinReq(5, "g", follower)
	r.Protocols[0].Metadata = subscription("t", "u")
	j := e.join(e.c, r)
	if got := await(t, f); got.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("waiting sync: %s, want REBALANCE_IN_PROGRESS", codeName(got.ErrorCode))
	}
	await(t, e.join(e.c, joinReq(5, "g", leader)))
	if got := await(t, j); got.ErrorCode != 0 || got.Generation != gen+1 {
		t.Fatalf("rejoin: %s gen %d", codeName(got.ErrorCode), got.Generation)
	}
}

func TestHeartbeatRules(t *testing.T) {
	e := newEnv(t)
	ids, gen := e.stableGroup(e.c, "g", 2)
	if code := e.heartbeat(e.c, "g", ids[1], gen, nil); code != 0 {
		t.Fatalf("stable member: %s", codeName(code))
	}
	if code := e.heartbeat(e.c, "g", "who", gen, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %s", codeName(code))
	}
	if code := e.heartbeat(e.c, "g", ids[1], gen-1, nil); code != kerr.IllegalGeneration.Code {
		t.Fatalf("old generation: %s", codeName(code))
	}
	if code := e.heartbeat(e.c, "nope", ids[1], gen, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown group: %s", codeName(code))
	}
	if code := e.heartbeat(e.c, "", ids[1], gen, nil); code != kerr.InvalidGroupID.Code {
		t.Fatalf("empty group id: %s", codeName(code))
	}
	pending(t, e.join(e.c, joinReq(5, "g", ids[0])))
	if code := e.heartbeat(e.c, "g", ids[1], gen, nil); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("during a rebalance: %s", codeName(code))
	}
}

func TestSessionTimeoutRemovesASilentMemberAndRebalances(t *testing.T) {
	e := newEnv(t)
	ids, gen := e.stableGroup(e.c, "g", 2)
	// The leader heartbeats every 3 s; the follower is silent. Its 10 s session ends.
	for range 3 {
		e.step(3 * time.Second)
		if code := e.heartbeat(e.c, "g", ids[0], gen, nil); code != 0 {
			t.Fatalf("leader heartbeat: %s", codeName(code))
		}
	}
	e.step(time.Second)
	if code := e.heartbeat(e.c, "g", ids[0], gen, nil); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("leader after the follower expired: %s, want REBALANCE_IN_PROGRESS", codeName(code))
	}
	r := await(t, e.join(e.c, joinReq(5, "g", ids[0])))
	if r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("rejoin: %s gen %d members %d", codeName(r.ErrorCode), r.Generation, len(r.Members))
	}
	if code := e.heartbeat(e.c, "g", ids[1], gen, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("expired follower: %s", codeName(code))
	}
}

func TestAWaitingJoinKeepsItsMemberAlivePastItsSession(t *testing.T) {
	e := newEnv(t)
	ids, gen := e.stableGroup(e.c, "g", 2)
	// The follower rejoins with new metadata and waits; the leader takes 20 s (its session is
	// kept by heartbeats) to rejoin — longer than the follower's 10 s session.
	r := joinReq(5, "g", ids[1])
	r.Protocols[0].Metadata = subscription("t", "u")
	f := e.join(e.c, r)
	pending(t, f)
	for range 4 {
		e.step(5 * time.Second)
		if code := e.heartbeat(e.c, "g", ids[0], gen, nil); code != kerr.RebalanceInProgress.Code {
			t.Fatalf("leader heartbeat: %s", codeName(code))
		}
	}
	l := await(t, e.join(e.c, joinReq(5, "g", ids[0])))
	rf := await(t, f)
	if l.ErrorCode != 0 || rf.ErrorCode != 0 || l.Generation != gen+1 || len(l.Members) != 2 {
		t.Fatalf("leader %s gen %d members %d, follower %s", codeName(l.ErrorCode), l.Generation, len(l.Members), codeName(rf.ErrorCode))
	}
}

func TestLeaveGroupV0RemovesTheMemberAndRebalances(t *testing.T) {
	e := newEnv(t)
	ids, gen := e.stableGroup(e.c, "g", 2)
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version, r.Group, r.MemberID = 0, "g", ids[1]
	resp, err := e.c.LeaveGroup(ctxT(t), r)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("leave: %v %s", err, codeName(resp.ErrorCode))
	}
	if code := e.heartbeat(e.c, "g", ids[0], gen, nil); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("remaining member: %s, want REBALANCE_IN_PROGRESS", codeName(code))
	}
	r.MemberID = "who"
	if resp, _ := e.c.LeaveGroup(ctxT(t), r); resp.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("v0 unknown member: %s", codeName(resp.ErrorCode))
	}
}

func TestLeaveGroupV3IsBatchedWithPerMemberErrors(t *testing.T) {
	e := newEnv(t)
	ids, _ := e.stableGroup(e.c, "g", 2)
	inst := "static-1"
	sj := joinReq(5, "g", "")
	sj.InstanceID = &inst
	s := e.join(e.c, sj)
	e.waitState("g", "PreparingRebalance")
	for _, ch := range []<-chan *kmsg.JoinGroupResponse{s, e.join(e.c, joinReq(5, "g", ids[0])), e.join(e.c, joinReq(5, "g", ids[1]))} {
		if got := await(t, ch); got.ErrorCode != 0 {
			t.Fatalf("join: %s", codeName(got.ErrorCode))
		}
	}
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version, r.Group = 5, "g"
	r.Members = []kmsg.LeaveGroupRequestMember{
		{MemberID: ids[1]},
		{MemberID: "who"},
		{MemberID: "", InstanceID: &inst}, // administrative removal by instance id
		{MemberID: "", InstanceID: strp("nobody")},
	}
	resp, err := e.c.LeaveGroup(ctxT(t), r)
	if err != nil || resp.ErrorCode != 0 || len(resp.Members) != 4 {
		t.Fatalf("leave: %v %+v", err, resp)
	}
	want := []int16{0, kerr.UnknownMemberID.Code, 0, kerr.UnknownMemberID.Code}
	for i, m := range resp.Members {
		if m.ErrorCode != want[i] || m.MemberID != r.Members[i].MemberID {
			t.Fatalf("member %d: %s %q, want %s", i, codeName(m.ErrorCode), m.MemberID, codeName(want[i]))
		}
	}
	d := e.describe(e.c, "g")
	if len(d.Members) != 1 || d.Members[0].MemberID != ids[0] {
		t.Fatalf("left in the group: %+v", d.Members)
	}
}

func TestLeaveOfAPendingMemberLetsTheRebalanceComplete(t *testing.T) {
	e := newEnv(t)
	ids, gen := e.stableGroup(e.c, "g", 1)
	first := await(t, e.join(e.c, joinReq(5, "g", "")))
	l := e.join(e.c, joinReq(5, "g", ids[0]))
	pending(t, l)
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version, r.Group = 3, "g"
	r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: first.MemberID}}
	if resp, _ := e.c.LeaveGroup(ctxT(t), r); resp.Members[0].ErrorCode != 0 {
		t.Fatalf("pending leave: %s", codeName(resp.Members[0].ErrorCode))
	}
	if got := await(t, l); got.ErrorCode != 0 || got.Generation != gen+1 {
		t.Fatalf("leader: %s gen %d", codeName(got.ErrorCode), got.Generation)
	}
}

func TestLongJoinDoesNotBlockOtherGroupsAndEndsWithItsContext(t *testing.T) {
	e := newEnv(t)
	ids, _ := e.stableGroup(e.c, "slow", 2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.c.JoinGroup(ctx, Client{ID: "c"}, joinReq(5, "slow", ids[0]))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	// Another group is served meanwhile.
	if _, gen := e.stableGroup(e.c, "fast", 1); gen != 1 {
		t.Fatalf("fast group generation %d", gen)
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a join whose context ended returned no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting join did not return when its context ended")
	}
}
