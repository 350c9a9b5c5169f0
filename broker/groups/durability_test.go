package groups

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/storage"
)

func TestCommitsSurviveARestartAtAHigherEpoch(t *testing.T) {
	e := newEnv(t)
	ids, gen := e.stableGroup(e.c, "g", 1)
	e.commit(e.c, "g", ids[0], gen, map[int32]int64{0: 10, 1: 11})
	e.commit(e.c, "g", ids[0], gen, map[int32]int64{1: 21, 3: 23})
	e.commit(e.c, "simple", "", -1, map[int32]int64{2: 7})
	_ = e.c.Close()

	c2 := e.start(2)
	got, code := e.fetch(c2, "g")
	if code != 0 || len(got) != 3 || got[0] != 10 || got[1] != 21 || got[3] != 23 {
		t.Fatalf("after restart: %v %s", got, codeName(code))
	}
	if got, _ := e.fetch(c2, "simple"); got[2] != 7 {
		t.Fatalf("simple group after restart: %v", got)
	}
	// Membership did not survive (it only costs a rejoin), the protocol type did.
	d := e.describe(c2, "g")
	if d.State != "Empty" || d.ProtocolType != "consumer" || len(d.Members) != 0 {
		t.Fatalf("after restart: %+v", d)
	}
}

func TestRestartAtTheSameEpochIsNotCoordinatorUntilTheEpochMoves(t *testing.T) {
	e := newEnv(t)
	e.commit(e.c, "g", "", -1, map[int32]int64{0: 1})
	_ = e.c.Close()
	c2 := e.start(1) // a restarted broker the operator has not given a new epoch
	if got := e.commit(c2, "g", "", -1, map[int32]int64{0: 2})[0]; got != kerr.NotCoordinator.Code {
		t.Fatalf("commit at a held epoch: %s, want NOT_COORDINATOR", codeName(got))
	}
	if _, code := e.fetch(c2, "g", 0); code != kerr.NotCoordinator.Code {
		t.Fatalf("fetch at a held epoch: %s", codeName(code))
	}
	c2.SetView(2, allGroups)
	if got, code := e.fetch(c2, "g", 0); code != 0 || got[0] != 1 {
		t.Fatalf("after the epoch moved: %v %s", got, codeName(code))
	}
}

func TestDeposedCoordinatorCommitIsRefusedAndNeverVisible(t *testing.T) {
	e := newEnv(t)
	old := e.c
	ids, gen := e.stableGroup(old, "g", 1)
	e.commit(old, "g", ids[0], gen, map[int32]int64{0: 5})

	// Another broker takes the group at epoch 2 while the old one still runs on its view.
	next := e.start(2)
	if got, _ := e.fetch(next, "g", 0); got[0] != 5 {
		t.Fatalf("new coordinator loaded %v", got)
	}
	if got := e.commit(old, "g", ids[0], gen, map[int32]int64{0: 6})[0]; got != kerr.NotCoordinator.Code {
		t.Fatalf("deposed commit: %s, want NOT_COORDINATOR", codeName(got))
	}
	// The deposed coordinator dropped the group: its members are gone, it is not served.
	if code := e.heartbeat(old, "g", ids[0], gen, nil); code != kerr.NotCoordinator.Code {
		t.Fatalf("deposed heartbeat: %s, want NOT_COORDINATOR", codeName(code))
	}
	if _, code := e.fetch(old, "g", 0); code != kerr.NotCoordinator.Code {
		t.Fatalf("deposed fetch: %s", codeName(code))
	}
	if got, code := e.fetch(next, "g", 0); code != 0 || got[0] != 5 {
		t.Fatalf("the new coordinator has %v %s, want the acknowledged 5", got, codeName(code))
	}
	if got, code := e.fetch(e.start(3), "g", 0); code != 0 || got[0] != 5 {
		t.Fatalf("a later coordinator has %v %s, want the acknowledged 5", got, codeName(code))
	}
}

