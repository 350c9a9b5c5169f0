package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/paddock-dev/paddock/internal/testkit"
)

const (
	// groupsTopic is the topic scenario 12's producer writes and its group reads.
	groupsTopic      = "e2e-group-moves"
	groupsPartitions = 12
	groupsGroup      = "e2e-group-moves"
)

// 12. Group coordinator moves: a group of three franz-go consumers (cooperative-sticky,
// committing every second and on revoke) reads a topic an idempotent acks=all producer keeps
// writing. The group's coordinator (FindCoordinator) is killed with kill -9 (the node agent
// restarts it), then the group's coordinator is drained (pod delete). The scenario measures,
// for each event, the time until DescribeGroups answers Stable again with three members that
// rejoined (a member set other than before the event), and, when the group had moved away,
// the same once the broker is back and the group returned to it; meanwhile it polls the committed offsets (OffsetFetch) and
// fails if one ever goes backwards. Finally every record the producer had acknowledged has
// been consumed by some member at least once.
func groupCoordinatorMoves(ctx context.Context, t *testing.T, s *suite) {
	const scenario = "12 group coordinator moves"
	admCl, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrapName()))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	createTopic(ctx, t, adm, groupsPartitions, groupsTopic)
	defer func() {
		if _, err := adm.DeleteTopic(ctx, groupsTopic); err != nil {
			t.Errorf("delete %s: %v", groupsTopic, err)
		}
	}()

	// The producer: values "g-<n>", round-robin over the partitions.
	prod, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrapName()), kgo.DefaultProduceTopic(groupsTopic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var (
		mu       sync.Mutex
		acked    []string            // guarded by mu
		consumed = map[string]bool{} // guarded by mu
	)
	stopProducing := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stopProducing:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			prod.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "g-%d", n)}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked = append(acked, string(r.Value))
					mu.Unlock()
				}
			})
		}
	}()

	// The group: three members, each recording what it consumed.
	cctx, stopConsuming := context.WithCancel(ctx)
	var members sync.WaitGroup
	for i := range 3 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrapName()), kgo.ConsumerGroup(groupsGroup), kgo.ConsumeTopics(groupsTopic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(time.Second),
			kgo.FetchMaxWait(500*time.Millisecond), kgo.ClientID(fmt.Sprintf("e2e-member-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		members.Add(1)
		go func() {
			defer members.Done()
			defer cl.Close() // leaves the group, committing what it consumed
			for cctx.Err() == nil {
				cl.PollFetches(cctx).EachRecord(func(r *kgo.Record) {
					mu.Lock()
					consumed[string(r.Value)] = true
					mu.Unlock()
				})
			}
		}()
	}
	defer func() {
		stopConsuming()
		members.Wait()
	}()

	// Committed offsets never go backwards.
	var (
		offMu     sync.Mutex
		committed = map[int32]int64{} // guarded by offMu
		polls     int                 // guarded by offMu
	)
	pollCtx, stopPolling := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pollCtx.Err() == nil {
			offs, err := freshAdmin(pollCtx, s, func(adm *kadm.Client) (kadm.OffsetResponses, error) {
				return adm.FetchOffsets(pollCtx, groupsGroup)
			})
			if err == nil {
				offMu.Lock()
				polls++
				offs.Each(func(o kadm.OffsetResponse) {
					if o.Err != nil || o.Topic != groupsTopic {
						return
					}
					if was, ok := committed[o.Partition]; ok && o.At < was {
						t.Errorf("the committed offset of %s/%d went back from %d to %d", groupsTopic, o.Partition, was, o.At)
					}
					committed[o.Partition] = max(committed[o.Partition], o.At)
				})
				offMu.Unlock()
			}
			select {
			case <-pollCtx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	defer func() {
		stopPolling()
		<-polled
	}()

	started := time.Now()
	described := s.waitGroupStable(ctx, t, nil)
	measure(t, scenario, "three members joined → Stable", time.Since(started))

	for _, ev := range []struct {
		name string
		// do makes the event happen to the coordinator; settled says when it is over.
		do func(coordinator int32) (settled func() (bool, string))
	}{
		{"kill -9 of the coordinator", func(id int32) func() (bool, string) {
			// It leaves the alive set as soon as its container is reported terminated (death
			// seen: docs/registry.md), so its groups move to another coordinator; the node
			// agent restarts it, and at its new process's first beat it is alive again and the
			// groups come back at the coordinator epoch the operator bumps for that.
			return s.killBroker(ctx, t, id)
		}},
		{"pod delete of the coordinator (SIGTERM drain)", func(id int32) func() (bool, string) {
			return s.deleteBrokerPod(ctx, t, id)
		}},
	} {
		coord := s.groupCoordinator(ctx, t, adm)
		// Some commits before the event, to go backwards from.
		time.Sleep(2 * time.Second)
		t.Logf("%s: broker %d coordinates %s", ev.name, coord, groupsGroup)
		start := time.Now()
		settled := ev.do(coord)
		described = s.waitGroupStable(ctx, t, described.Members)
		measure(t, scenario, fmt.Sprintf("%s (broker %d) → Stable again (coordinator %d)", ev.name, coord, described.Coordinator.NodeID), time.Since(start))
		back := time.Now()
		testkit.Within(t, ev.name+": the cluster healthy again", 3*time.Minute, func() (bool, string) {
			if ok, detail := settled(); !ok {
				return false, detail
			}
			return s.healthy(ctx, 3)
		})
		// A returning broker is alive again: the coordinator epoch moves once more and the
		// group goes back to the broker the rule picks.
		if c := s.groupCoordinator(ctx, t, adm); c != described.Coordinator.NodeID {
			described = s.waitGroupStable(ctx, t, described.Members)
			measure(t, scenario, fmt.Sprintf("%s: broker %d back → Stable again (coordinator %d)", ev.name, coord, described.Coordinator.NodeID), time.Since(back))
		}
	}

	close(stopProducing)
	<-produced
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := prod.Flush(fctx); err != nil {
		t.Logf("flush the producer: %v", err)
	}
	mu.Lock()
	want := slices.Clone(acked)
	mu.Unlock()
	testkit.EventuallyDetail(t, "every acknowledged record consumed", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		missing := 0
		for _, v := range want {
			if !consumed[v] {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d acknowledged records not consumed yet", missing, len(want))
	})
	offMu.Lock()
	t.Logf("%s: %d records acknowledged and consumed; committed offsets polled %d times, never going back", scenario, len(want), polls)
	offMu.Unlock()
	count(scenario, "records acknowledged, all consumed", len(want))
}

// freshAdmin runs ask with an admin client made for it and closed after — as a person runs
// kafka-consumer-groups.sh — so no coordinator cached from before an event is asked again.
func freshAdmin[T any](ctx context.Context, s *suite, ask func(*kadm.Client) (T, error)) (T, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrapName()))
	if err != nil {
		var zero T
		return zero, err
	}
	defer cl.Close()
	return ask(kadm.NewClient(cl))
}

// groupCoordinator asks for the group's coordinator.
func (s *suite) groupCoordinator(ctx context.Context, t *testing.T, adm *kadm.Client) int32 {
	t.Helper()
	var id int32
	testkit.EventuallyDetail(t, "FindCoordinator for "+groupsGroup, func() (bool, string) {
		r := adm.FindGroupCoordinators(ctx, groupsGroup)
		for _, c := range r {
			if c.Err != nil {
				return false, c.Err.Error()
			}
			id = c.NodeID
			return true, ""
		}
		return false, "no answer"
	})
	return id
}

// waitGroupStable waits until DescribeGroups answers Stable with three members that share
// every partition of the topic. With was (the members before an event), the group must have
// been unsettled since — an answer that failed or was not Stable — or have other members (a
// moved group's members rejoin under new ids): a Stable answer from before the event took
// effect does not count.
func (s *suite) waitGroupStable(ctx context.Context, t *testing.T, was []kadm.DescribedGroupMember) kadm.DescribedGroup {
	t.Helper()
	var g kadm.DescribedGroup
	unsettled := was == nil
	testkit.Within(t, groupsGroup+" Stable with three members", 2*time.Minute, func() (bool, string) {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		gs, err := freshAdmin(dctx, s, func(adm *kadm.Client) (kadm.DescribedGroups, error) {
			return adm.DescribeGroups(dctx, groupsGroup)
		})
		if err != nil {
			unsettled = true
			return false, err.Error()
		}
		g = gs[groupsGroup]
		if g.Err != nil {
			unsettled = true
			return false, g.Err.Error()
		}
		if g.State != "Stable" || len(g.Members) != 3 {
			unsettled = true
			return false, fmt.Sprintf("%s with %d members", g.State, len(g.Members))
		}
		same := 0
		for _, m := range g.Members {
			if slices.ContainsFunc(was, func(o kadm.DescribedGroupMember) bool { return o.MemberID == m.MemberID }) {
				same++
			}
		}
		if !unsettled && same == len(g.Members) {
			return false, "Stable with the members from before the event, never unsettled since"
		}
		assigned := g.AssignedPartitions()[groupsTopic]
		if len(assigned) != groupsPartitions {
			return false, fmt.Sprintf("%d of %d partitions assigned", len(assigned), groupsPartitions)
		}
		return true, ""
	})
	return g
}
