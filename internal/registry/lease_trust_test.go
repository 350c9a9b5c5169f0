package registry

import (
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/paddock-dev/paddock/api/v1alpha1"
)

// A Lease is the broker's to write, and a broker may lie or be broken: the registry believes
// only what reads as the broker protocol, caps the rest, and says what it refused
// (docs/registry.md, "What a Lease may say").
func TestTheRegistryBelievesOnlyWhatALeaseMaySay(t *testing.T) {
	good := "kafka=c-broker-0.c-brokers.kafka.svc.cluster.local:9092"
	believed := []v1alpha1.ListenerAddress{{Name: "kafka", Host: "c-broker-0.c-brokers.kafka.svc.cluster.local", Port: 9092}}
	written := []v1alpha1.BrokerRow{{ID: 0, Pod: "c-broker-0", State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive,
		Listeners: believed, LastSeen: &metav1.Time{Time: t0.Add(-time.Second)}}}
	for _, tc := range []struct {
		rule    string
		lease   lease
		edit    func(*lease)
		health  v1alpha1.BrokerHealth
		reason  string
		refused string // substring of the one refusal; "" = none
		addrs   []v1alpha1.ListenerAddress
		epoch   int64
	}{
		{rule: "a well-formed Lease is believed whole", lease: lease{id: 0, age: time.Second, listeners: good},
			health: v1alpha1.BrokerAlive, addrs: believed},
		{rule: "an announcement of a listener the cluster has not keeps the addresses last believed",
			lease:  lease{id: 0, age: time.Second, listeners: good + ",admin=evil.example.com:9999"},
			health: v1alpha1.BrokerAlive, refused: `listener "admin" is not one of the cluster's`, addrs: believed},
		{rule: "a host longer than a row can hold keeps the addresses last believed",
			lease:  lease{id: 0, age: time.Second, listeners: "kafka=" + strings.Repeat("a.", 200) + "example.com:9092"},
			health: v1alpha1.BrokerAlive, refused: "more than 253", addrs: believed},
		{rule: "a host that is no host name keeps the addresses last believed",
			lease:  lease{id: 0, age: time.Second, listeners: "kafka=<script>:9092"},
			health: v1alpha1.BrokerAlive, refused: "neither an IP address nor a DNS name", addrs: believed},
		{rule: "a port out of range keeps the addresses last believed",
			lease:  lease{id: 0, age: time.Second, listeners: "kafka=10.0.0.9:65536"},
			health: v1alpha1.BrokerAlive, refused: "not in 1..65535", addrs: believed},
		{rule: "a lease duration longer than the session timeout is capped: silent past it, the broker is dead",
			lease: lease{id: 0, age: 7 * time.Second, listeners: good},
			edit:  func(l *lease) { l.seconds = 86400 },
			// renewed 7 s ago: fresh by its own 86400 s, stale by the cluster's 6 s
			health: v1alpha1.BrokerDead, reason: v1alpha1.ReasonHeartbeatExpired, refused: "longer than the cluster's session timeout 6s", addrs: believed},
		{rule: "a lease duration that is not positive never makes the Lease fresh",
			lease: lease{id: 0, age: time.Second, listeners: good}, edit: func(l *lease) { l.seconds = -5 },
			health: v1alpha1.BrokerDead, reason: v1alpha1.ReasonHeartbeatExpired, refused: "not positive", addrs: believed},
		{rule: "healthy neither true nor false is unhealthy",
			lease:  lease{id: 0, age: time.Second, listeners: good, healthy: "yes"},
			health: v1alpha1.BrokerDead, reason: v1alpha1.ReasonUnhealthy, refused: `kafka.paddock.dev/healthy is "yes"`, addrs: believed},
		{rule: "draining neither true nor false is draining",
			lease: lease{id: 0, age: time.Second, listeners: good}, edit: func(l *lease) { l.drainingValue = "soon" },
			health: v1alpha1.BrokerDraining, reason: v1alpha1.ReasonDraining, refused: `kafka.paddock.dev/draining is "soon"`, addrs: believed},
		{rule: "a negative epoch is epoch 0",
			lease:  lease{id: 0, age: time.Second, listeners: good, transitions: -3},
			health: v1alpha1.BrokerAlive, refused: "leaseTransitions -3 is negative", addrs: believed},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			l := tc.lease
			if tc.edit != nil {
				tc.edit(&l)
			}
			res := compute(Input{
				Cluster: "c", Replicas: 1, PortName: "kafka", ListenerNames: []string{"kafka"}, SessionTimeout: leaseSeconds * time.Second,
				Now: t0, Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0))}, Leases: leases(l), Written: written,
			})
			row := res.Rows[0]
			if row.Health != tc.health || (tc.reason != "" && row.Reason != tc.reason) {
				t.Errorf("health %s (%s), want %s (%s)", row.Health, row.Reason, tc.health, tc.reason)
			}
			if !slices.Equal(row.Listeners, tc.addrs) {
				t.Errorf("listeners %+v, want %+v", row.Listeners, tc.addrs)
			}
			if row.Epoch != tc.epoch {
				t.Errorf("epoch %d, want %d", row.Epoch, tc.epoch)
			}
			switch {
			case tc.refused == "" && len(res.Refused) > 0:
				t.Errorf("refused %+v, want nothing", res.Refused)
			case tc.refused != "" && (len(res.Refused) != 1 || !strings.Contains(res.Refused[0].Problem, tc.refused) ||
				res.Refused[0].Broker != 0 || res.Refused[0].Lease != "c-broker-0"):
				t.Errorf("refused %+v, want one refusal of c-broker-0 saying %q", res.Refused, tc.refused)
			}
		})
	}
}