func TestAKeptGroupWhoseFenceMovedIsDroppedOnTheNextView(t *testing.T) {
	e := newEnv(t)
	old := e.c
	ids, gen := e.stableGroup(old, "g", 1)
	next := e.start(5)
	e.fetch(next, "g") // next claims epoch 5
	// The old coordinator's view jumps from 1 to 4, still owning g: it did not see the epochs
	// where g was elsewhere, but its fence check on the view change notices.
	old.SetView(4, allGroups)
	for range 200 {
		if code := e.heartbeat(old, "g", ids[0], gen, nil); code == kerr.NotCoordinator.Code {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the deposed coordinator kept serving the group's members")
}

func TestViewChangeUnloadsGroupsAndAnswersWaitingRequests(t *testing.T) {
	e := newEnv(t)
	ids, _ := e.stableGroup(e.c, "g", 2)
	j := e.join(e.c, joinReq(5, "g", ids[0]))
	pending(t, j)
	if n := e.c.Owned(); n != 1 {
		t.Fatalf("Owned %d, want 1", n)
	}
	e.c.SetView(2, func(string) bool { return false })
	if r := await(t, j); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("waiting join: %s, want NOT_COORDINATOR", codeName(r.ErrorCode))
	}
	for range 200 {
		if e.c.Owned() == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := e.c.Owned(); n != 0 {
		t.Fatalf("Owned %d after the view moved every group away", n)
	}
	if code := e.heartbeat(e.c, "g", ids[1], 1, nil); code != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat after the move: %s", codeName(code))
	}
}

func TestCloseAnswersWaitingRequestsAndLaterOnesAreCoordinatorNotAvailable(t *testing.T) {
	e := newEnv(t)
	ids, _ := e.stableGroup(e.c, "g", 2)
	j := e.join(e.c, joinReq(5, "g", ids[0]))
	pending(t, j)
	_ = e.c.Close()
	_ = e.c.Close()
	if r := await(t, j); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("waiting join at Close: %s", codeName(r.ErrorCode))
	}
	if code := e.heartbeat(e.c, "g", ids[1], 1, nil); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("after Close: %s", codeName(code))
	}
}

func groupDir(e *env, id string) string { return filepath.Join(e.dir, dirName(id)) }

func logFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range ents {
		if strings.HasSuffix(de.Name(), logSuffix) {
			out = append(out, de.Name())
		}
	}
	slices.Sort(out)
	return out
}

func TestTornTailIsCutAndEveryWholeCommitKept(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		e.commit(e.c, "g", "", -1, map[int32]int64{int32(i): int64(100 + i)})
	}
	_ = e.c.Close()
	// The next frame was being written when the process died: a header and half a payload.
	path := filepath.Join(groupDir(e, "g"), logName(1))
	torn := frame(commitPayload("", []offsetEntry{{tp: tp{"t", 3}, committed: committed{offset: 999}}}))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(torn[:len(torn)-3]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	c2 := e.start(2)
	got, _ := e.fetch(c2, "g")
	if len(got) != 3 || got[0] != 100 || got[2] != 102 {
		t.Fatalf("after a torn tail: %v, want the three whole commits", got)
	}
	e.commit(c2, "g", "", -1, map[int32]int64{3: 103})
	_ = c2.Close()
	if got, _ := e.fetch(e.start(3), "g"); len(got) != 4 || got[3] != 103 {
		t.Fatalf("after another takeover: %v", got)
	}
}

