package groups

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	testclock "k8s.io/utils/clock/testing"

	"github.com/paddock-dev/paddock/broker/storage"
)

// testTopics is a Topics the tests change at will (the broker's view, in miniature).
type testTopics struct {
	mu sync.RWMutex
	m  map[string]topicInfo
}

type topicInfo struct {
	id         [16]byte
	partitions int32
}

func newTestTopics() *testTopics {
	return &testTopics{m: map[string]topicInfo{
		"t":   {id: [16]byte{1}, partitions: 4},
		"u":   {id: [16]byte{2}, partitions: 2},
		"big": {id: [16]byte{3}, partitions: 64},
	}}
}

func (t *testTopics) Topic(name string) ([16]byte, int32, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	i, ok := t.m[name]
	return i.id, i.partitions, ok
}

func (t *testTopics) TopicNames() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]string, 0, len(t.m))
	for n := range t.m {
		out = append(out, n)
	}
	return out
}

func (t *testTopics) TopicByID(id [16]byte) (string, int32, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for n, i := range t.m {
		if i.id == id {
			return n, i.partitions, true
		}
	}
	return "", 0, false
}

func (t *testTopics) set(name string, id [16]byte, partitions int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if partitions == 0 {
		delete(t.m, name)
		return
	}
	t.m[name] = topicInfo{id, partitions}
}

// env is one coordinator over a directory, with a fake clock.
type env struct {
	t      *testing.T
	dir    string
	clock  *testclock.FakeClock
	topics *testTopics
	c      *Coordinator
	cfg    Config
}

var epoch0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func allGroups(string) bool { return true }

// newEnv starts a coordinator owning every group at epoch 1, with Apache's defaults (initial
// rebalance delay 3 s).
func newEnv(t *testing.T, tweak ...func(*Config)) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), clock: testclock.NewFakeClock(epoch0), topics: newTestTopics()}
	e.cfg = DefaultConfig()
	e.cfg.Dir, e.cfg.Topics, e.cfg.Clock = e.dir, e.topics, e.clock
	for _, f := range tweak {
		f(&e.cfg)
	}
	e.c = e.start(1)
	return e
}

// start opens another coordinator on the same directory (a restart, or a second broker) with
// view epoch.
func (e *env) start(epoch int32, tweak ...func(*Config)) *Coordinator {
	e.t.Helper()
	cfg := e.cfg
	for _, f := range tweak {
		f(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	c.SetView(epoch, allGroups)
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// async runs a request in the background; the result arrives on the channel.
func async[T any](t *testing.T, f func(ctx context.Context) (T, error)) <-chan T {
	t.Helper()
	ch := make(chan T, 1)
	ctx := ctxT(t)
	go func() {
		v, err := f(ctx)
		if err != nil && ctx.Err() == nil {
			t.Errorf("request failed: %v", err)
		}
		ch <- v
	}()
	return ch
}

// await waits (real time) for an answer that must come.
func await[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
		panic("unreachable")
	}
}

// pending asserts that no answer arrives for a while: the request is waiting.
func pending[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("answered while it should wait: %+v", v)
	case <-time.After(50 * time.Millisecond):
	}
}

// step moves the fake clock and lets the group goroutines react.
func (e *env) step(d time.Duration) {
	e.clock.Step(d)
	time.Sleep(10 * time.Millisecond)
}

// joinReq builds a consumer-protocol JoinGroup.
func joinReq(v int16, group, member string, protocols ...string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = v
	r.Group, r.MemberID = group, member
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 30000
	r.ProtocolType = "consumer"
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	for _, p := range protocols {
		r.Protocols = append(r.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: subscription("t")})
	}
	return r
}

// subscription is a ConsumerProtocolSubscription v0 for topics.
func subscription(topics ...string) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(topics)))
	for _, t := range topics {
		b = binary.BigEndian.AppendUint16(b, uint16(len(t)))
		b = append(b, t...)
	}
	return binary.BigEndian.AppendUint32(b, 0xffffffff) // null user data
}

