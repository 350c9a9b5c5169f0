package groups

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var tID = [16]byte{1} // topic "t": 4 partitions (helpers_test.go)

func TestAFirstMemberJoinsAtEpochOneWithEveryPartition(t *testing.T) {
	e := newEnv(t)
	a := e.member(e.c, "g", "a", "t")
	a.mustBeat()
	if a.epoch != 1 || a.count() != 4 {
		t.Fatalf("epoch %d, %d partitions; want epoch 1 and all 4", a.epoch, a.count())
	}
	d := e.cgDescribe(e.c, "g")
	if d.ErrorCode != 0 || d.State != "Stable" || d.Epoch != 1 || d.AssignmentEpoch != 1 || d.AssignorName != "uniform" {
		t.Fatalf("describe: %+v", d)
	}
	if m := d.Members[0]; m.MemberID != "a" || m.MemberEpoch != 1 || m.MemberType != 1 || len(m.Assignment.TopicPartitions) != 1 ||
		m.Assignment.TopicPartitions[0].Topic != "t" || len(m.Assignment.TopicPartitions[0].Partitions) != 4 || m.ClientID != "client-a" {
		t.Fatalf("member: %+v", m)
	}
}

// The heart of the protocol: a partition moves to a new member only after its old owner has
// said, in a heartbeat, that it no longer owns it.
func TestAPartitionMovesOnlyAfterItsOwnerRevokedIt(t *testing.T) {
	e := newEnv(t)
	a, b := e.member(e.c, "g", "a", "t"), e.member(e.c, "g", "b", "t")
	ms := []*cm{a, b}
	a.mustBeat()
	b.mustBeat()
	if b.epoch != 2 || b.count() != 0 {
		t.Fatalf("b: epoch %d with %d partitions; want epoch 2 and nothing while a owns them", b.epoch, b.count())
	}
	if d := e.cgDescribe(e.c, "g"); d.State != "Reconciling" || d.Epoch != 2 {
		t.Fatalf("describe: %s epoch %d", d.State, d.Epoch)
	}
	// a is told to keep two: it stays at epoch 1 until it confirms.
	a.mustBeat()
	if a.epoch != 1 || a.count() != 2 {
		t.Fatalf("a: epoch %d with %d partitions; want epoch 1 and two kept", a.epoch, a.count())
	}
	// A keepalive that does not say what a owns changes nothing for b.
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = 1, "g", "a", 1, -1
	if resp := a.send(r); resp.ErrorCode != 0 || resp.Assignment != nil {
		t.Fatalf("keepalive: %+v", resp)
	}
	b.mustBeat()
	if b.count() != 0 {
		t.Fatalf("b got %d partitions before a confirmed the revocation", b.count())
	}
	noTwoOwners(t, ms)
	a.mustBeat() // owns the two it kept: revocation confirmed
	if a.epoch != 2 {
		t.Fatalf("a: epoch %d after revoking, want 2", a.epoch)
	}
	b.mustBeat()
	noTwoOwners(t, ms)
	balanced(t, ms, 4)
	if d := e.cgDescribe(e.c, "g"); d.State != "Stable" {
		t.Fatalf("describe: %s", d.State)
	}
}

