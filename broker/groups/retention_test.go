package groups

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Offset retention (Apache's offsets.retention.minutes, 7 days; checked every
// offsets.retention.check.interval.ms, 10 minutes), driven by the fake clock.

const week = 7 * 24 * time.Hour

// send commits r and fails the test unless every partition is acknowledged.
func (e *env) send(c *Coordinator, r *kmsg.OffsetCommitRequest) {
	e.t.Helper()
	for _, t := range e.commitResp(c, r).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				e.t.Fatalf("commit %s[%d]: %s", t.Topic, p.Partition, codeName(p.ErrorCode))
			}
		}
	}
}

// committed lists group's offsets as "topic/partition" → offset.
func (e *env) committed(c *Coordinator, group string) map[string]int64 {
	e.t.Helper()
	g := e.offsetFetch(c, group)
	if g.ErrorCode != 0 {
		e.t.Fatalf("fetch %s: %s", group, codeName(g.ErrorCode))
	}
	out := map[string]int64{}
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			out[t.Topic+"/"+strconv.Itoa(int(p.Partition))] = p.Offset
		}
	}
	return out
}

// longMember joins group as its only member (v3, subscribed to topic t) with a session of 20
// days, so the fake clock can move by weeks without the member expiring; it returns the
// member id and generation once the group is Stable.
func (e *env) longMember(c *Coordinator, group string) (string, int32) {
	e.t.Helper()
	r := joinReq(3, group, "")
	r.SessionTimeoutMillis = int32((20 * 24 * time.Hour).Milliseconds())
	j := e.collect([]<-chan *kmsg.JoinGroupResponse{e.join(c, r)})[0]
	if j.ErrorCode != 0 {
		e.t.Fatalf("join: %s", codeName(j.ErrorCode))
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version, s.Group, s.MemberID, s.Generation = 3, group, j.MemberID, j.Generation
	if resp, _ := c.SyncGroup(ctxT(e.t), s); resp.ErrorCode != 0 {
		e.t.Fatalf("sync: %s", codeName(resp.ErrorCode))
	}
	return j.MemberID, j.Generation
}

func (e *env) leave(c *Coordinator, group, member string) {
	e.t.Helper()
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version, r.Group, r.MemberID = 0, group, member
	if resp, err := c.LeaveGroup(ctxT(e.t), r); err != nil || resp.ErrorCode != 0 {
		e.t.Fatalf("leave: %v %s", err, codeName(resp.ErrorCode))
	}
}

// longSessions lets members ask for sessions of weeks.
func longSessions(c *Config) { c.MaxSessionTimeout = 30 * 24 * time.Hour }

// gone waits until group's files have been removed: its directory holds no offsets file or
// compaction temporary, only its fence (whose claims are never removed).
func (e *env) gone(group string) {
	e.t.Helper()
	var left []string
	for range 500 {
		ents, err := os.ReadDir(groupDir(e, group))
		if err != nil {
			e.t.Fatalf("group %s's directory: %v", group, err)
		}
		left = left[:0]
		for _, de := range ents {
			if de.Name() != fenceDirName {
				left = append(left, de.Name())
			}
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	e.t.Fatalf("group %s's files are still there: %v", group, left)
}

func TestOffsetsOfASimpleGroupExpireARetentionAfterTheirCommit(t *testing.T) {
	e := newEnv(t)
	e.send(e.c, commitReq("simple", "", -1, map[string]map[int32]int64{"t": {0: 10}}))
	e.step(4 * 24 * time.Hour)
	e.send(e.c, commitReq("simple", "", -1, map[string]map[int32]int64{"t": {1: 11}}))
	e.step(3*24*time.Hour - time.Hour)
	if got := e.committed(e.c, "simple"); len(got) != 2 {
		t.Fatalf("an hour before t/0's retention ends: %v, want both offsets", got)
	}
	e.step(time.Hour + e.cfg.CleanupInterval)
	if got := e.committed(e.c, "simple"); len(got) != 1 || got["t/1"] != 11 {
		t.Fatalf("after t/0's retention: %v, want only t/1 (committed 4 days later)", got)
	}
	e.step(4 * 24 * time.Hour)
	if got := e.committed(e.c, "simple"); len(got) != 0 {
		t.Fatalf("after t/1's retention: %v, want nothing", got)
	}
	if d := e.describe(e.c, "simple"); d.State != "Dead" {
		t.Fatalf("a group whose offsets all expired is %s, want Dead", d.State)
	}
	e.gone("simple")
}

func TestOffsetsOfAnEmptyConsumerGroupExpireARetentionAfterItBecameEmpty(t *testing.T) {
	e := newEnv(t, longSessions)
	m, gen := e.longMember(e.c, "g")
	e.send(e.c, commitReq("g", m, gen, map[string]map[int32]int64{"t": {0: 5}}))
	e.step(8 * 24 * time.Hour)
	if got := e.committed(e.c, "g"); got["t/0"] != 5 {
		t.Fatalf("a Stable group subscribed to t, 8 days after its commit: %v, want t/0 kept", got)
	}
	e.leave(e.c, "g", m)
	e.step(week - time.Hour)
	if got := e.committed(e.c, "g"); got["t/0"] != 5 {
		t.Fatalf("an hour before a week of being Empty: %v, want t/0 kept", got)
	}
	e.step(time.Hour + e.cfg.CleanupInterval)
	if got := e.committed(e.c, "g"); len(got) != 0 {
		t.Fatalf("a week after the group became Empty: %v, want its offsets expired", got)
	}
	e.gone("g")
}

func TestAStableConsumerGroupExpiresOnlyOffsetsOfTopicsItDoesNotSubscribeTo(t *testing.T) {
	e := newEnv(t, longSessions)
	m, gen := e.longMember(e.c, "g") // subscribed to t only
	e.send(e.c, commitReq("g", m, gen, map[string]map[int32]int64{"t": {0: 5}, "u": {0: 6}}))
	e.step(week + e.cfg.CleanupInterval)
	if got := e.committed(e.c, "g"); len(got) != 1 || got["t/0"] != 5 {
		t.Fatalf("a week after the commit: %v, want t/0 (subscribed) kept and u/0 expired", got)
	}
}

func TestTheTimeAGroupBecameEmptyIsKeptAcrossACoordinatorMove(t *testing.T) {
	e := newEnv(t, longSessions)
	m, gen := e.longMember(e.c, "g")
	e.send(e.c, commitReq("g", m, gen, map[string]map[int32]int64{"t": {0: 5}}))
	e.leave(e.c, "g", m)
	e.step(5 * 24 * time.Hour)
	_ = e.c.Close()
	c2 := e.start(2)
	if got := e.committed(c2, "g"); got["t/0"] != 5 {
		t.Fatalf("after the move: %v", got)
	}
	e.step(2*24*time.Hour + e.cfg.CleanupInterval)
	if got := e.committed(c2, "g"); len(got) != 0 {
		t.Fatalf("a week after the group became Empty (five days of it before the move): %v, want expired", got)
	}
}

func TestAGroupWithMembersAtAMoveCountsItsRetentionFromTheMove(t *testing.T) {
	e := newEnv(t, longSessions)
	m, gen := e.longMember(e.c, "g")
	e.send(e.c, commitReq("g", m, gen, map[string]map[int32]int64{"t": {0: 5}}))
	e.step(8 * 24 * time.Hour)
	_ = e.c.Close() // the member was there until now; membership does not move
	c2 := e.start(2)
	if got := e.committed(c2, "g"); got["t/0"] != 5 {
		t.Fatalf("after the move: %v, want t/0 (the group had a member until the move)", got)
	}
	e.step(week - time.Hour)
	_ = c2.Close()
	c3 := e.start(3) // nobody came back; another move must not restart the week
	if got := e.committed(c3, "g"); got["t/0"] != 5 {
		t.Fatalf("an hour before a week after the first move: %v", got)
	}
	e.step(time.Hour + e.cfg.CleanupInterval)
	if got := e.committed(c3, "g"); len(got) != 0 {
		t.Fatalf("a week after the first move: %v, want expired", got)
	}
}

func TestARetentionTimeSentWithOffsetCommitV2IsHonoured(t *testing.T) {
	e := newEnv(t)
	r := commitReq("old", "", -1, map[string]map[int32]int64{"t": {0: 1}})
	r.Version, r.RetentionTimeMillis = 2, time.Hour.Milliseconds()
	e.send(e.c, r)
	r = commitReq("old", "", -1, map[string]map[int32]int64{"t": {1: 2}})
	r.Version, r.RetentionTimeMillis = 2, -1 // the broker's retention
	e.send(e.c, r)
	e.step(time.Hour + e.cfg.CleanupInterval)
	if got := e.committed(e.c, "old"); len(got) != 1 || got["t/1"] != 2 {
		t.Fatalf("after the hour t/0 was committed for: %v, want only t/1", got)
	}
	_ = e.c.Close()
	if got := e.committed(e.start(2), "old"); len(got) != 1 {
		t.Fatalf("after a move: %v", got)
	}
}

func TestOffsetsRetentionIsConfigurable(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.OffsetsRetention = time.Hour })
	e.send(e.c, commitReq("simple", "", -1, map[string]map[int32]int64{"t": {0: 1}}))
	e.step(time.Hour + e.cfg.CleanupInterval)
	if got := e.committed(e.c, "simple"); len(got) != 0 {
		t.Fatalf("an hour past a commit with offsets.retention.minutes=60: %v", got)
	}
}

func TestDeleteGroupsRemovesTheGroupsFiles(t *testing.T) {
	e := newEnv(t)
	e.send(e.c, commitReq("g", "", -1, map[string]map[int32]int64{"t": {0: 1, 1: 2}}))
	d := kmsg.NewPtrDeleteGroupsRequest()
	d.Version, d.Groups = 2, []string{"g"}
	resp, err := e.c.DeleteGroups(ctxT(t), d)
	if err != nil || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete: %v %+v", err, resp)
	}
	e.gone("g")
	// The id can be used again at once, and only the new commits are there.
	e.send(e.c, commitReq("g", "", -1, map[string]map[int32]int64{"t": {2: 3}}))
	if got := e.committed(e.c, "g"); len(got) != 1 || got["t/2"] != 3 {
		t.Fatalf("after re-creation: %v", got)
	}
	_ = e.c.Close()
	if got := e.committed(e.start(2), "g"); len(got) != 1 || got["t/2"] != 3 {
		t.Fatalf("after re-creation and a move: %v", got)
	}
}

