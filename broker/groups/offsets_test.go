package groups

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestCommitGenerationFencing(t *testing.T) {
	e := newEnv(t)
	ids, gen := e.stableGroup(e.c, "g", 2)
	cases := []struct {
		name   string
		group  string
		member string
		gen    int32
		want   int16
	}{
		{"a member of the current generation commits", "g", ids[1], gen, 0},
		{"an unknown member", "g", "who", gen, kerr.UnknownMemberID.Code},
		{"an older generation is illegal", "g", ids[1], gen - 1, kerr.IllegalGeneration.Code},
		{"a newer generation is illegal", "g", ids[1], gen + 1, kerr.IllegalGeneration.Code},
		{"generation -1 without member id to a group with members", "g", "", -1, kerr.UnknownMemberID.Code},
		{"generation -1 with a member id is checked as a member", "g", "who", -1, kerr.UnknownMemberID.Code},
		{"a generation for a group that does not exist is illegal", "nope", "who", 3, kerr.IllegalGeneration.Code},
		{"generation -1 to a group that does not exist creates it", "simple", "", -1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := e.commit(e.c, tc.group, tc.member, tc.gen, map[int32]int64{0: 5})[0]; got != tc.want {
				t.Fatalf("%s, want %s", codeName(got), codeName(tc.want))
			}
		})
	}
	if d := e.describe(e.c, "simple"); d.State != "Empty" || d.ProtocolType != "" {
		t.Fatalf("simple-commit group: state %s type %q, want an Empty group with no protocol type", d.State, d.ProtocolType)
	}
	if got, _ := e.fetch(e.c, "simple"); got[0] != 5 {
		t.Fatalf("simple group offsets %v", got)
	}
}

func TestCommitDuringCompletingRebalanceIsRebalanceInProgress(t *testing.T) {
	e := newEnv(t)
	leader, follower, gen := e.joinTwo("g")
	if got := e.commit(e.c, "g", follower, gen, map[int32]int64{0: 1})[0]; got != kerr.RebalanceInProgress.Code {
		t.Fatalf("%s, want REBALANCE_IN_PROGRESS", codeName(got))
	}
	_ = leader
}

func TestCommitDuringPreparingRebalanceIsStoredAndCountsAsHeartbeat(t *testing.T) {
	e := newEnv(t)
	ids, gen := e.stableGroup(e.c, "g", 2)
	pending(t, e.join(e.c, joinReq(5, "g", ids[0])))
	if got := e.commit(e.c, "g", ids[1], gen, map[int32]int64{1: 7})[1]; got != 0 {
		t.Fatalf("%s, want NONE", codeName(got))
	}
	if got, _ := e.fetch(e.c, "g", 1); got[1] != 7 {
		t.Fatalf("offsets %v", got)
	}
}

func TestCommitPartitionChecks(t *testing.T) {
	e := newEnv(t)
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.Generation = 8, "g", -1
	long := strings.Repeat("x", 4097)
	r.Topics = []kmsg.OffsetCommitRequestTopic{
		{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
			{Partition: 0, Offset: 10},
			{Partition: 1, Offset: 11, Metadata: &long},
			{Partition: 4, Offset: 12}, // t has 4 partitions
			{Partition: -1, Offset: 13},
		}},
		{Topic: "nope", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}},
	}
	resp, err := e.c.OffsetCommit(ctxT(t), r)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int16{{0, kerr.OffsetMetadataTooLarge.Code, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code}, {kerr.UnknownTopicOrPartition.Code}}
	for ti, rt := range resp.Topics {
		for pi, p := range rt.Partitions {
			if p.ErrorCode != want[ti][pi] || p.Partition != r.Topics[ti].Partitions[pi].Partition {
				t.Errorf("%s[%d]: %s, want %s", rt.Topic, p.Partition, codeName(p.ErrorCode), codeName(want[ti][pi]))
			}
		}
	}
	if got, _ := e.fetch(e.c, "g"); len(got) != 1 || got[0] != 10 {
		t.Fatalf("stored %v, want only partition 0", got)
	}
	// 4096 is allowed; the limit counts UTF-16 units as Java's String.length.
	ok := strings.Repeat("é", 4096)
	r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 2, Offset: 1, Metadata: &ok}}}}
	if resp, _ := e.c.OffsetCommit(ctxT(t), r); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("4096 characters: %s", codeName(resp.Topics[0].Partitions[0].ErrorCode))
	}
}

