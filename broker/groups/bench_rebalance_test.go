package groups

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The rebalance benchmark (docs/groups.md "Measurements"): 100 members join a group of one
// 1,000-partition topic until every partition is assigned, then one member leaves until the
// group is stable again — with the classic protocol (JoinGroup/SyncGroup, the leader assigning
// ranges) and the consumer protocol (heartbeats, the coordinator assigning), in one run, on the
// real clock, through the coordinator's API (no network: the protocols' own rounds and the
// coordinator's cost). Members behave as clients do: a classic member rejoins when its
// heartbeat says REBALANCE_IN_PROGRESS; a consumer-protocol member heartbeats every interval
// the coordinator gives it, and at once after giving partitions up (kgo does the same).

const (
	benchMembers    = 100
	benchPartitions = 1000
)

func rebalanceCoordinator(b *testing.B, tweak func(*Config)) *Coordinator {
	b.Helper()
	topics := newTestTopics()
	topics.set("wide", [16]byte{0x77}, benchPartitions)
	cfg := DefaultConfig()
	cfg.Dir, cfg.Topics = b.TempDir(), topics
	tweak(&cfg)
	c, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	c.SetView(1, allGroups)
	return c
}

func BenchmarkRebalance(b *testing.B) {
	for _, interval := range []time.Duration{5 * time.Second, 500 * time.Millisecond} {
		b.Run(fmt.Sprintf("consumer/heartbeat=%v", interval), func(b *testing.B) {
			for range b.N {
				join, leave := consumerRebalance(b, interval)
				b.ReportMetric(join.Seconds(), "join-s")
				b.ReportMetric(leave.Seconds(), "leave-s")
			}
		})
	}
	// Apache's initial rebalance delay: a classic group's first generation waits for it, and
	// again while members keep arriving (an initial delay of 0 would complete a generation with
	// the first member and rebalance once per arrival instead).
	for _, delay := range []time.Duration{3 * time.Second} {
		b.Run(fmt.Sprintf("classic/initial-delay=%v", delay), func(b *testing.B) {
			for range b.N {
				join, leave := classicRebalance(b, delay)
				b.ReportMetric(join.Seconds(), "join-s")
				b.ReportMetric(leave.Seconds(), "leave-s")
			}
		})
	}
}

// benchMember is one simulated consumer-protocol client.
type benchMember struct {
	id    string
	epoch int32
	held  pset
	stop  chan struct{}
	done  chan struct{}
}