// settle waits until the group goroutine has run the request just sent (or it was answered
// without one), so a test moving the fake clock next moves it after the request.
func settle[T any](t *testing.T, c *Coordinator, before int64, ch <-chan T) {
	t.Helper()
	for range 5000 {
		if c.handled.Load() > before || len(ch) > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("request not handled within 5s")
}

func (e *env) join(c *Coordinator, req *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	before := c.handled.Load()
	ch := async(e.t, func(ctx context.Context) (*kmsg.JoinGroupResponse, error) {
		return c.JoinGroup(ctx, Client{ID: "client", Host: "/127.0.0.1"}, req)
	})
	settle(e.t, c, before, ch)
	return ch
}

func (e *env) sync(c *Coordinator, group, member string, gen int32, assign map[string][]byte) <-chan *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 5
	r.Group, r.MemberID, r.Generation = group, member, gen
	r.ProtocolType, r.Protocol = strp("consumer"), strp("range")
	for m, a := range assign {
		r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: a})
	}
	before := c.handled.Load()
	ch := async(e.t, func(ctx context.Context) (*kmsg.SyncGroupResponse, error) { return c.SyncGroup(ctx, r) })
	settle(e.t, c, before, ch)
	return ch
}

func (e *env) heartbeat(c *Coordinator, group, member string, gen int32, instance *string) int16 {
	e.t.Helper()
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group, r.MemberID, r.Generation, r.InstanceID = group, member, gen, instance
	resp, err := c.Heartbeat(ctxT(e.t), r)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.ErrorCode
}

// joinDynamic joins a fresh dynamic member with v5 (MEMBER_ID_REQUIRED, then the real join)
// and returns the channel of its second JoinGroup.
func (e *env) joinDynamic(c *Coordinator, group string, protocols ...string) (string, <-chan *kmsg.JoinGroupResponse) {
	e.t.Helper()
	first := await(e.t, e.join(c, joinReq(5, group, "", protocols...)))
	if first.ErrorCode != kerr.MemberIDRequired.Code || first.MemberID == "" {
		e.t.Fatalf("first join: error %d member %q, want MEMBER_ID_REQUIRED with an id", first.ErrorCode, first.MemberID)
	}
	return first.MemberID, e.join(c, joinReq(5, group, first.MemberID, protocols...))
}

// stableGroup makes group Stable with n dynamic members; it returns them, the leader first,
// and the generation.
func (e *env) stableGroup(c *Coordinator, group string, n int) ([]string, int32) {
	e.t.Helper()
	var ids []string
	var chans []<-chan *kmsg.JoinGroupResponse
	for range n {
		id, ch := e.joinDynamic(c, group)
		ids = append(ids, id)
		chans = append(chans, ch)
	}
	var gen int32
	var leader string
	for i, r := range e.collect(chans) {
		if r.ErrorCode != 0 {
			e.t.Fatalf("join %d: error %d", i, r.ErrorCode)
		}
		gen, leader = r.Generation, r.LeaderID
	}
	assign := map[string][]byte{}
	for _, id := range ids {
		assign[id] = []byte("assignment of " + id)
	}
	var syncs []<-chan *kmsg.SyncGroupResponse
	for _, id := range ids {
		if id == leader {
			continue
		}
		syncs = append(syncs, e.sync(c, group, id, gen, nil))
	}
	syncs = append(syncs, e.sync(c, group, leader, gen, assign))
	for _, ch := range syncs {
		if r := await(e.t, ch); r.ErrorCode != 0 {
			e.t.Fatalf("sync: error %d", r.ErrorCode)
		}
	}
	if st := e.describe(c, group).State; st != "Stable" {
		e.t.Fatalf("group %s is %s, want Stable", group, st)
	}
	for i, id := range ids {
		if id == leader {
			ids[0], ids[i] = ids[i], ids[0]
		}
	}
	return ids, gen
}