func TestAFileWithoutACompleteSnapshotIsSkipped(t *testing.T) {
	e := newEnv(t)
	e.commit(e.c, "g", "", -1, map[int32]int64{0: 42})
	_ = e.c.Close()
	// A coordinator at epoch 5 claimed and died while writing its snapshot.
	s, err := openStore(storage.OSFS{}, e.dir, "g", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.claim(5); err != nil {
		t.Fatal(err)
	}
	snap := encodeSnapshot("g", 5, newDurable())
	if err := os.WriteFile(filepath.Join(groupDir(e, "g"), logName(5)), snap[:len(snap)-1], 0o644); err != nil {
		t.Fatal(err)
	}

	c := e.start(6)
	if got, _ := e.fetch(c, "g", 0); got[0] != 42 {
		t.Fatalf("loaded %v, want the epoch-1 file's 42", got)
	}
}

func TestSupersededFilesArePruned(t *testing.T) {
	e := newEnv(t)
	e.commit(e.c, "g", "", -1, map[int32]int64{0: 1})
	_ = e.c.Close()
	for epoch := int32(2); epoch <= 4; epoch++ {
		c := e.start(epoch)
		e.commit(c, "g", "", -1, map[int32]int64{0: int64(epoch)})
		_ = c.Close()
	}
	if got := logFiles(t, groupDir(e, "g")); !slices.Equal(got, []string{logName(3), logName(4)}) {
		t.Fatalf("files %v, want the last takeover's source and its own", got)
	}
}

func TestStorageErrorsAcknowledgeNothing(t *testing.T) {
	for _, op := range []storage.Op{storage.OpSync, storage.OpWrite} {
		t.Run(string(op), func(t *testing.T) {
			ffs := newFaultFS()
			e := newEnv(t, func(c *Config) { c.FS = ffs })
			e.commit(e.c, "g", "", -1, map[int32]int64{0: 1})
			ffs.set(func(o storage.Op, path string) error {
				if o == op && strings.HasSuffix(path, logSuffix) {
					return syscall.EIO
				}
				return nil
			})
			if got := e.commit(e.c, "g", "", -1, map[int32]int64{0: 2})[0]; got != kerr.NotCoordinator.Code {
				t.Fatalf("commit on a failing disk: %s, want NOT_COORDINATOR", codeName(got))
			}
			ffs.set(nil)
			// The disk is back: the group reloads its own file (cutting what the failed
			// write left) and the failed commit is not there.
			if got, code := e.fetch(e.c, "g", 0); code != 0 || got[0] != 1 {
				t.Fatalf("after the failure: %v %s, want the acknowledged 1", got, codeName(code))
			}
			if got := e.commit(e.c, "g", "", -1, map[int32]int64{0: 3})[0]; got != 0 {
				t.Fatalf("commit after recovery: %s", codeName(got))
			}
			_ = e.c.Close()
			if got, _ := e.fetch(e.start(2), "g", 0); got[0] != 3 {
				t.Fatalf("after a takeover: %v", got)
			}
		})
	}
}

func TestRequestsWhileAGroupLoadsAreLoadInProgress(t *testing.T) {
	ffs := newFaultFS()
	e := newEnv(t, func(c *Config) { c.FS = ffs })
	if code := e.commit(e.c, "g", "", -1, map[int32]int64{0: 1})[0]; code != 0 {
		t.Fatalf("commit: %s", codeName(code))
	}
	_ = e.c.Close()
	release := make(chan struct{})
	ffs.set(func(o storage.Op, path string) error {
		if o == storage.OpOpen && strings.HasSuffix(path, logName(1)) {
			<-release
		}
		return nil
	})
	c2 := e.start(2, func(c *Config) { c.LoadWait = 10 * time.Millisecond })
	if _, code := e.fetch(c2, "g", 0); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("fetch: %s", codeName(code))
	}
	if r := await(t, e.join(c2, joinReq(5, "g", ""))); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("join: %s", codeName(r.ErrorCode))
	}
	if code := e.heartbeat(c2, "g", "m", 1, nil); code != 0 {
		t.Fatalf("heartbeat: %s, want NONE (answered blindly while loading)", codeName(code))
	}
	if r := await(t, e.sync(c2, "g", "m", 1, nil)); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("sync: %s, want REBALANCE_IN_PROGRESS", codeName(r.ErrorCode))
	}
	r := kmsg.NewPtrListGroupsRequest()
	if resp, _ := c2.ListGroups(ctxT(t), r); resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("list: %s", codeName(resp.ErrorCode))
	}
	close(release)
	ffs.set(nil)
	for range 200 {
		if got, code := e.fetch(c2, "g", 0); code == 0 {
			if got[0] != 1 {
				t.Fatalf("loaded %v", got)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the group never finished loading")
}

func TestScanTakesOverGroupsWithOffsetsAndListsThem(t *testing.T) {
	e := newEnv(t)
	old := e.c
	ids, gen := e.stableGroup(old, "busy", 1)
	e.commit(old, "busy", ids[0], gen, map[int32]int64{0: 1})
	e.commit(old, "quiet", "", -1, map[int32]int64{0: 2})
	e.stableGroup(old, "nocommits", 1)

	next := e.start(2)
	var got map[string]string
	for range 200 {
		resp, _ := next.ListGroups(ctxT(t), kmsg.NewPtrListGroupsRequest())
		got = map[string]string{}
		for _, g := range resp.Groups {
			got[g.Group] = g.GroupState + "/" + g.ProtocolType
		}
		if resp.ErrorCode == 0 && len(got) == 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got["busy"] != "Empty/consumer" || got["quiet"] != "Empty/" || len(got) != 2 {
		t.Fatalf("listed %v, want the two groups with offsets", got)
	}
	// The scan claimed them: the old coordinator is fenced without anyone asking the new one.
	if got := e.commit(old, "quiet", "", -1, map[int32]int64{0: 3})[0]; got != kerr.NotCoordinator.Code {
		t.Fatalf("old coordinator's commit after the scan: %s", codeName(got))
	}
}

func TestPurgeTopicRemovesItsOffsetsDurably(t *testing.T) {
	e := newEnv(t)
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.Generation = 8, "g", -1
	r.Topics = []kmsg.OffsetCommitRequestTopic{
		{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}},
		{Topic: "u", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 2}}},
	}
	if _, err := e.c.OffsetCommit(ctxT(t), r); err != nil {
		t.Fatal(err)
	}
	if err := e.c.PurgeTopic(ctxT(t), "u", [16]byte{2}); err != nil {
		t.Fatal(err)
	}
	_ = e.c.Close()
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version, f.Group = 7, "g"
	resp, _ := e.start(2).OffsetFetch(ctxT(t), f)
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != "t" {
		t.Fatalf("after purging u and a takeover: %+v", resp.Topics)
	}
}