func TestMemberEpochRules(t *testing.T) {
	e := newEnv(t)
	a, b := e.member(e.c, "g", "a", "t"), e.member(e.c, "g", "b", "t")
	a.mustBeat()
	b.mustBeat()
	a.mustBeat()
	a.mustBeat() // a at epoch 2, previous 1, owns 2
	if a.epoch != 2 {
		t.Fatalf("a at epoch %d", a.epoch)
	}
	send := func(epoch int32, owned pset, id string) int16 {
		r := a.request()
		r.MemberID, r.MemberEpoch = id, epoch
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, tp := range byTopicID(owned) {
			r.Topics = append(r.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp.id, Partitions: tp.partitions})
		}
		resp, _ := e.c.ConsumerGroupHeartbeat(ctxT(t), Client{}, r)
		return resp.ErrorCode
	}
	cases := []struct {
		name  string
		epoch int32
		owned pset
		id    string
		want  *kerr.Error
	}{
		{"a newer epoch than the member's is fenced", 3, a.held, "a", kerr.FencedMemberEpoch},
		{"the previous epoch owning a subset is accepted (a lost answer)", 1, a.held, "a", nil},
		{"the previous epoch owning more is fenced", 1, pset{{tID, 0}: {}, {tID, 1}: {}, {tID, 2}: {}, {tID, 3}: {}}, "a", kerr.FencedMemberEpoch},
		{"an unknown member is UNKNOWN_MEMBER_ID", 2, pset{}, "zz", kerr.UnknownMemberID},
	}
	for _, c := range cases {
		if got := send(c.epoch, c.owned, c.id); (c.want == nil) != (got == 0) || c.want != nil && got != c.want.Code {
			t.Errorf("%s: %s", c.name, codeName(got))
		}
	}
	other := e.member(e.c, "nope", "x", "t")
	other.epoch = 3
	if code := other.beat(); code != kerr.GroupIDNotFound.Code {
		t.Errorf("a heartbeat past epoch 0 to a group that does not exist: %s", codeName(code))
	}
}

func TestALeavingMembersPartitionsGoToTheOthers(t *testing.T) {
	e := newEnv(t)
	ms := []*cm{e.member(e.c, "g", "a", "big"), e.member(e.c, "g", "b", "big"), e.member(e.c, "g", "c", "big")}
	converge(t, ms, 10)
	balanced(t, ms, 64)
	before := e.cgDescribe(e.c, "g").Epoch
	if code := ms[1].leave(-1); code != 0 {
		t.Fatalf("leave: %s", codeName(code))
	}
	if d := e.cgDescribe(e.c, "g"); d.Epoch != before+1 || len(d.Members) != 2 {
		t.Fatalf("after the leave: epoch %d (was %d), %d members", d.Epoch, before, len(d.Members))
	}
	converge(t, ms, 10)
	balanced(t, ms, 64)
}

func TestASilentMemberIsRemovedAfterTheSessionTimeout(t *testing.T) {
	e := newEnv(t)
	a, b := e.member(e.c, "g", "a", "t"), e.member(e.c, "g", "b", "t")
	ms := []*cm{a, b}
	converge(t, ms, 10)
	e.step(30 * time.Second)
	a.mustBeat()
	e.step(20 * time.Second) // b: 50 s silent, past 45 s
	b.gone = true
	converge(t, ms, 10)
	if a.count() != 4 {
		t.Fatalf("a holds %d partitions after b expired, want 4", a.count())
	}
	b.gone = false
	b.epoch = 3
	if code := b.beat(); code != kerr.UnknownMemberID.Code {
		t.Fatalf("the expired member's heartbeat: %s", codeName(code))
	}
}

func TestAMemberThatDoesNotRevokeWithinItsRebalanceTimeoutIsRemoved(t *testing.T) {
	e := newEnv(t)
	a, b := e.member(e.c, "g", "a", "t"), e.member(e.c, "g", "b", "t")
	a.mustBeat()
	b.mustBeat()
	// a learns it must give up two partitions but never confirms (it keeps heartbeating with
	// all four).
	r := a.request()
	resp := a.send(r)
	if resp.ErrorCode != 0 || len(resp.Assignment.Topics[0].Partitions) != 2 {
		t.Fatalf("revocation answer: %+v", resp)
	}
	for range 2 {
		e.step(10 * time.Second)
		if resp := a.send(r); resp.ErrorCode != 0 {
			t.Fatalf("heartbeat while revoking: %s", codeName(resp.ErrorCode))
		}
		b.mustBeat()
		if b.count() != 0 {
			t.Fatalf("b got partitions a has not released")
		}
	}
	e.step(15 * time.Second) // 35 s: past a's 30 s rebalance timeout
	if resp := a.send(r); resp.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("a after its rebalance timeout: %s", codeName(resp.ErrorCode))
	}
	b.mustBeat()
	if b.count() != 4 {
		t.Fatalf("b holds %d after a was removed, want 4", b.count())
	}
}

