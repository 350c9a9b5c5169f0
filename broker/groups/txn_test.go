package groups

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/coordinator"
)

// txnReq is a TxnOffsetCommit v3 of topic "t" offsets by producer pid at epoch.
func txnReq(group string, pid int64, epoch int16, gen int32, member string, offsets map[int32]int64) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version, r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch = 3, "tx", group, pid, epoch
	r.Generation, r.MemberID = gen, member
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	for p, o := range offsets {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata = p, o, strp("txn")
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = []kmsg.TxnOffsetCommitRequestTopic{rt}
	return r
}

// txnCommit sends a TxnOffsetCommit and returns its codes by partition of "t".
func (e *env) txnCommitReq(c *Coordinator, r *kmsg.TxnOffsetCommitRequest) map[int32]int16 {
	e.t.Helper()
	resp, err := c.TxnOffsetCommit(ctxT(e.t), r)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[int32]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.ErrorCode
		}
	}
	return out
}

func (e *env) txnCommit(c *Coordinator, group string, pid int64, offsets map[int32]int64) int16 {
	e.t.Helper()
	return oneCode(e.t, e.txnCommitReq(c, txnReq(group, pid, 0, -1, "", offsets)))
}

func oneCode(t *testing.T, codes map[int32]int16) int16 {
	t.Helper()
	var first int16
	n := 0
	for _, c := range codes {
		if n > 0 && c != first {
			t.Fatalf("mixed codes %v", codes)
		}
		first, n = c, n+1
	}
	return first
}

func (e *env) marker(c *Coordinator, group string, pid int64, epoch int16, commit bool) int16 {
	e.t.Helper()
	return c.CompleteTransaction(ctxT(e.t), coordinator.Partition(group, e.cfg.OffsetsPartitions), pid, epoch, commit)
}

// stableFetch is a v8 OffsetFetch of "t" partitions with RequireStable: offsets and codes.
func (e *env) stableFetch(c *Coordinator, group string, parts ...int32) (map[int32]int64, map[int32]int16) {
	e.t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.RequireStable = 8, true
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: parts}}
	r.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	resp, err := c.OffsetFetch(ctxT(e.t), r)
	if err != nil {
		e.t.Fatal(err)
	}
	offs, codes := map[int32]int64{}, map[int32]int16{}
	for _, t := range resp.Groups[0].Topics {
		for _, p := range t.Partitions {
			offs[p.Partition], codes[p.Partition] = p.Offset, p.ErrorCode
		}
	}
	return offs, codes
}