func TestAnEmptyGroupWithoutOffsetsIsRemovedWithItsFiles(t *testing.T) {
	e := newEnv(t, longSessions)
	m, _ := e.longMember(e.c, "g")
	if _, err := os.Stat(groupDir(e, "g")); err != nil {
		t.Fatalf("the joined group has no directory: %v", err)
	}
	e.leave(e.c, "g", m)
	e.step(e.cfg.CleanupInterval)
	if d := e.describe(e.c, "g"); d.State != "Dead" {
		t.Fatalf("an Empty group without offsets after the cleanup interval: %s, want Dead", d.State)
	}
	e.gone("g")
}

// TestACrashAtEveryStepOfADeleteNeverBringsBackOlderOffsets: epoch 1 commits t/0 = 1; epoch 2
// takes over (keeping file 1, the source of its snapshot), commits t/0 = 2 and t/1 = 2, and
// deletes the group, its process dying at operation k of the removal (every operation from k
// on fails), for every k until the removal completes. A coordinator at epoch 3 must find the
// group deleted if DeleteGroups answered NONE, and otherwise either deleted or as it was —
// never file 1's older t/0 = 1. It can use the group id again.
func TestACrashAtEveryStepOfADeleteNeverBringsBackOlderOffsets(t *testing.T) {
	for k := int64(1); ; k++ {
		cfs := newCrashFS()
		e := newEnv(t, func(c *Config) { c.FS = cfs })
		e.send(e.c, commitReq("g", "", -1, map[string]map[int32]int64{"t": {0: 1}}))
		_ = e.c.Close()
		c2 := e.start(2)
		e.send(c2, commitReq("g", "", -1, map[string]map[int32]int64{"t": {0: 2, 1: 2}}))
		if files := logFiles(t, groupDir(e, "g")); len(files) != 2 {
			t.Fatalf("files before the delete: %v, want epoch 1's (the snapshot's source) and 2's", files)
		}
		cfs.arm(k)
		d := kmsg.NewPtrDeleteGroupsRequest()
		d.Version, d.Groups = 2, []string{"g"}
		resp, err := c2.DeleteGroups(ctxT(t), d)
		if err != nil {
			t.Fatal(err)
		}
		deleted := resp.Groups[0].ErrorCode == 0
		_ = c2.Close() // the files are removed after the answer, before the group's goroutine ends
		crashed := cfs.failed.Load()
		cfs.arm(0)
		c3 := e.start(3)
		got := e.committed(c3, "g")
		switch {
		case deleted && len(got) != 0:
			t.Fatalf("crash at op %d of a delete answered NONE: the next coordinator has %v", k, got)
		case len(got) != 0 && (got["t/0"] != 2 || got["t/1"] != 2):
			t.Fatalf("crash at op %d: the next coordinator has %v, neither deleted nor the state before", k, got)
		}
		e.send(c3, commitReq("g", "", -1, map[string]map[int32]int64{"t": {3: 3}}))
		if got := e.committed(c3, "g"); got["t/3"] != 3 {
			t.Fatalf("crash at op %d: the group id cannot be used again: %v", k, got)
		}
		if !crashed {
			t.Logf("a crash at each of the first %d operations of a DeleteGroups never brought back older offsets", k-1)
			return
		}
	}
}