func TestAStaticMemberComesBackUnderANewIdWithItsPartitionsAndNoRebalance(t *testing.T) {
	e := newEnv(t)
	a, b := e.member(e.c, "g", "a", "big"), e.member(e.c, "g", "b", "big")
	a.instance = strp("instance-a")
	ms := []*cm{a, b}
	converge(t, ms, 10)
	held, epoch := a.held, e.cgDescribe(e.c, "g").Epoch

	a2 := e.member(e.c, "g", "a2", "big")
	a2.instance = strp("instance-a")
	if code := a2.beat(); code != kerr.UnreleasedInstanceID.Code {
		t.Fatalf("a new member with the instance id of one still in the group: %s", codeName(code))
	}
	if code := a.leave(-2); code != 0 {
		t.Fatalf("static leave: %s", codeName(code))
	}
	b.mustBeat()
	if b.count() != 32 {
		t.Fatalf("b took %d partitions while a's instance was away, want its own 32", b.count())
	}
	a2.mustBeat()
	if !a2.held.equal(held) || e.cgDescribe(e.c, "g").Epoch != epoch {
		t.Fatalf("a2 holds %d partitions (a held %d), group epoch %d (was %d)", a2.count(), len(held), e.cgDescribe(e.c, "g").Epoch, epoch)
	}
	old := e.member(e.c, "g", "a", "big")
	old.instance, old.epoch = strp("instance-a"), a2.epoch
	if code := old.beat(); code != kerr.UnknownMemberID.Code && code != kerr.FencedInstanceID.Code {
		t.Fatalf("the replaced member id: %s", codeName(code))
	}
	e.step(30 * time.Second)
	b.mustBeat()
	e.step(16 * time.Second) // a2 does not beat again: its session ends
	b.mustBeat()
	b.mustBeat()
	if b.count() != 64 {
		t.Fatalf("b holds %d after the static member's session ended", b.count())
	}
}

func TestARegularExpressionSubscribesToTheMatchingTopics(t *testing.T) {
	e := newEnv(t)
	a := e.member(e.c, "g", "a")
	a.regex = strp("t|u.*")
	a.mustBeat()
	if a.count() != 6 {
		t.Fatalf("holds %d partitions of t and u, want 6", a.count())
	}
	e.topics.set("u2", [16]byte{9}, 3)
	a.mustBeat()
	if a.count() != 6 {
		t.Fatalf("picked up a new topic before the regex refresh: %d", a.count())
	}
	e.step(11 * time.Second)
	a.mustBeat()
	if a.count() != 9 {
		t.Fatalf("after the refresh: %d partitions, want 9 (u2 matches)", a.count())
	}
	if d := e.cgDescribe(e.c, "g"); *d.Members[0].SubscribedTopicRegex != "t|u.*" {
		t.Fatalf("describe regex: %v", d.Members[0].SubscribedTopicRegex)
	}
}

func TestATopicThatGrowsBumpsTheGroupEpoch(t *testing.T) {
	e := newEnv(t)
	a := e.member(e.c, "g", "a", "t")
	a.mustBeat()
	e.topics.set("t", tID, 6)
	a.mustBeat()
	if a.count() != 6 || a.epoch != 2 {
		t.Fatalf("after t grew to 6: %d partitions at epoch %d", a.count(), a.epoch)
	}
}