func TestTxnOffsetCommitRules(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.InitialRebalanceDelay = 0 })
	members, gen := e.stableGroup(e.c, "live", 1)
	member := members[0]
	inst := "i1"
	static := func() string {
		r := joinReq(5, "static", "", "range")
		r.InstanceID = &inst
		resp := await(t, e.join(e.c, r))
		if resp.ErrorCode != 0 {
			t.Fatalf("static join: %s", codeName(resp.ErrorCode))
		}
		s := await(t, e.sync(e.c, "static", resp.MemberID, resp.Generation, map[string][]byte{resp.MemberID: nil}))
		if s.ErrorCode != 0 {
			t.Fatalf("static sync: %s", codeName(s.ErrorCode))
		}
		return resp.MemberID
	}()
	for _, tc := range []struct {
		name string
		req  func() *kmsg.TxnOffsetCommitRequest
		want int16
	}{
		{"a missing group is created Empty", func() *kmsg.TxnOffsetCommitRequest { return txnReq("new", 1, 0, -1, "", map[int32]int64{0: 1}) }, 0},
		{"an empty group id is INVALID_GROUP_ID", func() *kmsg.TxnOffsetCommitRequest { return txnReq("", 1, 0, -1, "", map[int32]int64{0: 1}) }, kerr.InvalidGroupID.Code},
		{"a member of the generation commits", func() *kmsg.TxnOffsetCommitRequest { return txnReq("live", 2, 0, gen, member, map[int32]int64{0: 1}) }, 0},
		{"generation -1 without a member is accepted in a group with members", func() *kmsg.TxnOffsetCommitRequest { return txnReq("live", 3, 0, -1, "", map[int32]int64{1: 1}) }, 0},
		{"an unknown member is UNKNOWN_MEMBER_ID", func() *kmsg.TxnOffsetCommitRequest { return txnReq("live", 4, 0, gen, "nobody", map[int32]int64{0: 1}) }, kerr.UnknownMemberID.Code},
		{"another generation is ILLEGAL_GENERATION", func() *kmsg.TxnOffsetCommitRequest { return txnReq("live", 4, 0, gen+1, member, map[int32]int64{0: 1}) }, kerr.IllegalGeneration.Code},
		{"a member id on a missing group is UNKNOWN_MEMBER_ID", func() *kmsg.TxnOffsetCommitRequest { return txnReq("none", 4, 0, -1, "m", map[int32]int64{0: 1}) }, kerr.UnknownMemberID.Code},
		{"an instance id held by another member is FENCED_INSTANCE_ID", func() *kmsg.TxnOffsetCommitRequest {
			r := txnReq("static", 5, 0, -1, "old-member", map[int32]int64{0: 1})
			r.InstanceID = &inst
			return r
		}, kerr.FencedInstanceID.Code},
		{"the static member itself commits", func() *kmsg.TxnOffsetCommitRequest {
			r := txnReq("static", 5, 0, 1, static, map[int32]int64{0: 1})
			r.InstanceID = &inst
			return r
		}, 0},
		{"an unknown partition is UNKNOWN_TOPIC_OR_PARTITION", func() *kmsg.TxnOffsetCommitRequest { return txnReq("new", 1, 0, -1, "", map[int32]int64{9: 1}) }, kerr.UnknownTopicOrPartition.Code},
		{"a lower producer epoch than recorded is INVALID_PRODUCER_EPOCH", func() *kmsg.TxnOffsetCommitRequest {
			if code := oneCode(t, e.txnCommitReq(e.c, txnReq("new", 6, 3, -1, "", map[int32]int64{0: 1}))); code != 0 {
				t.Fatalf("epoch 3: %s", codeName(code))
			}
			return txnReq("new", 6, 2, -1, "", map[int32]int64{0: 2})
		}, kerr.InvalidProducerEpoch.Code},
		{"metadata over offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE", func() *kmsg.TxnOffsetCommitRequest {
			r := txnReq("new", 7, 0, -1, "", map[int32]int64{0: 1})
			r.Topics[0].Partitions[0].Metadata = strp(strings.Repeat("x", 4097))
			return r
		}, kerr.OffsetMetadataTooLarge.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := oneCode(t, e.txnCommitReq(e.c, tc.req())); got != tc.want {
				t.Fatalf("got %s, want %s", codeName(got), codeName(tc.want))
			}
		})
	}
	t.Run("not the coordinator is NOT_COORDINATOR", func(t *testing.T) {
		c := e.start(2)
		c.SetView(2, func(string) bool { return false })
		if got := oneCode(t, e.txnCommitReq(c, txnReq("new", 1, 0, -1, "", map[int32]int64{0: 1}))); got != kerr.NotCoordinator.Code {
			t.Fatalf("got %s", codeName(got))
		}
	})
}

func TestTxnOffsetCommitInAConsumerGroupChecksTheMemberEpoch(t *testing.T) {
	e := newEnv(t)
	m := e.member(e.c, "cg", "m1", "t")
	m.mustBeat()
	resp := struct{ MemberEpoch int32 }{m.epoch}
	for _, tc := range []struct {
		name   string
		member string
		epoch  int32
		want   int16
	}{
		{"the member at its epoch", "m1", resp.MemberEpoch, 0},
		{"the member at another epoch is STALE_MEMBER_EPOCH", "m1", resp.MemberEpoch + 1, kerr.StaleMemberEpoch.Code},
		{"an unknown member is UNKNOWN_MEMBER_ID", "m2", resp.MemberEpoch, kerr.UnknownMemberID.Code},
		{"no member while the group has members is UNKNOWN_MEMBER_ID", "", -1, kerr.UnknownMemberID.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := oneCode(t, e.txnCommitReq(e.c, txnReq("cg", 1, 0, tc.epoch, tc.member, map[int32]int64{0: 1}))); got != tc.want {
				t.Fatalf("got %s, want %s", codeName(got), codeName(tc.want))
			}
		})
	}
}