func TestAHugeLeaseDurationDoesNotPostponeTheNextExpiry(t *testing.T) {
	l := lease{id: 0, age: time.Second, seconds: 86400}
	res := compute(Input{Cluster: "c", Replicas: 1, PortName: "kafka", SessionTimeout: 6 * time.Second, Now: t0,
		Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0))}, Leases: leases(l)})
	if want := t0.Add(5 * time.Second); !res.NextExpiry.Equal(want) {
		t.Fatalf("next expiry %s, want %s: a renewal keeps the Lease fresh for the session timeout at most", res.NextExpiry, want)
	}
}

func TestARefusedAnnouncementOfANewBrokerFallsBackToItsEndpoint(t *testing.T) {
	res := compute(Input{Cluster: "c", Replicas: 1, PortName: "kafka", Now: t0, SessionTimeout: 6 * time.Second,
		Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0))},
		Leases: leases(lease{id: 0, age: time.Second, listeners: "kafka=attacker.example.com:1,kafka=x:2"})})
	want := []v1alpha1.ListenerAddress{{Name: "kafka", Host: "10.0.0.1", Port: 9092}}
	if got := res.Rows[0].Listeners; !slices.Equal(got, want) {
		t.Fatalf("listeners %+v, want the endpoint's %+v: no address the Lease gave is believed", got, want)
	}
	if len(res.Refused) != 1 || !strings.Contains(res.Refused[0].Problem, "announced twice") {
		t.Fatalf("refused %+v", res.Refused)
	}
}

// A broker back after a silence longer than the session timeout must be looked at, even if
// its Lease claims a duration that would still cover the silence.
func TestARenewalAfterTheSessionTimeoutIsNotQuietWhateverTheLeaseDuration(t *testing.T) {
	build := func(renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-broker-0"},
			Spec:       coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](86400), RenewTime: &metav1.MicroTime{Time: renewed}},
		}
	}
	for _, capped := range []bool{false, true} {
		var o Observer
		if capped {
			o.Cap("ns", "c-broker-0", 6*time.Second)
		}
		o.Observe(build(t0.Add(-20*time.Second)), t0.Add(-20*time.Second))
		old := build(t0.Add(-10 * time.Second))
		o.Observe(old, t0.Add(-10*time.Second)) // seen live, 10 s before the next beat
		got := o.ObserveUpdate(old, build(t0), t0)
		if got.WasFresh == capped {
			t.Errorf("capped %v: WasFresh %v, want %v", capped, got.WasFresh, !capped)
		}
	}
}