func TestInvalidHeartbeatsAreRefusedAsApacheRefusesThem(t *testing.T) {
	e := newEnv(t)
	base := func() *kmsg.ConsumerGroupHeartbeatRequest { return e.member(e.c, "g", "a", "t").request() }
	cases := []struct {
		name string
		edit func(r *kmsg.ConsumerGroupHeartbeatRequest)
		want *kerr.Error
	}{
		{"empty group id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "" }, kerr.InvalidRequest},
		{"empty member id at v1", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest},
		{"empty instance id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = strp("") }, kerr.InvalidRequest},
		{"a join without rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, kerr.InvalidRequest},
		{"a join owning partitions", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: tID, Partitions: []int32{0}}}
		}, kerr.InvalidRequest},
		{"a join without owned partitions", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = nil }, kerr.InvalidRequest},
		{"a join without subscription", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }, kerr.InvalidRequest},
		{"a static leave without instance id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -2 }, kerr.InvalidRequest},
		{"epoch -3", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest},
		{"an unknown assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = strp("sticky") }, kerr.UnsupportedAssignor},
		{"a bad regular expression", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = strp("(") }, kerr.InvalidRegularExpression},
	}
	for _, c := range cases {
		r := base()
		c.edit(r)
		resp, err := e.c.ConsumerGroupHeartbeat(ctxT(t), Client{}, r)
		if err != nil || resp.ErrorCode != c.want.Code || resp.ErrorMessage == nil {
			t.Errorf("%s: %s %v (%v)", c.name, codeName(resp.ErrorCode), resp.ErrorMessage, err)
		}
	}
	if d := e.cgDescribe(e.c, "g"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("a refused heartbeat created the group: %+v", d)
	}
	// v0: the coordinator names a member that joins without an id.
	r := base()
	r.Version, r.MemberID = 0, ""
	resp, _ := e.c.ConsumerGroupHeartbeat(ctxT(t), Client{}, r)
	if resp.ErrorCode != 0 || resp.MemberID == nil || *resp.MemberID == "" {
		t.Fatalf("v0 join without member id: %+v", resp)
	}
}

func TestTheProtocolTurnedOffAnswersUnsupportedVersion(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ConsumerProtocol = false })
	a := e.member(e.c, "g", "a", "t")
	if code := a.beat(); code != kerr.UnsupportedVersion.Code {
		t.Fatalf("heartbeat: %s", codeName(code))
	}
	if d := e.cgDescribe(e.c, "g"); d.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("describe: %s", codeName(d.ErrorCode))
	}
}

func TestTheRangeAssignorIsUsedWhenMembersAskForIt(t *testing.T) {
	e := newEnv(t)
	a, b := e.member(e.c, "g", "a", "t", "u"), e.member(e.c, "g", "b", "t", "u")
	a.assignor, b.assignor = strp("range"), strp("range")
	ms := []*cm{a, b}
	converge(t, ms, 10)
	if d := e.cgDescribe(e.c, "g"); d.AssignorName != "range" {
		t.Fatalf("assignor %s", d.AssignorName)
	}
	want := pset{{tID, 0}: {}, {tID, 1}: {}, {[16]byte{2}, 0}: {}}
	if !a.held.equal(want) {
		t.Fatalf("a holds %v, want t 0-1 and u 0 (ranges of co-partitioned topics)", a.held.sorted())
	}
}

// A group is classic or consumer: an empty one converts both ways; a non-empty one of the
// other protocol gets Apache's error.
func TestClassicAndConsumerGroupsConvertOnlyWhileEmpty(t *testing.T) {
	e := newEnv(t)
	ids, gen := e.stableGroup(e.c, "classic", 1)
	if code := e.member(e.c, "classic", "x", "t").beat(); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("a consumer-protocol join of a classic group with members: %s", codeName(code))
	}
	e.commit(e.c, "classic", ids[0], gen, map[int32]int64{0: 7})
	l := kmsg.NewPtrLeaveGroupRequest()
	l.Version, l.Group, l.Members = 3, "classic", []kmsg.LeaveGroupRequestMember{{MemberID: ids[0]}}
	if _, err := e.c.LeaveGroup(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	x := e.member(e.c, "classic", "x", "t")
	x.mustBeat()
	if x.count() != 4 {
		t.Fatalf("the converted group assigned %d partitions", x.count())
	}
	if got, code := e.fetch(e.c, "classic", 0); code != 0 || got[0] != 7 {
		t.Fatalf("the classic group's offsets after the conversion: %v %s", got, codeName(code))
	}
	if resp := await(t, e.join(e.c, joinReq(5, "classic", ""))); resp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("a classic join of a consumer group with members: %s", codeName(resp.ErrorCode))
	}
	if d := e.describe(e.c, "classic"); d.State != "Dead" {
		t.Fatalf("DescribeGroups of a consumer group: %s", d.State)
	}
	x.leave(-1)
	if _, ch := e.joinDynamic(e.c, "classic"); ch == nil {
		t.Fatal("no join")
	}
	if d := e.cgDescribe(e.c, "classic"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupDescribe after a classic join converted it back: %+v", d)
	}
}