func TestOffsetCommitAndFetchV0AreUnsupportedAsInKRaft(t *testing.T) {
	e := newEnv(t)
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group = 0, "g"
	r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if resp, _ := e.c.OffsetCommit(ctxT(t), r); resp.Topics[0].Partitions[0].ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("commit v0: %s", codeName(resp.Topics[0].Partitions[0].ErrorCode))
	}
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version, f.Group = 0, "g"
	f.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	resp, _ := e.c.OffsetFetch(ctxT(t), f)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnsupportedVersion.Code || p.Offset != -1 {
		t.Fatalf("fetch v0: %s offset %d", codeName(p.ErrorCode), p.Offset)
	}
}

func TestOffsetFetchRules(t *testing.T) {
	e := newEnv(t)
	e.commit(e.c, "g", "", -1, map[int32]int64{0: 10, 2: 12})

	t.Run("unknown partitions and groups answer -1 without error", func(t *testing.T) {
		got, code := e.fetch(e.c, "g", 0, 1)
		if code != 0 || got[0] != 10 || len(got) != 1 {
			t.Fatalf("%v %s", got, codeName(code))
		}
		got, code = e.fetch(e.c, "nope", 0)
		if code != 0 || len(got) != 0 {
			t.Fatalf("unknown group: %v %s", got, codeName(code))
		}
	})
	t.Run("null topics is every committed partition", func(t *testing.T) {
		if got, _ := e.fetch(e.c, "g"); len(got) != 2 || got[2] != 12 {
			t.Fatalf("%v", got)
		}
		f := kmsg.NewPtrOffsetFetchRequest()
		f.Version, f.Group, f.RequireStable = 7, "g", true
		resp, _ := e.c.OffsetFetch(ctxT(t), f)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
			t.Fatalf("v7 all: %+v", resp)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 { // require_stable: nothing is ever pending
				t.Fatalf("v7 require_stable: %s", codeName(p.ErrorCode))
			}
		}
	})
	t.Run("v8 fetches several groups at once, each answered alone", func(t *testing.T) {
		e.c.SetView(1, func(g string) bool { return g != "elsewhere" })
		f := kmsg.NewPtrOffsetFetchRequest()
		f.Version = 8
		for _, g := range []string{"g", "elsewhere", "nope"} {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = g
			rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
			f.Groups = append(f.Groups, rg)
		}
		resp, _ := e.c.OffsetFetch(ctxT(t), f)
		if len(resp.Groups) != 3 {
			t.Fatalf("%d groups", len(resp.Groups))
		}
		if g := resp.Groups[0]; g.ErrorCode != 0 || g.Topics[0].Partitions[0].Offset != 10 {
			t.Fatalf("g: %+v", g)
		}
		if g := resp.Groups[1]; g.ErrorCode != kerr.NotCoordinator.Code || len(g.Topics) != 0 {
			t.Fatalf("elsewhere: %+v", g)
		}
		if g := resp.Groups[2]; g.ErrorCode != 0 || g.Topics[0].Partitions[0].Offset != -1 || *g.Topics[0].Partitions[0].Metadata != "" {
			t.Fatalf("nope: %+v", g)
		}
		e.c.SetView(1, allGroups)
	})
	t.Run("v1 copies a group error into every partition; v2 answers it at the top", func(t *testing.T) {
		e.c.SetView(1, func(string) bool { return false })
		defer e.c.SetView(1, allGroups)
		f := kmsg.NewPtrOffsetFetchRequest()
		f.Version, f.Group = 1, "g"
		f.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 2}}}
		resp, _ := e.c.OffsetFetch(ctxT(t), f)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
			t.Fatalf("v1: %+v", resp)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != kerr.NotCoordinator.Code || p.Offset != -1 {
				t.Fatalf("v1 partition: %s %d", codeName(p.ErrorCode), p.Offset)
			}
		}
		f.Version = 2
		resp, _ = e.c.OffsetFetch(ctxT(t), f)
		if resp.ErrorCode != kerr.NotCoordinator.Code || len(resp.Topics) != 0 {
			t.Fatalf("v2: %+v", resp)
		}
	})
	t.Run("v5 answers the committed leader epoch", func(t *testing.T) {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Version, r.Group, r.Generation = 6, "g", -1
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 3, Offset: 30, LeaderEpoch: 9}}}}
		if _, err := e.c.OffsetCommit(ctxT(t), r); err != nil {
			t.Fatal(err)
		}
		f := kmsg.NewPtrOffsetFetchRequest()
		f.Version, f.Group = 5, "g"
		f.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{3}}}
		resp, _ := e.c.OffsetFetch(ctxT(t), f)
		if p := resp.Topics[0].Partitions[0]; p.Offset != 30 || p.LeaderEpoch != 9 {
			t.Fatalf("%+v", p)
		}
	})
}

