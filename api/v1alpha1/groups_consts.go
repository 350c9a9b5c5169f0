package v1alpha1

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// What a broker says on its heartbeat Lease about the consumer groups it coordinates
// (docs/groups.md, "In the KafkaCluster status"; docs/registry.md, "What a Lease may say"),
// and how the operator sums it into the KafkaCluster's status.

// AnnotationGroups counts the consumer groups the broker coordinates and serves, by protocol
// and state, as FormatGroupCounts writes them: "classic/Stable=3,consumer/Empty=1". Absent
// when it coordinates none.
const AnnotationGroups = "kafka.paddock.dev/groups"

// The group protocols a broker may count: Apache's group types (ListGroups v5).
const (
	GroupProtocolClassic  = "classic"
	GroupProtocolConsumer = "consumer"
)

// groupStates are the states a broker may count groups of, per protocol: Apache's names
// (ListGroups, DescribeGroups, ConsumerGroupDescribe) except Dead, which a broker never
// counts (a dead group is gone).
var groupStates = map[string][]string{
	GroupProtocolClassic:  {"CompletingRebalance", "Empty", "PreparingRebalance", "Stable"},
	GroupProtocolConsumer: {"Assigning", "Empty", "Reconciling", "Stable"},
}

// MaxGroupsPerBroker bounds one count a Lease may announce and, summed over the brokers, each
// status entry: far more groups than a broker can hold (the group store's own bound is much
// lower), so a larger number is not a broker's count but a mistake.
const MaxGroupsPerBroker = 1_000_000

// maxGroupCountEntries bounds AnnotationGroups: one entry per protocol and state.
const maxGroupCountEntries = 8

// GroupCount is how many consumer groups of one protocol are in one state.
type GroupCount struct {
	// protocol is the group's protocol: classic (JoinGroup/SyncGroup) or consumer (KIP-848).
	// +kubebuilder:validation:Enum=classic;consumer
	Protocol string `json:"protocol"`
	// state is the groups' state as Apache names it: Empty, PreparingRebalance,
	// CompletingRebalance or Stable for classic groups; Empty, Assigning, Reconciling or
	// Stable for consumer groups.
	// +kubebuilder:validation:MaxLength=32
	State string `json:"state"`
	// count is the number of such groups.
	// +kubebuilder:validation:Minimum=1
	Count int32 `json:"count"`
}

func compareGroupCounts(a, b GroupCount) int {
	if c := strings.Compare(a.Protocol, b.Protocol); c != 0 {
		return c
	}
	return strings.Compare(a.State, b.State)
}

// FormatGroupCounts is the AnnotationGroups value for cs: "<protocol>/<state>=<count>" entries
// joined by commas, sorted by protocol and state; entries with a count below 1 are left out.
func FormatGroupCounts(cs []GroupCount) string {
	sorted := slices.DeleteFunc(slices.Clone(cs), func(c GroupCount) bool { return c.Count < 1 })
	slices.SortFunc(sorted, compareGroupCounts)
	parts := make([]string, len(sorted))
	for i, c := range sorted {
		parts[i] = c.Protocol + "/" + c.State + "=" + strconv.Itoa(int(c.Count))
	}
	return strings.Join(parts, ",")
}

// ReadGroupCounts reads an AnnotationGroups value strictly, as the operator must read what a
// broker says about itself: at most one entry per protocol and state, each
// "<protocol>/<state>=<count>" with a known protocol, a state of that protocol and a count
// from 1 to MaxGroupsPerBroker written without sign or leading zeros. The first entry that is
// not is the error, and nothing is returned with it. "" is no group.
func ReadGroupCounts(s string) ([]GroupCount, error) {
	return readAnnouncement(s, maxGroupCountEntries, readGroupCount,
		func(a, b GroupCount) bool { return compareGroupCounts(a, b) == 0 },
		func(c GroupCount) string { return c.Protocol + "/" + c.State })
}

func readGroupCount(e string) (GroupCount, error) {
	bad := func(why string) (GroupCount, error) {
		return GroupCount{}, fmt.Errorf("entry %.60q is not <protocol>/<state>=<count>: %s", e, why)
	}
	protocol, rest, ok := strings.Cut(e, "/")
	if !ok {
		return bad("no '/'")
	}
	state, count, ok := strings.Cut(rest, "=")
	if !ok {
		return bad("no '='")
	}
	states, known := groupStates[protocol]
	switch {
	case !known:
		return bad("the protocol is neither classic nor consumer")
	case !slices.Contains(states, state):
		return bad("not a state of a " + protocol + " group a broker counts")
	}
	n, err := readDecimal(count)
	if err != nil || n < 1 || n > MaxGroupsPerBroker {
		return bad(fmt.Sprintf("the count is not a decimal from 1 to %d", MaxGroupsPerBroker))
	}
	return GroupCount{Protocol: protocol, State: state, Count: n}, nil
}

// SumGroupCounts adds up the brokers' counts: one entry per protocol and state, sorted, each
// capped at MaxGroupsPerBroker (a status field stays bounded whatever the brokers say), and
// their total.
func SumGroupCounts(perBroker ...[]GroupCount) ([]GroupCount, int32) {
	sums := map[[2]string]int64{}
	for _, cs := range perBroker {
		for _, c := range cs {
			sums[[2]string{c.Protocol, c.State}] += int64(c.Count)
		}
	}
	out := make([]GroupCount, 0, len(sums))
	var total int64
	for k, n := range sums {
		n = min(n, MaxGroupsPerBroker)
		out = append(out, GroupCount{Protocol: k[0], State: k[1], Count: int32(n)})
		total += n
	}
	slices.SortFunc(out, compareGroupCounts)
	return out, int32(min(total, MaxGroupsPerBroker))
}
