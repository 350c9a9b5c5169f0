package recovery

import (
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// lostBroker is broker 1 on node n1, lost long enough ago that every gate holds: the node has
// been NotReady for two minutes (timeout 90 s), the Lease was last renewed a minute ago
// (session 6 s), brokers 0 and 2 are alive, lead every partition and have claimed them, and
// the coordinator epoch stands for {0, 2}.
func lostBroker(clk *clocktesting.FakeClock) Facts {
	now := clk.Now()
	parts := []Partition{
		{Topic: "t", TopicID: "AAAAAAAAAAAAAAAAAAAAAA", Index: 0, Leader: 0, Epoch: 3},
		{Topic: "t", TopicID: "AAAAAAAAAAAAAAAAAAAAAA", Index: 1, Leader: 2, Epoch: 5},
		{Topic: "u", TopicID: "BBBBBBBBBBBBBBBBBBBBBB", Index: 0, Leader: 2, Epoch: 1},
	}
	return Facts{
		Now: now, Broker: 1, AutoRecover: true,
		Pod: "c-broker-1", NodeName: "n1", NodeExists: true,
		NodeNotReadySince: now.Add(-2 * time.Minute), NodeLossTimeout: 90 * time.Second,
		LeaseRenewedAt: now.Add(-time.Minute), SessionTimeout: 6 * time.Second,
		Alive:      []int32{0, 2},
		Partitions: parts,
		Claimed: map[int32]string{
			0: kafkav1alpha1.FormatClaims([]kafkav1alpha1.PartitionClaim{{TopicID: "AAAAAAAAAAAAAAAAAAAAAA", Partition: 0, Epoch: 3}}),
			2: kafkav1alpha1.FormatClaims([]kafkav1alpha1.PartitionClaim{
				{TopicID: "BBBBBBBBBBBBBBBBBBBBBB", Partition: 0, Epoch: 1},
				{TopicID: "AAAAAAAAAAAAAAAAAAAAAA", Partition: 1, Epoch: 5},
			}),
		},
		CoordinatorAlive: []int32{0, 2},
	}
}

func TestEveryGateMetForceDeletesThePod(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	v := Decide(lostBroker(clk))
	if !v.Delete || v.Reason != kafkav1alpha1.ReasonPodForceDeleted {
		t.Fatalf("all gates met: got %+v, want a force delete", v)
	}
}

// TestEachGateAloneHoldsTheRecoveryBack breaks one gate at a time on a broker whose every other
// gate holds, and expects that gate's reason.
func TestEachGateAloneHoldsTheRecoveryBack(t *testing.T) {
	cases := []struct {
		rule   string
		break_ func(f *Facts, clk *clocktesting.FakeClock)
		reason string
	}{
		{"a pod on a Ready node needs no recovery", func(f *Facts, _ *clocktesting.FakeClock) { f.NodeNotReadySince = time.Time{} },
			kafkav1alpha1.ReasonNodeReady},
		{"a pod bound to no node needs no recovery", func(f *Facts, _ *clocktesting.FakeClock) { f.NodeName = "" },
			kafkav1alpha1.ReasonNodeReady},
		{"no pod, nothing to delete", func(f *Facts, _ *clocktesting.FakeClock) { f.Pod = "" },
			kafkav1alpha1.ReasonNodeReady},
		{"the opt-out annotation turns recovery off", func(f *Facts, _ *clocktesting.FakeClock) { f.AutoRecover = false },
			kafkav1alpha1.ReasonAutoRecoverDisabled},
		{"a node NotReady for less than the node loss timeout is not lost yet", func(f *Facts, clk *clocktesting.FakeClock) {
			f.NodeNotReadySince = clk.Now().Add(-89 * time.Second)
		}, kafkav1alpha1.ReasonNodeLossPending},
		{"a Lease renewed within the session timeout means the broker lives", func(f *Facts, clk *clocktesting.FakeClock) {
			f.LeaseRenewedAt = clk.Now().Add(-5 * time.Second)
		}, kafkav1alpha1.ReasonHeartbeatFresh},
		{"never when no broker is alive", func(f *Facts, _ *clocktesting.FakeClock) { f.Alive = nil },
			kafkav1alpha1.ReasonNoAliveBrokersToRecover},
		{"a broker the assignment still gives a partition is not recovered", func(f *Facts, _ *clocktesting.FakeClock) {
			f.Partitions[1].Leader = 1
		}, kafkav1alpha1.ReasonLeadsPartitions},
		{"a broker still in the coordinator epoch's alive set may coordinate groups", func(f *Facts, _ *clocktesting.FakeClock) {
			f.CoordinatorAlive = []int32{0, 1, 2}
		}, kafkav1alpha1.ReasonCoordinatesGroups},
		{"no coordinator epoch yet: groups may live anywhere", func(f *Facts, _ *clocktesting.FakeClock) { f.CoordinatorAlive = nil },
			kafkav1alpha1.ReasonCoordinatesGroups},
		{"a new leader that has not claimed its partition holds it back", func(f *Facts, _ *clocktesting.FakeClock) {
			f.Claimed[2] = kafkav1alpha1.FormatClaims([]kafkav1alpha1.PartitionClaim{{TopicID: "BBBBBBBBBBBBBBBBBBBBBB", Partition: 0, Epoch: 1}})
		}, kafkav1alpha1.ReasonPartitionsNotClaimed},
		{"a claim at an older epoch is not the claim", func(f *Facts, _ *clocktesting.FakeClock) {
			f.Partitions[0].Epoch = 4
		}, kafkav1alpha1.ReasonPartitionsNotClaimed},
		{"a leader without a claim annotation has claimed nothing", func(f *Facts, _ *clocktesting.FakeClock) { delete(f.Claimed, 0) },
			kafkav1alpha1.ReasonPartitionsNotClaimed},
		{"one recovery per cluster at a time", func(f *Facts, _ *clocktesting.FakeClock) { f.Recovering = []int32{2} },
			kafkav1alpha1.ReasonRecoveryInProgress},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			f := lostBroker(clk)
			tc.break_(&f, clk)
			v := Decide(f)
			if v.Delete || v.Reason != tc.reason {
				t.Fatalf("got %+v, want held back by %s", v, tc.reason)
			}
			if v.Message == "" {
				t.Error("a held-back verdict must say why in its message")
			}
		})
	}
}