func TestDeleteGroups(t *testing.T) {
	e := newEnv(t)
	e.stableGroup(e.c, "busy", 1)
	e.commit(e.c, "idle", "", -1, map[int32]int64{0: 1})
	r := kmsg.NewPtrDeleteGroupsRequest()
	r.Version = 2
	r.Groups = []string{"busy", "idle", "nope", "idle"}
	resp, err := e.c.DeleteGroups(ctxT(t), r)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int16{"busy": kerr.NonEmptyGroup.Code, "idle": 0, "nope": kerr.GroupIDNotFound.Code}
	if len(resp.Groups) != 3 {
		t.Fatalf("%d results, want one per distinct group", len(resp.Groups))
	}
	for _, g := range resp.Groups {
		if g.ErrorCode != want[g.Group] {
			t.Errorf("%s: %s, want %s", g.Group, codeName(g.ErrorCode), codeName(want[g.Group]))
		}
	}
	if got, _ := e.fetch(e.c, "idle", 0); len(got) != 0 {
		t.Fatalf("deleted group still has offsets %v", got)
	}
	if st := e.describe(e.c, "idle").State; st != "Dead" {
		t.Fatalf("deleted group is %s", st)
	}
	// Deleted means deleted on the volume too: a new coordinator does not find it.
	c2 := e.start(2)
	if got, _ := e.fetch(c2, "idle", 0); len(got) != 0 {
		t.Fatalf("deleted group's offsets came back after a takeover: %v", got)
	}
}

func TestOffsetDelete(t *testing.T) {
	e := newEnv(t)
	ids, gen := e.stableGroup(e.c, "g", 1) // subscribed to "t"
	e.commit(e.c, "g", ids[0], gen, map[int32]int64{0: 1})
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.MemberID, r.Generation = 8, "g", ids[0], gen
	r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "u", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 2}}}}
	if _, err := e.c.OffsetCommit(ctxT(t), r); err != nil {
		t.Fatal(err)
	}

	del := func(group string, topics map[string][]int32) *kmsg.OffsetDeleteResponse {
		d := kmsg.NewPtrOffsetDeleteRequest()
		d.Group = group
		for tn, ps := range topics {
			dt := kmsg.OffsetDeleteRequestTopic{Topic: tn}
			for _, p := range ps {
				dt.Partitions = append(dt.Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: p})
			}
			d.Topics = append(d.Topics, dt)
		}
		resp, err := e.c.OffsetDelete(ctxT(t), d)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	codes := func(resp *kmsg.OffsetDeleteResponse) map[string]int16 {
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				out[rt.Topic] = p.ErrorCode
			}
		}
		return out
	}
	resp := del("g", map[string][]int32{"t": {0}, "u": {0}, "nope": {0}})
	got := codes(resp)
	if resp.ErrorCode != 0 || got["t"] != kerr.GroupSubscribedToTopic.Code || got["u"] != 0 || got["nope"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("active consumer group: %s %v", codeName(resp.ErrorCode), got)
	}
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version, f.Group = 7, "g"
	all, _ := e.c.OffsetFetch(ctxT(t), f)
	if len(all.Topics) != 1 || all.Topics[0].Topic != "t" {
		t.Fatalf("after deleting u: %+v", all.Topics)
	}
	if resp := del("nope", map[string][]int32{"t": {0}}); resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("unknown group: %s", codeName(resp.ErrorCode))
	}
	// A non-consumer active group: NON_EMPTY_GROUP.
	cr := joinReq(3, "conn", "")
	cr.ProtocolType = "connect"
	e.stableGroupWith(t, cr)
	if resp := del("conn", map[string][]int32{"t": {0}}); resp.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("active connect group: %s", codeName(resp.ErrorCode))
	}
	// An Empty group: deleted.
	e.commit(e.c, "empty", "", -1, map[int32]int64{0: 1, 1: 1})
	if resp := del("empty", map[string][]int32{"t": {0}}); resp.ErrorCode != 0 || codes(resp)["t"] != 0 {
		t.Fatalf("empty group: %+v", resp)
	}
	if got, _ := e.fetch(e.c, "empty"); len(got) != 1 || got[1] != 1 {
		t.Fatalf("empty group after delete: %v", got)
	}
}