// The group type is durable: the next coordinator loads an idle consumer group as one, so its
// members' heartbeats get UNKNOWN_MEMBER_ID (rejoin) rather than GROUP_ID_NOT_FOUND.
func TestAConsumerGroupIsStillOneAtTheNextCoordinator(t *testing.T) {
	e := newEnv(t)
	a := e.member(e.c, "g", "a", "t")
	a.mustBeat()
	r := commitReq("g", "a", a.epoch, map[string]map[int32]int64{"t": {0: 5}})
	r.Version = 9
	if codes := firstTopicCodes(e.commitResp(e.c, r)); codes[0] != 0 {
		t.Fatalf("commit: %s", codeName(codes[0]))
	}
	_ = e.c.Close()
	c2 := e.start(2)
	a.c = c2
	if code := a.beat(); code != kerr.UnknownMemberID.Code {
		t.Fatalf("a member's heartbeat at the next coordinator: %s", codeName(code))
	}
	if d := e.cgDescribe(c2, "g"); d.ErrorCode != 0 || d.State != "Empty" {
		t.Fatalf("describe at the next coordinator: %+v", d)
	}
	a.epoch = 0
	a.mustBeat()
	if got, code := e.fetch(c2, "g", 0); code != 0 || got[0] != 5 || a.count() != 4 {
		t.Fatalf("rejoined with %d partitions; offsets %v %s", a.count(), got, codeName(code))
	}
}

func TestOffsetCommitsOfAConsumerGroupCarryTheMemberEpoch(t *testing.T) {
	e := newEnv(t)
	a := e.member(e.c, "g", "a", "t")
	a.mustBeat()
	commit := func(v int16, member string, epoch int32) int16 {
		r := commitReq("g", member, epoch, map[string]map[int32]int64{"t": {0: 9}})
		r.Version = v
		return firstTopicCodes(e.commitResp(e.c, r))[0]
	}
	cases := []struct {
		name   string
		v      int16
		member string
		epoch  int32
		want   int16
	}{
		{"the member at its epoch", 9, "a", 1, 0},
		{"another epoch is STALE_MEMBER_EPOCH", 9, "a", 2, kerr.StaleMemberEpoch.Code},
		{"an unknown member", 9, "zz", 1, kerr.UnknownMemberID.Code},
		{"no epoch while the group has members", 9, "", -1, kerr.UnknownMemberID.Code},
		{"a member committing below v9", 8, "a", 1, kerr.UnsupportedVersion.Code},
	}
	for _, c := range cases {
		if got := commit(c.v, c.member, c.epoch); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, codeName(got), codeName(c.want))
		}
	}
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version = 9
	f.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", MemberID: strp("a"), MemberEpoch: 7}}
	if resp, _ := e.c.OffsetFetch(ctxT(t), f); resp.Groups[0].ErrorCode != kerr.StaleMemberEpoch.Code {
		t.Errorf("OffsetFetch v9 at a stale epoch: %s", codeName(resp.Groups[0].ErrorCode))
	}
	f.Groups[0].MemberEpoch = 1
	if resp, _ := e.c.OffsetFetch(ctxT(t), f); resp.Groups[0].ErrorCode != 0 || resp.Groups[0].Topics[0].Partitions[0].Offset != 9 {
		t.Errorf("OffsetFetch v9 at the member's epoch: %+v", resp.Groups[0])
	}
	a.leave(-1)
	if got := commit(9, "", -1); got != 0 {
		t.Errorf("an admin commit to the empty consumer group: %s", codeName(got))
	}
}