func TestTheNodeLossTimeoutCountsOnTheFakeClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := lostBroker(clk)
	f.NodeNotReadySince = clk.Now()
	if v := Decide(f); v.Reason != kafkav1alpha1.ReasonNodeLossPending {
		t.Fatalf("just NotReady: %+v", v)
	}
	clk.Step(90 * time.Second)
	f.Now = clk.Now()
	if v := Decide(f); !v.Delete {
		t.Fatalf("NotReady for exactly the timeout: %+v, want a delete", v)
	}
}

func TestTheOutOfServiceTaintMeetsTheNodeGate(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := lostBroker(clk)
	f.NodeNotReadySince = clk.Now().Add(-time.Second) // far from the timeout
	f.OutOfService = true
	if v := Decide(f); !v.Delete {
		t.Fatalf("out-of-service taint: %+v, want a delete", v)
	}
	f.NodeNotReadySince = time.Time{} // the node even still says Ready
	if v := Decide(f); !v.Delete {
		t.Fatalf("out-of-service taint on a Ready node: %+v, want a delete", v)
	}
	f.LeaseRenewedAt = clk.Now() // but the broker still beats: the taint does not override it
	if v := Decide(f); v.Reason != kafkav1alpha1.ReasonHeartbeatFresh {
		t.Fatalf("out-of-service taint, fresh Lease: %+v, want HeartbeatFresh", v)
	}
}

func TestADeletedNodeIsLost(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := lostBroker(clk)
	f.NodeExists, f.NodeNotReadySince = false, time.Time{}
	if v := Decide(f); !v.Delete {
		t.Fatalf("node object gone: %+v, want a delete", v)
	}
}

func TestTheOptOutIsRespectedEvenWhenEveryOtherGateHolds(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := lostBroker(clk)
	f.AutoRecover, f.OutOfService = false, true
	v := Decide(f)
	if v.Delete || v.Reason != kafkav1alpha1.ReasonAutoRecoverDisabled || !strings.Contains(v.Message, kafkav1alpha1.AnnotationAutoRecover) {
		t.Fatalf("opt-out: %+v", v)
	}
}

func TestTheBrokerBeingRecoveredIsNotHeldBackByItself(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := lostBroker(clk)
	f.Recovering = []int32{1}
	if v := Decide(f); !v.Delete {
		t.Fatalf("its own recovery in progress: %+v, want a delete (the pod object came back on the lost node)", v)
	}
}

func TestPartitionsWithoutALeaderOrTopicIDNeedNoClaim(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := lostBroker(clk)
	f.Partitions = append(f.Partitions, Partition{Topic: "gone", TopicID: "CCCCCCCCCCCCCCCCCCCCCC", Index: 0, Leader: -1, Epoch: 9},
		Partition{Topic: "new", Index: 0, Leader: 0})
	if v := Decide(f); !v.Delete {
		t.Fatalf("%+v, want a delete", v)
	}
}