// Pending offsets are invisible as committed, make require_stable answer
// UNSTABLE_OFFSET_COMMIT, and become committed at the commit marker (dropped at abort).
func TestPendingOffsetsBecomeCommittedOnlyAtTheCommitMarker(t *testing.T) {
	e := newEnv(t)
	if codes := e.commit(e.c, "g", "", -1, map[int32]int64{0: 5, 1: 5}); codes[0] != 0 {
		t.Fatalf("commit: %v", codes)
	}
	if code := e.txnCommit(e.c, "g", 10, map[int32]int64{0: 7}); code != 0 {
		t.Fatalf("txn commit: %s", codeName(code))
	}
	if got, _ := e.fetch(e.c, "g", 0, 1); got[0] != 5 {
		t.Fatalf("before the marker t/0 = %d, want the committed 5", got[0])
	}
	if _, codes := e.stableFetch(e.c, "g", 0, 1); codes[0] != kerr.UnstableOffsetCommit.Code || codes[1] != 0 {
		t.Fatalf("require_stable codes %v, want t/0 UNSTABLE_OFFSET_COMMIT, t/1 NONE", codes)
	}
	if code := e.marker(e.c, "g", 10, 0, true); code != 0 {
		t.Fatalf("commit marker: %s", codeName(code))
	}
	if offs, codes := e.stableFetch(e.c, "g", 0, 1); codes[0] != 0 || offs[0] != 7 {
		t.Fatalf("after the marker: %v %v, want t/0 = 7", offs, codes)
	}
	if code := e.txnCommit(e.c, "g", 10, map[int32]int64{0: 9}); code != 0 {
		t.Fatalf("second txn: %s", codeName(code))
	}
	if code := e.marker(e.c, "g", 10, 0, false); code != 0 {
		t.Fatalf("abort marker: %s", codeName(code))
	}
	if offs, codes := e.stableFetch(e.c, "g", 0); codes[0] != 0 || offs[0] != 7 {
		t.Fatalf("after the abort: %v %v, want t/0 = 7", offs, codes)
	}
}

// Apache's order: a plain commit acknowledged after a pending offset wins at the commit
// marker; one acknowledged before it loses.
func TestAPlainCommitAfterAPendingOffsetWinsAtTheMarker(t *testing.T) {
	e := newEnv(t)
	e.commit(e.c, "g", "", -1, map[int32]int64{0: 1})
	e.txnCommit(e.c, "g", 10, map[int32]int64{0: 2, 1: 2})
	e.commit(e.c, "g", "", -1, map[int32]int64{1: 3})
	if code := e.marker(e.c, "g", 10, 0, true); code != 0 {
		t.Fatal(codeName(code))
	}
	if got, _ := e.fetch(e.c, "g", 0, 1); got[0] != 2 || got[1] != 3 {
		t.Fatalf("offsets %v, want t/0 = 2 (txn after the commit), t/1 = 3 (commit after the txn)", got)
	}
	// Two producers: the later pending offset, committed first, makes the earlier stale.
	e.txnCommit(e.c, "g", 11, map[int32]int64{2: 10})
	e.txnCommit(e.c, "g", 12, map[int32]int64{2: 20})
	e.marker(e.c, "g", 12, 0, true)
	e.marker(e.c, "g", 11, 0, true)
	if got, _ := e.fetch(e.c, "g", 2); got[2] != 20 {
		t.Fatalf("t/2 = %d, want 20", got[2])
	}
}