// What a broker says of its storage reaches its row only when it reads strictly: the failed
// partitions move partitions, and the mount refusal is shown in a condition.
func TestTheRegistryCopiesAStorageAnnouncementOnlyWhenItReadsStrictly(t *testing.T) {
	const id = "AAAAAAAAAAAAAAAAAAAAAQ"
	for _, tc := range []struct {
		rule, failed, mount string
		want                []v1alpha1.PartitionFailure
		wantMount, refused  string
	}{
		{rule: "failed partitions and a mount refusal are copied",
			failed: id + "/2@5x1", mount: "soft: a soft mount fails an fsync with EIO",
			want: []v1alpha1.PartitionFailure{{TopicID: id, Partition: 2, Epoch: 5, Failures: 1}}, wantMount: "soft: a soft mount fails an fsync with EIO"},
		{rule: "a malformed failure list moves nothing", failed: id + "/2@5", refused: "no partition counts as failed"},
		{rule: "a mount refusal with control bytes is not shown", mount: "soft\x07", refused: "the mount counts as accepted"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			l := lease{id: 0, age: time.Second}.build()
			if tc.failed != "" {
				l.Annotations[v1alpha1.AnnotationFailed] = tc.failed
			}
			if tc.mount != "" {
				l.Annotations[v1alpha1.AnnotationMountRefused] = tc.mount
			}
			res := compute(Input{Cluster: "c", Replicas: 1, PortName: "kafka", SessionTimeout: leaseSeconds * time.Second,
				Now: t0, Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0))}, Leases: []coordinationv1.Lease{l}})
			row := res.Rows[0]
			if !slices.Equal(row.FailedPartitions, tc.want) || row.MountRefused != tc.wantMount {
				t.Errorf("row failed %+v mount %q, want %+v %q", row.FailedPartitions, row.MountRefused, tc.want, tc.wantMount)
			}
			switch {
			case tc.refused == "" && len(res.Refused) > 0:
				t.Errorf("refused %+v, want nothing", res.Refused)
			case tc.refused != "" && (len(res.Refused) != 1 || !strings.Contains(res.Refused[0].Problem, tc.refused)):
				t.Errorf("refused %+v, want one saying %q", res.Refused, tc.refused)
			}
		})
	}
}

// What a broker says of the groups it coordinates reaches its row only when it reads
// strictly; the cluster's counts are the rows' sum, and a dead broker's last announcement is
// not counted (its groups are claimed by another broker, which counts them).
func TestTheClustersGroupCountsSumWhatTheLivingBrokersSayStrictly(t *testing.T) {
	beat := func(id int32, age time.Duration, groups string) coordinationv1.Lease {
		l := lease{id: id, age: age}.build()
		l.Annotations[v1alpha1.AnnotationGroups] = groups
		return l
	}
	res := compute(Input{Cluster: "c", Replicas: 4, PortName: "kafka", SessionTimeout: leaseSeconds * time.Second, Now: t0,
		Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0), serving(1), serving(2), serving(3))},
		Leases: []coordinationv1.Lease{
			beat(0, time.Second, "classic/Stable=2,consumer/Reconciling=1"),
			beat(1, time.Second, "classic/Stable=1"),
			beat(2, time.Second, "classic/Stable=1000"+"0000"),      // past the bound: not believed
			beat(3, 2*leaseSeconds*time.Second, "classic/Stable=7"), // dead
		}})
	want := []v1alpha1.GroupCount{{Protocol: "classic", State: "Stable", Count: 3}, {Protocol: "consumer", State: "Reconciling", Count: 1}}
	if !slices.Equal(res.Groups, want) || res.Counts.Groups != 4 {
		t.Fatalf("groups %+v total %d, want %+v total 4", res.Groups, res.Counts.Groups, want)
	}
	if !slices.Equal(res.Rows[1].Groups, []v1alpha1.GroupCount{{Protocol: "classic", State: "Stable", Count: 1}}) {
		t.Errorf("broker 1's row groups %+v, want its announcement", res.Rows[1].Groups)
	}
	if res.Rows[2].Groups != nil || len(res.Refused) != 1 || res.Refused[0].Broker != 2 || !strings.Contains(res.Refused[0].Problem, "no group is counted") {
		t.Errorf("broker 2's row groups %+v, refused %+v; want none and one refusal saying so", res.Rows[2].Groups, res.Refused)
	}
	if res.Rows[3].Health != v1alpha1.BrokerDead || res.Rows[3].Groups != nil {
		t.Errorf("broker 3's row health %s groups %+v, want Dead with none", res.Rows[3].Health, res.Rows[3].Groups)
	}
}