// TestOneRecoveryPerClusterAtATime pins the window: a force-deleted broker blocks others
// until it is Alive again, or RecoveryWindow has passed.
func TestOneRecoveryPerClusterAtATime(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	since := clk.Now()
	if !Recovering(kafkav1alpha1.ReasonPodForceDeleted, since, clk.Now(), false) {
		t.Error("just force-deleted and not alive: recovering")
	}
	if Recovering(kafkav1alpha1.ReasonPodForceDeleted, since, clk.Now(), true) {
		t.Error("alive again: recovered")
	}
	clk.Step(RecoveryWindow)
	if Recovering(kafkav1alpha1.ReasonPodForceDeleted, since, clk.Now(), false) {
		t.Error("past the recovery window: no longer blocks the others")
	}
	if Recovering(kafkav1alpha1.ReasonNodeLossPending, since, since, false) {
		t.Error("held back is not recovering")
	}
}

func TestClaimDigestIsOrderIndependentAndEpochSensitive(t *testing.T) {
	a := []kafkav1alpha1.PartitionClaim{{TopicID: "x", Partition: 1, Epoch: 2}, {TopicID: "w", Partition: 0, Epoch: 1}}
	b := []kafkav1alpha1.PartitionClaim{{TopicID: "w", Partition: 0, Epoch: 1}, {TopicID: "x", Partition: 1, Epoch: 2}}
	if kafkav1alpha1.FormatClaims(a) != kafkav1alpha1.FormatClaims(b) {
		t.Error("same set, other order: different digests")
	}
	b[1].Epoch = 3
	if kafkav1alpha1.FormatClaims(a) == kafkav1alpha1.FormatClaims(b) {
		t.Error("another epoch: same digest")
	}
	if got := kafkav1alpha1.FormatClaims(nil); !strings.HasPrefix(got, "0/") {
		t.Errorf("no claims: %q", got)
	}
}

func TestZombieClaims(t *testing.T) {
	local := ClaimFacts{Name: "scratch-c-broker-1", Provisioner: NoProvisioner, AffinityNodes: []string{"n1"}}
	gone := ClaimFacts{Name: "scratch-c-broker-1", Provisioner: "example.com/csi", AffinityNodes: []string{"n1"}, MissingNodes: []string{"n1"}}
	network := ClaimFacts{Name: "scratch-c-broker-1", Provisioner: "example.com/csi", AffinityNodes: []string{"n1"}}
	data := ClaimFacts{Name: "c-data", DataClaim: true, Provisioner: NoProvisioner, AffinityNodes: []string{"n1"}, MissingNodes: []string{"n1"}}
	conflict := "0/3 nodes are available: 1 node(s) had volume node affinity conflict, 2 node(s) didn't match pod anti-affinity rules."
	cases := []struct {
		rule    string
		pending PendingFacts
		reason  string
		deleted []string
	}{
		{"a scheduled pod is not stuck", PendingFacts{Claims: []ClaimFacts{gone}, AutoRecover: true}, "", nil},
		{"a no-provisioner claim in a volume node affinity conflict is deleted",
			PendingFacts{Unschedulable: true, Message: conflict, Claims: []ClaimFacts{local}, AutoRecover: true},
			kafkav1alpha1.ReasonZombieClaimDeleted, []string{local.Name}},
		{"a claim bound to a volume of a node that is gone is deleted",
			PendingFacts{Unschedulable: true, Message: "0/3 nodes are available", Claims: []ClaimFacts{gone}, AutoRecover: true},
			kafkav1alpha1.ReasonZombieClaimDeleted, []string{gone.Name}},
		{"a network volume in a conflict is reported, not deleted",
			PendingFacts{Unschedulable: true, Message: conflict, Claims: []ClaimFacts{network}, AutoRecover: true},
			kafkav1alpha1.ReasonVolumeNodeAffinityConflict, nil},
		{"the cluster's data claim is never deleted",
			PendingFacts{Unschedulable: true, Message: conflict, Claims: []ClaimFacts{data}, AutoRecover: true},
			kafkav1alpha1.ReasonVolumeNodeAffinityConflict, nil},
		{"the opt-out keeps zombie claims too",
			PendingFacts{Unschedulable: true, Message: conflict, Claims: []ClaimFacts{local}},
			kafkav1alpha1.ReasonVolumeNodeAffinityConflict, nil},
		{"an unschedulable pod without volume trouble is not about claims",
			PendingFacts{Unschedulable: true, Message: "0/3 nodes are available: 3 Insufficient cpu.", Claims: []ClaimFacts{network}, AutoRecover: true},
			"", nil},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			v := DecideClaims(tc.pending)
			if v.Reason != tc.reason || strings.Join(v.Delete, ",") != strings.Join(tc.deleted, ",") {
				t.Fatalf("got %+v, want reason %q deleting %v", v, tc.reason, tc.deleted)
			}
		})
	}
}