func TestListGroupsV5ShowsTheGroupType(t *testing.T) {
	e := newEnv(t)
	e.stableGroup(e.c, "classic", 1)
	e.member(e.c, "consumer", "a", "t").mustBeat()
	r := kmsg.NewPtrListGroupsRequest()
	r.Version = 5
	got := map[string]string{}
	for range 500 { // the overview ListGroups reads is published after the answer
		resp, _ := e.c.ListGroups(ctxT(t), r)
		clear(got)
		for _, g := range resp.Groups {
			got[g.Group] = g.GroupType + "/" + g.GroupState
		}
		if len(got) == 2 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if got["classic"] != "classic/Stable" || got["consumer"] != "consumer/Stable" {
		t.Fatalf("ListGroups v5: %v", got)
	}
	r.TypesFilter = []string{"Consumer"}
	if resp, _ := e.c.ListGroups(ctxT(t), r); len(resp.Groups) != 1 || resp.Groups[0].Group != "consumer" {
		t.Fatalf("types filter: %+v", resp.Groups)
	}
	if counts := e.c.GroupCounts(); len(counts) != 2 || counts[0] != (GroupCount{"classic", "Stable", 1}) || counts[1] != (GroupCount{"consumer", "Stable", 1}) {
		t.Fatalf("GroupCounts: %+v", counts)
	}
}

// dropRemoved marks the members the coordinator removed (a session or a rebalance timeout
// passed) as gone: such a member learns it at its next heartbeat (UNKNOWN_MEMBER_ID), and
// until then it is a zombie whose commits are refused — Kafka's rule too, so the walk does not
// count what it still holds.
func (e *env) dropRemoved(ms []*cm) {
	e.t.Helper()
	in := map[string]bool{}
	for _, m := range e.cgDescribe(e.c, "g").Members {
		in[m.MemberID] = true
	}
	for _, m := range ms {
		if !m.gone && !in[m.id] {
			m.gone, m.held = true, pset{}
		}
	}
}

// A random walk of joins, heartbeats, keepalives, lost answers, leaves, crashes, session
// expiries and a topic growing: after every step no partition is held by two live members,
// and once the walk stops and the members heartbeat, every partition is assigned, spread ±1.
func TestNoPartitionEverHasTwoOwnersOnRandomWalks(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 848))
			e := newEnv(t)
			e.topics.set("t", tID, 12)
			partitions := 12
			var ms []*cm
			live := func() []*cm {
				var out []*cm
				for _, m := range ms {
					if !m.gone {
						out = append(out, m)
					}
				}
				return out
			}
			for step := range 400 {
				l := live()
				switch r := rng.IntN(100); {
				case len(l) == 0 || r < 10:
					m := e.member(e.c, "g", fmt.Sprintf("m%d", step), "t")
					m.slow = rng.IntN(2) == 0
					ms = append(ms, m)
					m.mustBeat()
				case r < 70:
					m := l[rng.IntN(len(l))]
					beat := m.beat
					if len(m.revoked) > 0 && rng.IntN(2) == 0 {
						beat = m.keepalive // still committing what it gives up
					}
					if code := beat(); code == kerr.FencedMemberEpoch.Code {
						m.held, m.epoch = pset{}, 0 // abandon and rejoin, as a client does
					} else if code == kerr.UnknownMemberID.Code {
						m.gone = true
					} else if code != 0 {
						t.Fatalf("step %d: %s", step, codeName(code))
					}
				case r < 78:
					// The answer is lost: the member keeps what it had.
					m := l[rng.IntN(len(l))]
					if _, err := e.c.ConsumerGroupHeartbeat(ctxT(t), Client{}, m.request()); err != nil {
						t.Fatal(err)
					}
				case r < 85:
					l[rng.IntN(len(l))].leave(-1)
				case r < 90:
					l[rng.IntN(len(l))].gone = true // crashed: it consumes nothing more
				case r < 95:
					// Time passes: everyone alive beats in between, crashed members expire, and so
					// does a member whose revocation took longer than its rebalance timeout.
					for range 2 {
						e.step(25 * time.Second)
						e.dropRemoved(ms)
						for _, m := range live() {
							if code := m.beat(); code == kerr.FencedMemberEpoch.Code {
								m.held, m.epoch = pset{}, 0
							} else if code != 0 {
								t.Fatalf("step %d: %s", step, codeName(code))
							}
							noTwoOwners(t, ms)
						}
					}
				default:
					if partitions < 40 {
						partitions += 3
						e.topics.set("t", tID, int32(partitions))
					}
				}
				noTwoOwners(t, ms)
			}
			// Crashed members' sessions end; then everyone converges.
			e.step(25 * time.Second)
			e.dropRemoved(ms)
			for _, m := range live() {
				m.mustBeat()
			}
			e.step(25 * time.Second)
			e.dropRemoved(ms)
			for _, m := range live() {
				if code := m.beat(); code == kerr.FencedMemberEpoch.Code {
					m.held, m.epoch = pset{}, 0
				}
			}
			if len(live()) == 0 {
				return
			}
			converge(t, ms, 20)
			balanced(t, ms, partitions)
			if d := e.cgDescribe(e.c, "g"); d.State != "Stable" {
				t.Fatalf("after converging: %s", d.State)
			}
		})
	}
}