// A TxnOffsetCommit acknowledged by one coordinator is completed by the next one at a
// higher epoch, which has not loaded the group when the marker arrives.
func TestPendingOffsetsSurviveATakeoverAndCompleteThere(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprint("commit=", commit), func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.OffsetsPartitions = 1 })
			e.commit(e.c, "a", "", -1, map[int32]int64{0: 1})
			for _, g := range []string{"a", "b"} {
				if code := e.txnCommit(e.c, g, 10, map[int32]int64{0: 4}); code != 0 {
					t.Fatal(codeName(code))
				}
			}
			_ = e.c.Close()
			c := e.start(2)
			if code := e.marker(c, "a", 10, 0, commit); code != 0 {
				t.Fatalf("marker at the next coordinator: %s", codeName(code))
			}
			want := map[string]int64{"a": 1, "b": -1}
			if commit {
				want = map[string]int64{"a": 4, "b": 4}
			}
			c3 := e.start(3)
			for g, w := range want {
				offs, codes := e.stableFetch(c3, g, 0)
				if codes[0] != 0 || offs[0] != w {
					t.Fatalf("group %s at epoch 3: %d %s, want %d", g, offs[0], codeName(codes[0]), w)
				}
			}
		})
	}
}

// A coordinator deposed from the partition acknowledges no TxnOffsetCommit and no marker,
// and what it tries is never visible.
func TestADeposedCoordinatorAcknowledgesNoTransactionalOffset(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.OffsetsPartitions = 1 })
	e.txnCommit(e.c, "a", 10, map[int32]int64{0: 4})
	b := e.start(2)
	if code := e.marker(b, "a", 10, 0, true); code != 0 {
		t.Fatal(codeName(code))
	}
	if code := e.txnCommit(e.c, "a", 10, map[int32]int64{0: 9}); code != kerr.NotCoordinator.Code {
		t.Fatalf("deposed TxnOffsetCommit: %s, want NOT_COORDINATOR", codeName(code))
	}
	if code := e.txnCommit(e.c, "fresh", 11, map[int32]int64{0: 9}); code != kerr.NotCoordinator.Code {
		t.Fatalf("deposed TxnOffsetCommit of a new group: %s, want NOT_COORDINATOR", codeName(code))
	}
	if code := e.marker(e.c, "a", 10, 0, false); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("deposed marker: %s, want NOT_LEADER_OR_FOLLOWER", codeName(code))
	}
	for _, g := range []string{"a", "fresh"} {
		offs, codes := e.stableFetch(b, g, 0)
		want := map[string]int64{"a": 4, "fresh": -1}[g]
		if codes[0] != 0 || offs[0] != want {
			t.Fatalf("group %s at the new coordinator: %d %s, want %d", g, offs[0], codeName(codes[0]), want)
		}
	}
}

// A marker resent after its completion (the answer lost, or a crash before the transaction
// coordinator recorded it) changes nothing: a plain commit made in between stays.
func TestAResentMarkerAppliesOnce(t *testing.T) {
	e := newEnv(t)
	e.txnCommit(e.c, "g", 10, map[int32]int64{0: 4})
	if code := e.marker(e.c, "g", 10, 0, true); code != 0 {
		t.Fatal(codeName(code))
	}
	e.commit(e.c, "g", "", -1, map[int32]int64{0: 6})
	for _, c := range []*Coordinator{e.c, e.start(2)} {
		if code := e.marker(c, "g", 10, 0, true); code != 0 {
			t.Fatal(codeName(code))
		}
		if got, _ := e.fetch(c, "g", 0); got[0] != 6 {
			t.Fatalf("t/0 = %d after the resent marker, want 6", got[0])
		}
	}
}

// A marker whose completion failed midway (a group's write failed) answers an error, and
// the resent marker completes the rest: nothing applied twice, nothing lost.
func TestAMarkerThatFailedMidwayIsCompletedByItsResend(t *testing.T) {
	ffs := newFaultFS()
	e := newEnv(t, func(c *Config) { c.OffsetsPartitions = 1; c.FS = ffs })
	for _, g := range []string{"a", "b", "c"} {
		e.txnCommit(e.c, g, 10, map[int32]int64{0: 4})
	}
	e.commit(e.c, "c", "", -1, map[int32]int64{1: 1})
	ffs.set(func(op storage.Op, path string) error {
		if op == storage.OpWrite && strings.Contains(path, dirName("b")) {
			return errors.New("injected EIO")
		}
		return nil
	})
	if code := e.marker(e.c, "a", 10, 0, true); code == 0 {
		t.Fatal("the marker answered NONE though group b's completion failed")
	}
	ffs.set(nil)
	c := e.start(2)
	if code := e.marker(c, "a", 10, 0, true); code != 0 {
		t.Fatal(codeName(code))
	}
	for _, g := range []string{"a", "b", "c"} {
		if offs, codes := e.stableFetch(c, g, 0); codes[0] != 0 || offs[0] != 4 {
			t.Fatalf("group %s: %d %s, want 4", g, offs[0], codeName(codes[0]))
		}
	}
}