// collect steps the clock a second at a time until every JoinGroup is answered (the initial
// rebalance delay runs out).
func (e *env) collect(chans []<-chan *kmsg.JoinGroupResponse) []*kmsg.JoinGroupResponse {
	e.t.Helper()
	out := make([]*kmsg.JoinGroupResponse, len(chans))
	for range 120 {
		done := true
		for i, ch := range chans {
			if out[i] != nil {
				continue
			}
			select {
			case r := <-ch:
				out[i] = r
			case <-time.After(20 * time.Millisecond):
				done = false
			}
		}
		if done {
			return out
		}
		e.step(time.Second)
	}
	e.t.Fatal("joins not answered after 120 s of fake time")
	return nil
}

// waitState polls until group is in state (a request handed to another goroutine got there).
func (e *env) waitState(group, state string) {
	e.t.Helper()
	for range 500 {
		if e.describe(e.c, group).State == state {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	e.t.Fatalf("group %s never reached %s", group, state)
}

func (e *env) describe(c *Coordinator, group string) kmsg.DescribeGroupsResponseGroup {
	e.t.Helper()
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version = 5
	r.Groups = []string{group}
	resp, err := c.DescribeGroups(ctxT(e.t), r)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.Groups[0]
}

// commitReq is a v8 OffsetCommit of offsets (topic → partition → offset) with metadata meta.
func commitReq(group, member string, gen int32, offsets map[string]map[int32]int64, meta ...string) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.MemberID, r.Generation = 8, group, member, gen
	for topic, parts := range offsets {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		for p, o := range parts {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, o
			if len(meta) > 0 {
				rp.Metadata = strp(meta[0])
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// commitResp sends r; a Go error (a dropped request) fails the test.
func (e *env) commitResp(c *Coordinator, r *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	e.t.Helper()
	resp, err := c.OffsetCommit(ctxT(e.t), r)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// firstTopicCodes is the per-partition codes of a commit's first topic.
func firstTopicCodes(resp *kmsg.OffsetCommitResponse) map[int32]int16 {
	out := map[int32]int16{}
	for _, p := range resp.Topics[0].Partitions {
		out[p.Partition] = p.ErrorCode
	}
	return out
}

// commit commits offsets (topic "t", partition → offset) and returns the per-partition codes.
func (e *env) commit(c *Coordinator, group, member string, gen int32, offsets map[int32]int64) map[int32]int16 {
	e.t.Helper()
	return firstTopicCodes(e.commitResp(c, commitReq(group, member, gen, map[string]map[int32]int64{"t": offsets}, "m")))
}

// offsetFetch is a v8 OffsetFetch of everything group committed.
func (e *env) offsetFetch(c *Coordinator, group string) kmsg.OffsetFetchResponseGroup {
	e.t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group}}
	resp, err := c.OffsetFetch(ctxT(e.t), r)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.Groups[0]
}

// fetch reads committed offsets of topic "t" (v8, one group; all partitions when none given).
func (e *env) fetch(c *Coordinator, group string, parts ...int32) (map[int32]int64, int16) {
	e.t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	if len(parts) > 0 {
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: parts}}
	}
	r.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	resp, err := c.OffsetFetch(ctxT(e.t), r)
	if err != nil {
		e.t.Fatal(err)
	}
	g := resp.Groups[0]
	out := map[int32]int64{}
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			if t.Topic == "t" && p.Offset >= 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, g.ErrorCode
}

// faultFS is a storage.FaultFS whose fault function the test swaps at will.
type faultFS struct {
	storage.FaultFS
	mu sync.Mutex
	f  func(op storage.Op, path string) error
}

func newFaultFS() *faultFS {
	f := &faultFS{}
	f.FaultFS = storage.FaultFS{FS: storage.OSFS{}, Fault: func(op storage.Op, path string) error {
		f.mu.Lock()
		fn := f.f
		f.mu.Unlock()
		if fn == nil {
			return nil
		}
		return fn(op, path)
	}}
	return f
}

func (f *faultFS) set(fn func(op storage.Op, path string) error) {
	f.mu.Lock()
	f.f = fn
	f.mu.Unlock()
}

func codeName(c int16) string {
	if c == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(c).Error()
}
