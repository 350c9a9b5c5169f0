package groups

import (
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// feedRecorder applies Config.OffsetsChanged as the broker's view does: the state it
// ends with is what a reader of __consumer_offsets would fold the records into.
type feedRecorder struct {
	mu    sync.Mutex
	state map[string]map[string]int64 // group → "topic/partition" → offset
	calls int
}

func (r *feedRecorder) changed(group string, offsets []CommittedOffset, whole bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.state[group] == nil || whole {
		r.state[group] = map[string]int64{}
	}
	for _, o := range offsets {
		k := o.Topic + "/" + strconv.Itoa(int(o.Partition))
		if o.Deleted {
			delete(r.state[group], k)
		} else {
			r.state[group][k] = o.Offset
		}
	}
}

func (r *feedRecorder) of(group string) map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.state[group])
}

// The change feed tells every acknowledged change of a group's committed offsets — commits,
// OffsetDelete, a deleted topic, expiry, DeleteGroups, and the whole state at a load by the
// next coordinator — so a reader folding it always has exactly what OffsetFetch returns.
func TestTheOffsetsFeedAlwaysFoldsToWhatOffsetFetchReturns(t *testing.T) {
	rec := &feedRecorder{state: map[string]map[string]int64{}}
	e := newEnv(t, func(c *Config) { c.OffsetsChanged = rec.changed })
	check := func(c *Coordinator, step string) {
		t.Helper()
		want := e.committed(c, "g")
		if got := rec.of("g"); !maps.Equal(got, want) {
			t.Fatalf("%s: the feed folds to %v, OffsetFetch says %v", step, got, want)
		}
	}
	e.send(e.c, commitReq("g", "", -1, map[string]map[int32]int64{"t": {0: 10, 1: 11}, "u": {0: 5}}))
	check(e.c, "first commit")
	e.send(e.c, commitReq("g", "", -1, map[string]map[int32]int64{"t": {1: 12}}))
	check(e.c, "second commit")

	calls := rec.calls
	tooLarge := commitReq("g", "", -1, map[string]map[int32]int64{"t": {2: 1}}, string(make([]byte, 5000)))
	e.commitResp(e.c, tooLarge) // OFFSET_METADATA_TOO_LARGE: nothing stored
	if rec.calls != calls {
		t.Fatalf("a refused commit was fed")
	}

	del := kmsg.NewPtrOffsetDeleteRequest()
	del.Group = "g"
	del.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	if resp, err := e.c.OffsetDelete(ctxT(t), del); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("offset delete: %v %+v", err, resp)
	}
	check(e.c, "OffsetDelete")
	if err := e.c.PurgeTopic(ctxT(t), "u", [16]byte{2}); err != nil {
		t.Fatal(err)
	}
	check(e.c, "PurgeTopic")

	// The next coordinator's load tells the whole state; a reader that missed a deletion
	// made meanwhile by the old one is corrected by it.
	rec.mu.Lock()
	rec.state["g"]["t/3"] = 99 // a key the new coordinator does not have
	rec.mu.Unlock()
	_ = e.c.Close()
	c2 := e.start(2)
	check(c2, "a load at the next epoch")

	// The new coordinator arms its retention timer on the fake clock when it loads the
	// group, on a goroutine of its own: a step taken before that is not seen by it, so the
	// clock goes on a cleanup interval at a time (under load CI once stepped first). The
	// wall-clock bound only catches an expiry that never comes.
	e.step(e.cfg.OffsetsRetention + e.cfg.CleanupInterval)
	for deadline := time.Now().Add(time.Minute); len(rec.of("g")) != 0; e.step(e.cfg.CleanupInterval) {
		if time.Now().After(deadline) {
			t.Fatalf("after every offset expired the feed folds to %v, want nothing", rec.of("g"))
		}
	}

	e.send(c2, commitReq("h", "", -1, map[string]map[int32]int64{"t": {0: 1}}))
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"h"}
	if resp, err := c2.DeleteGroups(ctxT(t), dg); err != nil || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete groups: %v %+v", err, resp)
	}
	if got := rec.of("h"); len(got) != 0 {
		t.Fatalf("after DeleteGroups the feed folds to %v, want nothing", got)
	}
}