// hideListings is a file system whose directory listings under the groups root show
// nothing (a network file system's stale cache at its worst).
type hideListings struct{ storage.FS }

func (h hideListings) ReadDirNames(dir string) ([]string, error) {
	if _, err := h.FS.ReadDirNames(dir); err != nil {
		return nil, err
	}
	return nil, nil
}

// The marker finds every group through the transaction index by name: a coordinator whose
// listings show nothing still completes them all.
func TestTheMarkerDoesNotDependOnADirectoryListing(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.OffsetsPartitions = 1 })
	for _, g := range []string{"a", "b"} {
		e.txnCommit(e.c, g, 10, map[int32]int64{0: 4})
	}
	_ = e.c.Close()
	c := e.start(2, func(c *Config) { c.FS = hideListings{storage.OSFS{}} })
	if code := e.marker(c, "a", 10, 0, true); code != 0 {
		t.Fatal(codeName(code))
	}
	c3 := e.start(3)
	for _, g := range []string{"a", "b"} {
		if offs, codes := e.stableFetch(c3, g, 0); codes[0] != 0 || offs[0] != 4 {
			t.Fatalf("group %s: %d %s, want 4", g, offs[0], codeName(codes[0]))
		}
	}
}

// A marker with a lower producer epoch than the pending offsets' is refused
// (INVALID_PRODUCER_EPOCH, as Apache's log refuses it) and completes nothing.
func TestAMarkerBelowThePendingProducerEpochIsRefused(t *testing.T) {
	e := newEnv(t)
	if code := oneCode(t, e.txnCommitReq(e.c, txnReq("g", 10, 5, -1, "", map[int32]int64{0: 4}))); code != 0 {
		t.Fatal(codeName(code))
	}
	if code := e.marker(e.c, "g", 10, 4, true); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("marker at epoch 4: %s", codeName(code))
	}
	if _, codes := e.stableFetch(e.c, "g", 0); codes[0] != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("still pending: %s", codeName(codes[0]))
	}
	if code := e.marker(e.c, "g", 10, 6, true); code != 0 {
		t.Fatalf("marker at epoch 6: %s", codeName(code))
	}
	if got, _ := e.fetch(e.c, "g", 0); got[0] != 4 {
		t.Fatalf("t/0 = %d, want 4", got[0])
	}
}

// Pending offsets and the group's life, as Apache: OffsetDelete drops them, DeleteGroups
// deletes an Empty group with them, and a group holding only pending offsets is kept by
// the retention check.
func TestPendingOffsetsAndGroupRemoval(t *testing.T) {
	e := newEnv(t)
	e.txnCommit(e.c, "g", 10, map[int32]int64{0: 4})
	e.step(e.cfg.CleanupInterval + e.cfg.OffsetsRetention)
	if _, codes := e.stableFetch(e.c, "g", 0); codes[0] != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("a group with only pending offsets was removed: %s", codeName(codes[0]))
	}
	del := kmsg.NewPtrOffsetDeleteRequest()
	del.Group = "g"
	del.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	if resp, err := e.c.OffsetDelete(ctxT(t), del); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("OffsetDelete: %v %+v", err, resp)
	}
	if _, codes := e.stableFetch(e.c, "g", 0); codes[0] != 0 {
		t.Fatalf("after OffsetDelete: %s", codeName(codes[0]))
	}
	e.txnCommit(e.c, "h", 11, map[int32]int64{0: 4})
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"h"}
	if resp, err := e.c.DeleteGroups(ctxT(t), dg); err != nil || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("DeleteGroups: %v %+v", err, resp)
	}
	if code := e.marker(e.c, "h", 11, 0, true); code != 0 {
		t.Fatal(codeName(code))
	}
	if got, _ := e.fetch(e.start(2), "h", 0); len(got) != 0 {
		t.Fatalf("a deleted group's pending offsets came back: %v", got)
	}
}