func TestOffsetsOfARecreatedTopicNeverResurface(t *testing.T) {
	e := newEnv(t)
	e.commit(e.c, "g", "", -1, map[int32]int64{0: 50})
	// t is deleted and re-created (a new id) and nobody purged the group.
	e.topics.set("t", [16]byte{9}, 4)
	if got, _ := e.fetch(e.c, "g", 0); len(got) != 0 {
		t.Fatalf("old incarnation's offset visible: %v", got)
	}
	if got, _ := e.fetch(e.c, "g"); len(got) != 0 {
		t.Fatalf("old incarnation's offset listed: %v", got)
	}
	e.commit(e.c, "g", "", -1, map[int32]int64{0: 3})
	if got, _ := e.fetch(e.c, "g", 0); got[0] != 3 {
		t.Fatalf("new incarnation's offset: %v", got)
	}
}

func TestOpenStoreWithoutCreateDoesNotCreate(t *testing.T) {
	dir := t.TempDir()
	if _, err := openStore(storage.OSFS{}, dir, "g", false); !errors.Is(err, errNoGroup) {
		t.Fatalf("%v, want errNoGroup", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("created %v", ents)
	}
}

func TestReadOnlyRequestsToUnknownGroupsLeaveNoFiles(t *testing.T) {
	e := newEnv(t)
	e.describe(e.c, "ghost")
	e.fetch(e.c, "ghost", 0)
	e.heartbeat(e.c, "ghost", "m", 1, nil)
	d := kmsg.NewPtrDeleteGroupsRequest()
	d.Groups = []string{"ghost"}
	if _, err := e.c.DeleteGroups(ctxT(t), d); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(e.dir); len(ents) != 0 {
		t.Fatalf("files for a group nobody created: %v", ents)
	}
	for range 200 {
		if e.c.Owned() == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("Owned %d: goroutines of groups that do not exist linger", e.c.Owned())
}

// TestTheScanTakesOverAGroupWhoseDirectoryNameIsAHash: a group id too long to escape into a
// directory name is stored under a hash; the scan reads the id from the snapshot's header.
func TestTheScanTakesOverAGroupWhoseDirectoryNameIsAHash(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("long-group-", 40)
	if code := e.commit(e.c, long, "", -1, map[int32]int64{0: 4})[0]; code != 0 {
		t.Fatal(codeName(code))
	}
	if name := dirName(long); !strings.HasPrefix(name, "h-") {
		t.Fatalf("directory %q is not a hash", name)
	}
	_ = e.c.Close()
	next := e.start(2)
	for range 200 {
		resp, _ := next.ListGroups(ctxT(t), kmsg.NewPtrListGroupsRequest())
		if resp.ErrorCode == 0 && len(resp.Groups) == 1 && resp.Groups[0].Group == long {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the scan did not take over the group stored under a hashed name")
}

// TestALoaderWithAStaleListingFindsTheNewestFileThroughTheFence: on a network file system a
// listing may be served from a cache. Coordinator 1 (node a) commits; coordinator 2 (node b)
// takes the group over and commits again; coordinator 3, back on node a whose cached listing
// of the group's directory still shows only file 1, must load file 2 — reached by name from
// the claims on the group's fence — never file 1's older offset.
func TestALoaderWithAStaleListingFindsTheNewestFileThroughTheFence(t *testing.T) {
	sim := storage.NewNFSSim(storage.NFSSimOptions{Staleness: time.Hour})
	a, b := sim.Client(), sim.Client()
	e := newEnv(t, func(c *Config) { c.FS = a })
	e.send(e.c, commitReq("g", "", -1, map[string]map[int32]int64{"t": {0: 1}}))
	_ = e.c.Close()
	c2 := e.start(2, func(c *Config) { c.FS = b })
	e.send(c2, commitReq("g", "", -1, map[string]map[int32]int64{"t": {0: 2}}))
	_ = c2.Close()
	names, err := a.ReadDirNames(groupDir(e, "g"))
	if err != nil || slices.Contains(names, logName(2)) {
		t.Fatalf("node a's listing of the group is not stale (%v, %v): the test proves nothing", names, err)
	}
	c3 := e.start(3, func(c *Config) { c.FS = a })
	if got := e.committed(c3, "g"); got["t/0"] != 2 {
		t.Fatalf("coordinator 3 with a stale listing loaded %v, want t/0 = 2 (coordinator 2's commit)", got)
	}
}