// What a broker says of the transactions its coordinator holds open reaches its row only when
// it reads strictly; the cluster's count is the rows' sum, and a dead broker's last
// announcement is not counted (its transactional ids are claimed by another broker's
// coordinator, which counts them).
func TestTheClustersOngoingTransactionsSumWhatTheLivingBrokersSayStrictly(t *testing.T) {
	beat := func(id int32, age time.Duration, open string) coordinationv1.Lease {
		l := lease{id: id, age: age}.build()
		l.Annotations[v1alpha1.AnnotationOngoingTransactions] = open
		return l
	}
	res := compute(Input{Cluster: "c", Replicas: 5, PortName: "kafka", SessionTimeout: leaseSeconds * time.Second, Now: t0,
		Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0), serving(1), serving(2), serving(3), serving(4))},
		Leases: []coordinationv1.Lease{
			beat(0, time.Second, "3"),
			beat(1, time.Second, "2"),
			beat(2, time.Second, "1000001"),          // past the bound: not believed
			beat(3, 2*leaseSeconds*time.Second, "7"), // dead
			beat(4, time.Second, "+1"),               // a sign: not believed
		}})
	if res.Counts.OngoingTransactions != 5 {
		t.Fatalf("ongoing transactions %d, want 5 (brokers 0 and 1)", res.Counts.OngoingTransactions)
	}
	if res.Rows[0].OngoingTransactions != 3 || res.Rows[1].OngoingTransactions != 2 {
		t.Errorf("rows 0 and 1 ongoing transactions %d, %d; want their announcements 3, 2", res.Rows[0].OngoingTransactions, res.Rows[1].OngoingTransactions)
	}
	if len(res.Refused) != 2 {
		t.Fatalf("refused %+v, want brokers 2 and 4 refused", res.Refused)
	}
	for i, id := range []int32{2, 4} {
		if row, r := res.Rows[id], res.Refused[i]; row.OngoingTransactions != 0 || r.Broker != id ||
			!strings.Contains(r.Problem, v1alpha1.AnnotationOngoingTransactions) || !strings.Contains(r.Problem, "no transaction is counted") {
			t.Errorf("broker %d's row ongoing transactions %d, refusal %+v; want none and a refusal saying so", id, row.OngoingTransactions, r)
		}
	}
	if res.Rows[3].Health != v1alpha1.BrokerDead || res.Rows[3].OngoingTransactions != 0 {
		t.Errorf("broker 3's row health %s ongoing transactions %d, want Dead with none", res.Rows[3].Health, res.Rows[3].OngoingTransactions)
	}
}

// What a broker says of the compacted partitions its cleaner cannot clean reaches its row only
// when it reads strictly, and a dead broker's last announcement is dropped: its partitions
// are cleaned, or not, by their next leader, which says so itself.
func TestTheRegistryCopiesTheUncleanablePartitionsOfLivingBrokersStrictly(t *testing.T) {
	const id = "AAAAAAAAAAAAAAAAAAAAAQ"
	beat := func(n int32, age time.Duration, says string) coordinationv1.Lease {
		l := lease{id: n, age: age}.build()
		l.Annotations[v1alpha1.AnnotationUncleanable] = says
		return l
	}
	res := compute(Input{Cluster: "c", Replicas: 3, PortName: "kafka", SessionTimeout: leaseSeconds * time.Second, Now: t0,
		Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0), serving(1), serving(2))},
		Leases: []coordinationv1.Lease{
			beat(0, time.Second, id+"/4=OffsetMapTooSmall"),
			beat(1, time.Second, id+"/4=Sleepy"),                      // an unknown cause: not believed
			beat(2, 2*leaseSeconds*time.Second, id+"/5=CorruptBatch"), // dead
		}})
	if want := []v1alpha1.UncleanablePartition{{TopicID: id, Partition: 4, Cause: v1alpha1.CauseOffsetMapTooSmall}}; !slices.Equal(res.Rows[0].UncleanablePartitions, want) {
		t.Errorf("broker 0's row %+v, want its announcement %+v", res.Rows[0].UncleanablePartitions, want)
	}
	if res.Rows[1].UncleanablePartitions != nil || len(res.Refused) != 1 || res.Refused[0].Broker != 1 ||
		!strings.Contains(res.Refused[0].Problem, "no partition counts as uncleanable") {
		t.Errorf("broker 1's row %+v, refused %+v; want none and one refusal saying so", res.Rows[1].UncleanablePartitions, res.Refused)
	}
	if res.Rows[2].Health != v1alpha1.BrokerDead || res.Rows[2].UncleanablePartitions != nil {
		t.Errorf("broker 2's row health %s uncleanable %+v, want Dead with none", res.Rows[2].Health, res.Rows[2].UncleanablePartitions)
	}
}