func consumerRebalance(b *testing.B, interval time.Duration) (join, leave time.Duration) {
	c := rebalanceCoordinator(b, func(cfg *Config) { cfg.ConsumerHeartbeatInterval = interval })
	ctx := context.Background()
	var mu sync.Mutex
	owned := map[string]int{} // member → partitions held, as the clients see it
	changed := make(chan struct{}, 1)
	total := func() (sum int) {
		for _, n := range owned {
			sum += n
		}
		return sum
	}
	run := func(m *benchMember) {
		defer close(m.done)
		for {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, "wide-group", m.id, m.epoch
			r.RebalanceTimeoutMillis, r.SubscribedTopicNames = 60000, []string{"wide"}
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			for _, t := range byTopicID(m.held) {
				r.Topics = append(r.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.id, Partitions: t.partitions})
			}
			resp, err := c.ConsumerGroupHeartbeat(ctx, Client{ID: m.id}, r)
			if err != nil || resp.ErrorCode != 0 {
				b.Errorf("heartbeat of %s: %v %d", m.id, err, resp.ErrorCode)
				return
			}
			m.epoch = resp.MemberEpoch
			gaveUp := false
			if resp.Assignment != nil {
				next := pset{}
				for _, t := range resp.Assignment.Topics {
					for _, p := range t.Partitions {
						next[tpid{t.TopicID, p}] = struct{}{}
					}
				}
				gaveUp = len(m.held.minus(next)) > 0
				m.held = next
				mu.Lock()
				owned[m.id] = len(next)
				mu.Unlock()
				select {
				case changed <- struct{}{}:
				default:
				}
			}
			wait := time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond
			if gaveUp {
				wait = 0 // tell the coordinator at once
			}
			select {
			case <-m.stop:
				return
			case <-time.After(wait):
			}
		}
	}
	stable := func() bool {
		d, err := c.ConsumerGroupDescribe(ctx, &kmsg.ConsumerGroupDescribeRequest{Version: 1, Groups: []string{"wide-group"}})
		return err == nil && d.Groups[0].State == "Stable"
	}
	waitAll := func(members int) {
		for {
			mu.Lock()
			done := total() == benchPartitions && len(owned) == members
			mu.Unlock()
			if done && stable() {
				return
			}
			select {
			case <-changed:
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	ms := make([]*benchMember, benchMembers)
	start := time.Now()
	for i := range ms {
		ms[i] = &benchMember{id: fmt.Sprintf("member-%03d", i), held: pset{}, stop: make(chan struct{}), done: make(chan struct{})}
		go run(ms[i])
	}
	waitAll(benchMembers)
	join = time.Since(start)

	start = time.Now()
	gone := ms[benchMembers/2]
	close(gone.stop)
	<-gone.done
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, "wide-group", gone.id, -1
	if resp, err := c.ConsumerGroupHeartbeat(ctx, Client{}, r); err != nil || resp.ErrorCode != 0 {
		b.Fatalf("leave: %v %+v", err, resp)
	}
	mu.Lock()
	delete(owned, gone.id)
	mu.Unlock()
	waitAll(benchMembers - 1)
	leave = time.Since(start)
	for _, m := range ms {
		if m != gone {
			close(m.stop)
			<-m.done
		}
	}
	return join, leave
}

// rangeAssign is a classic leader's range assignment of the one topic, as
// ConsumerProtocolAssignment v0 bytes per member.
func rangeAssign(members []string) map[string][]byte {
	out := map[string][]byte{}
	per, extra := benchPartitions/len(members), benchPartitions%len(members)
	next := int32(0)
	for i, id := range members {
		n := per
		if i < extra {
			n++
		}
		b := binary.BigEndian.AppendUint16(nil, 0)
		b = binary.BigEndian.AppendUint32(b, 1)
		b = binary.BigEndian.AppendUint16(b, 4)
		b = append(b, "wide"...)
		b = binary.BigEndian.AppendUint32(b, uint32(n))
		for range n {
			b = binary.BigEndian.AppendUint32(b, uint32(next))
			next++
		}
		out[id] = binary.BigEndian.AppendUint32(b, 0xffffffff) // no user data
	}
	return out
}

func classicRebalance(b *testing.B, delay time.Duration) (join, leave time.Duration) {
	c := rebalanceCoordinator(b, func(cfg *Config) { cfg.InitialRebalanceDelay = delay })
	ctx := context.Background()
	meta := subscription("wide")
	// rebalance runs one classic round for every member in ids (each id "" for a new member)
	// and returns the member ids once every member has its assignment.
	rebalance := func(ids []string) []string {
		type joined struct {
			resp *kmsg.JoinGroupResponse
			err  error
		}
		out := make([]string, len(ids))
		var wg sync.WaitGroup
		results := make([]joined, len(ids))
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := joinReq(3, "wide-group", id)
				r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 45000, 60000
				r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta}}
				resp, err := c.JoinGroup(ctx, Client{ID: "bench"}, r)
				results[i] = joined{resp, err}
			}()
		}
		wg.Wait()
		gen := int32(-1)
		var leader string
		var members []string
		for i, j := range results {
			if j.err != nil || j.resp.ErrorCode != 0 {
				b.Fatalf("join: %v %+v", j.err, j.resp)
			}
			out[i], gen, leader = j.resp.MemberID, j.resp.Generation, j.resp.LeaderID
			if len(j.resp.Members) > 0 {
				for _, m := range j.resp.Members {
					members = append(members, m.MemberID)
				}
			}
		}
		assign := rangeAssign(members)
		for _, id := range out {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := kmsg.NewPtrSyncGroupRequest()
				r.Version, r.Group, r.MemberID, r.Generation = 3, "wide-group", id, gen
				if id == leader {
					for m, a := range assign {
						r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: a})
					}
				}
				if resp, err := c.SyncGroup(ctx, r); err != nil || resp.ErrorCode != 0 || len(resp.MemberAssignment) == 0 {
					b.Errorf("sync: %v %+v", err, resp)
				}
			}()
		}
		wg.Wait()
		return out
	}
	start := time.Now()
	ids := rebalance(make([]string, benchMembers)) // v3 joins: no MEMBER_ID_REQUIRED round
	join = time.Since(start)

	start = time.Now()
	l := kmsg.NewPtrLeaveGroupRequest()
	l.Version, l.Group, l.MemberID = 0, "wide-group", ids[benchMembers/2]
	if resp, err := c.LeaveGroup(ctx, l); err != nil || resp.ErrorCode != 0 {
		b.Fatalf("leave: %v %+v", err, resp)
	}
	rest := append(ids[:benchMembers/2:benchMembers/2], ids[benchMembers/2+1:]...)
	// The others learn of the rebalance at their next heartbeat: eager members then rejoin.
	// Here they rejoin at once, the fastest a classic group can go.
	rebalance(rest)
	leave = time.Since(start)
	return join, leave
}