func TestTheTransactionIndexLivesOutsideTheGroupDirectories(t *testing.T) {
	e := newEnv(t)
	e.txnCommit(e.c, "g", 10, map[int32]int64{0: 4})
	if _, _, ok := parseDirName(txnDirName); ok {
		t.Fatalf("%s parses as a group directory", txnDirName)
	}
	p := coordinator.Partition("g", e.cfg.OffsetsPartitions)
	if names, err := (storage.OSFS{}).ReadDirNames(filepath.Join(e.dir, txnDirName, fmt.Sprint("p-", p))); err != nil || len(names) != 2 {
		t.Fatalf("index directory: %v %v, want the fence and one producer file", names, err)
	}
	e.marker(e.c, "g", 10, 0, true)
	if names, _ := (storage.OSFS{}).ReadDirNames(filepath.Join(e.dir, txnDirName, fmt.Sprint("p-", p))); len(names) != 1 {
		t.Fatalf("after the marker: %v, want the fence only", names)
	}
}

// A deposed coordinator that recorded a new group in the transaction index and is about to
// create the group when the next coordinator completes the transaction must find the
// group's fence taken: otherwise it would acknowledge pending offsets that no index lists
// any more, which no marker would ever complete. The marker claims the group though it has
// no files.
func TestAMarkerFencesAGroupADeposedCoordinatorIsStillCreating(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	blocking := storage.FaultFS{FS: storage.OSFS{}, Fault: func(op storage.Op, path string) error {
		if op == storage.OpMkdir && strings.Contains(path, dirName("fresh")) && once.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
		return nil
	}}
	e := newEnv(t, func(c *Config) { c.OffsetsPartitions = 1 })
	a := e.start(2, func(c *Config) { c.FS = blocking })
	done := async(t, func(ctx context.Context) (*kmsg.TxnOffsetCommitResponse, error) {
		return a.TxnOffsetCommit(ctx, txnReq("fresh", 10, 0, -1, "", map[int32]int64{0: 4}))
	})
	<-entered // a's index entry is durable and fenced-in; the group does not exist yet
	b := e.start(3)
	if code := e.marker(b, "fresh", 10, 0, true); code != 0 {
		t.Fatalf("marker: %s", codeName(code))
	}
	close(release)
	resp := await(t, done)
	acked := resp.Topics[0].Partitions[0].ErrorCode == 0
	_, codes := e.stableFetch(e.start(4), "fresh", 0)
	if acked || codes[0] == kerr.UnstableOffsetCommit.Code {
		t.Fatalf("the deposed coordinator's TxnOffsetCommit answered %s and left the offset pending (%s) after the marker",
			codeName(resp.Topics[0].Partitions[0].ErrorCode), codeName(codes[0]))
	}
}

// Pending offsets, with what makes them stale, survive the owner's compactions and a
// takeover of the compacted file: the marker at the next coordinator applies exactly what
// Apache's order says.
func TestPendingOffsetsSurviveCompactionAndTakeover(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.compactMin = 1 })
	e.txnCommit(e.c, "g", 10, map[int32]int64{0: 100, 1: 100})
	for i := range 20 {
		e.commit(e.c, "g", "", -1, map[int32]int64{2: int64(i)})
	}
	e.commit(e.c, "g", "", -1, map[int32]int64{1: 50}) // after the pending offset: wins
	for i := range 20 {
		e.commit(e.c, "g", "", -1, map[int32]int64{3: int64(i)})
	}
	_ = e.c.Close()
	b, err := os.ReadFile(filepath.Join(groupDir(e, "g"), logName(1)))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < frameHeaderSize+2 || b[frameHeaderSize+1] != snapshotVersion {
		t.Fatal("the file was not compacted into a version-4 snapshot")
	}
	c := e.start(2)
	if code := e.marker(c, "g", 10, 0, true); code != 0 {
		t.Fatal(codeName(code))
	}
	if got, _ := e.fetch(e.start(3), "g", 0, 1); got[0] != 100 || got[1] != 50 {
		t.Fatalf("offsets %v, want t/0 = 100 (the transaction's), t/1 = 50 (the later commit)", got)
	}
}