// uID is topic "u"'s id (helpers_test.go: 2 partitions).
var uID = [16]byte{2}

// Each member's regular expression resolves over the topics its own principal may DESCRIBE:
// a member that may not describe "u" is never given a partition of it, though another member
// of the group with the same expression may describe it (stricter than Apache 4.0, which
// resolves a group's expression with whichever member's principal triggered it). A change of
// what it may describe takes effect at the next regex refresh.
func TestAMemberIsNeverAssignedARegexTopicItMayNotDescribe(t *testing.T) {
	e := newEnv(t)
	mayU := false
	a, b := e.member(e.c, "g", "a"), e.member(e.c, "g", "b")
	a.regex, b.regex = strp("t|u"), strp("t|u")
	a.mayDescribe = func(topic string) bool { return topic != "u" || mayU }
	holdsU := func(m *cm) int {
		n := 0
		for p := range m.held {
			if p.id == uID {
				n++
			}
		}
		return n
	}
	a.mustBeat()
	b.mustBeat()
	for range 6 {
		a.mustBeat()
		b.mustBeat()
		if n := holdsU(a); n != 0 {
			t.Fatalf("a holds %d partitions of u, which it may not describe", n)
		}
	}
	if holdsU(b) != 2 || a.count()+b.count() != 6 {
		t.Fatalf("a holds %d, b %d (%d of u); want every partition assigned, u's both to b", a.count(), b.count(), holdsU(b))
	}
	// Without b, u has no member that may describe it: it stays unassigned.
	if code := b.leave(-1); code != 0 {
		t.Fatalf("b leaving: %s", codeName(code))
	}
	for range 4 {
		a.mustBeat()
	}
	if a.count() != 4 || holdsU(a) != 0 {
		t.Fatalf("alone, a holds %d (%d of u); want t's 4 and none of u", a.count(), holdsU(a))
	}
	mayU = true
	a.mustBeat()
	if n := holdsU(a); n != 0 {
		t.Fatalf("a holds %d partitions of u before the regex refresh", n)
	}
	e.step(11 * time.Second)
	for range 4 {
		a.mustBeat()
	}
	if a.count() != 6 || holdsU(a) != 2 {
		t.Fatalf("after the refresh a holds %d (%d of u); want all 6 once it may describe u", a.count(), holdsU(a))
	}
}
