package registry

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/paddock-dev/paddock/api/v1alpha1"
)

// withGroups is l's Lease announcing groups (AnnotationGroups).
func withGroups(l lease, groups string) coordinationv1.Lease {
	out := l.build()
	out.Annotations[v1alpha1.AnnotationGroups] = groups
	return out
}

func TestGroupsAreSummedOverTheServingAliveBrokersOnly(t *testing.T) {
	const announced = "classic/Stable=2,consumer/Empty=1"
	got := compute(Input{Cluster: "c", Replicas: 6, Now: t0, SessionTimeout: leaseSeconds * time.Second,
		Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0), serving(1), notServing(2), serving(3), serving(4))},
		Leases: []coordinationv1.Lease{
			withGroups(lease{id: 0, age: time.Second}, "classic/Stable=1,consumer/Stable=4"), // serving, alive: counted
			withGroups(lease{id: 1, age: time.Second}, announced),                            // serving, alive: counted
			withGroups(lease{id: 2, age: time.Second}, announced),                            // alive but fenced: not counted
			withGroups(lease{id: 3, age: time.Second, draining: true}, announced),            // draining: its groups are moving
			withGroups(lease{id: 4, age: time.Minute}, announced),                            // heartbeat expired: stale counts
			withGroups(lease{id: 5, age: time.Second}, announced),                            // not listed: fenced
		}})
	want := v1alpha1.GroupCounts{Total: 8, ByState: []v1alpha1.GroupCount{
		{Protocol: "classic", State: "Stable", Count: 3},
		{Protocol: "consumer", State: "Empty", Count: 1},
		{Protocol: "consumer", State: "Stable", Count: 4},
	}}
	if !equality.Semantic.DeepEqual(got.Groups, want) {
		t.Fatalf("groups = %+v, want %+v", got.Groups, want)
	}
	if len(got.Refused) != 0 {
		t.Fatalf("refused %+v, want nothing", got.Refused)
	}
}

func TestNoGroupAnnouncedCountsZeroGroups(t *testing.T) {
	got := compute(Input{Cluster: "c", Replicas: 1, Now: t0,
		Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0))}, Leases: leases(lease{id: 0, age: time.Second})})
	if got.Groups.Total != 0 || got.Groups.ByState != nil {
		t.Fatalf("groups = %+v, want none", got.Groups)
	}
}

// A broker's group counts are its own to write: one that does not read strictly counts none
// of its groups, says why, and leaves the other brokers' counts standing.
func TestAGroupCountsAnnouncementThatDoesNotReadStrictlyCountsNothing(t *testing.T) {
	for _, value := range []string{
		"classic/Stable=-5",
		"classic/Stable=99999999999",
		"share/Stable=1",
		"classic/Dead=1",
		"classic/Stable=1,classic/Stable=1",
		strings.Repeat("x", 100_000),
	} {
		got := compute(Input{Cluster: "c", Replicas: 2, Now: t0,
			Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0), serving(1))},
			Leases: []coordinationv1.Lease{
				withGroups(lease{id: 0, age: time.Second}, value),
				withGroups(lease{id: 1, age: time.Second}, "consumer/Stable=2"),
			}})
		want := v1alpha1.GroupCounts{Total: 2, ByState: []v1alpha1.GroupCount{{Protocol: "consumer", State: "Stable", Count: 2}}}
		if !equality.Semantic.DeepEqual(got.Groups, want) {
			t.Errorf("%.40q: groups = %+v, want broker 1's alone %+v", value, got.Groups, want)
		}
		if len(got.Refused) != 1 || got.Refused[0].Broker != 0 || !strings.Contains(got.Refused[0].Problem, "none of its groups is counted") {
			t.Errorf("%.40q: refused %+v, want one for broker 0", value, got.Refused)
		}
		if got.Rows[0].Health != v1alpha1.BrokerAlive {
			t.Errorf("%.40q: broker 0 is %s; a count not believed must not change its health", value, got.Rows[0].Health)
		}
	}
}

func TestGroupSumsSaturateRatherThanWrap(t *testing.T) {
	huge := []v1alpha1.GroupCount{{Protocol: "classic", State: "Stable", Count: math.MaxInt32}}
	got := SumGroups([][]v1alpha1.GroupCount{huge, huge, {{Protocol: "consumer", State: "Empty", Count: 1}}})
	want := v1alpha1.GroupCounts{Total: math.MaxInt32, ByState: []v1alpha1.GroupCount{
		{Protocol: "classic", State: "Stable", Count: math.MaxInt32},
		{Protocol: "consumer", State: "Empty", Count: 1},
	}}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("SumGroups = %+v, want %+v", got, want)
	}
}

func TestGroupSumsAreSortedByProtocolThenState(t *testing.T) {
	got := SumGroups([][]v1alpha1.GroupCount{
		{{Protocol: "consumer", State: "Stable", Count: 1}, {Protocol: "classic", State: "Stable", Count: 1}},
		{{Protocol: "classic", State: "Empty", Count: 1}, {Protocol: "consumer", State: "Assigning", Count: 1}},
	})
	var keys []string
	for _, c := range got.ByState {
		keys = append(keys, c.Protocol+"/"+c.State)
	}
	if want := []string{"classic/Empty", "classic/Stable", "consumer/Assigning", "consumer/Stable"}; !slices.Equal(keys, want) || got.Total != 4 {
		t.Fatalf("SumGroups = %v total %d, want %v total 4", keys, got.Total, want)
	}
}