// TestAGroupLoadedWithoutOffsetsKeepsItsFenceUntilARetentionCheck: a group that has members
// at a coordinator but no offsets yet, taken over by a newer coordinator (which cannot see
// the members), is not removed at once — that would let the older coordinator, whose view is
// behind, claim it again and keep serving its members — but at the newer one's first
// retention check.
func TestAGroupLoadedWithoutOffsetsKeepsItsFenceUntilARetentionCheck(t *testing.T) {
	e := newEnv(t)
	old := e.c
	ids, _ := e.stableGroup(old, "g", 1)
	next := e.start(2)
	for range 2 { // the second is handled once the first request's goroutine is done with it
		if d := e.describe(next, "g"); d.State != "Dead" {
			t.Fatalf("the group without offsets at the new coordinator: %s, want Dead", d.State)
		}
	}
	if _, err := os.Stat(groupDir(e, "g")); err != nil {
		t.Fatalf("the group's directory went at the takeover: %v", err)
	}
	// The old coordinator's member rejoins, is refused, and joins afresh (its client still
	// finds the old coordinator): the old one must not create the group again.
	if r := await(t, e.join(old, joinReq(5, "g", ids[0]))); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("the old coordinator's member rejoins: %s, want NOT_COORDINATOR", codeName(r.ErrorCode))
	}
	if r := await(t, e.join(old, joinReq(5, "g", ""))); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("a fresh join at the old coordinator: %s, want NOT_COORDINATOR", codeName(r.ErrorCode))
	}
	e.step(e.cfg.CleanupInterval)
	e.describe(next, "g")
	e.gone("g")
	// The removal keeps the fence at the newer coordinator's claim: the old one still cannot
	// take the group back.
	if r := await(t, e.join(old, joinReq(5, "g", ""))); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("a fresh join at the old coordinator after the removal: %s, want NOT_COORDINATOR", codeName(r.ErrorCode))
	}
}