// stableGroupWith makes a one-member group from an arbitrary (v3, no MEMBER_ID_REQUIRED)
// JoinGroup.
func (e *env) stableGroupWith(t *testing.T, r *kmsg.JoinGroupRequest) string {
	t.Helper()
	j := e.collect([]<-chan *kmsg.JoinGroupResponse{e.join(e.c, r)})[0]
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version, s.Group, s.MemberID, s.Generation = 3, r.Group, j.MemberID, j.Generation
	if resp, _ := e.c.SyncGroup(ctxT(t), s); resp.ErrorCode != 0 {
		t.Fatalf("sync: %s", codeName(resp.ErrorCode))
	}
	return j.MemberID
}

func TestDescribeGroups(t *testing.T) {
	e := newEnv(t)
	ids, _ := e.stableGroup(e.c, "g", 2)
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version, r.IncludeAuthorizedOperations = 5, true
	r.Groups = []string{"g", "nope"}
	resp, _ := e.c.DescribeGroups(ctxT(t), r)
	g, n := resp.Groups[0], resp.Groups[1]
	if g.ErrorCode != 0 || g.State != "Stable" || g.ProtocolType != "consumer" || g.Protocol != "range" || len(g.Members) != 2 {
		t.Fatalf("stable group: %+v", g)
	}
	if g.AuthorizedOperations != groupOperations {
		t.Fatalf("authorized operations %d", g.AuthorizedOperations)
	}
	for _, m := range g.Members {
		if string(m.MemberAssignment) != "assignment of "+m.MemberID || len(m.ProtocolMetadata) == 0 || m.ClientHost != "/127.0.0.1" || m.ClientID != "client" {
			t.Fatalf("member %+v", m)
		}
	}
	if n.ErrorCode != 0 || n.State != "Dead" || len(n.Members) != 0 || n.ProtocolType != "" {
		t.Fatalf("unknown group: %+v", n)
	}
	// Not Stable: no protocol, no metadata or assignment.
	pending(t, e.join(e.c, joinReq(5, "g", ids[0])))
	d := e.describe(e.c, "g")
	if d.State != "PreparingRebalance" || d.Protocol != "" || len(d.Members) != 2 || len(d.Members[0].MemberAssignment) != 0 || len(d.Members[0].ProtocolMetadata) != 0 {
		t.Fatalf("rebalancing group: %+v", d)
	}
}

func TestListGroupsWithStatesFilter(t *testing.T) {
	e := newEnv(t)
	e.stableGroup(e.c, "stable", 1)
	e.commit(e.c, "empty", "", -1, map[int32]int64{0: 1})
	pending(t, e.join(e.c, joinReq(3, "preparing", "")))
	list := func(v int16, states ...string) map[string]string {
		r := kmsg.NewPtrListGroupsRequest()
		r.Version, r.StatesFilter = v, states
		resp, err := e.c.ListGroups(ctxT(t), r)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("%v %s", err, codeName(resp.ErrorCode))
		}
		out := map[string]string{}
		for _, g := range resp.Groups {
			out[g.Group] = g.GroupState + "/" + g.ProtocolType
		}
		return out
	}
	if got := list(4); len(got) != 3 || got["stable"] != "Stable/consumer" || got["empty"] != "Empty/" || got["preparing"] != "PreparingRebalance/consumer" {
		t.Fatalf("all: %v", got)
	}
	if got := list(4, "Stable", "Empty"); len(got) != 2 || got["preparing"] != "" {
		t.Fatalf("filtered: %v", got)
	}
	if got := list(4, "stable"); len(got) != 0 {
		t.Fatalf("the filter is exact, as Apache's: %v", got)
	}
	if got := list(3, "Stable"); len(got) != 3 {
		t.Fatalf("v3 has no filter: %v", got)
	}
}
