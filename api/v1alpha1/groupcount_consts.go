package v1alpha1

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// What a broker says on its heartbeat Lease about the consumer groups it coordinates, and how
// the KafkaCluster status counts them (docs/groups.md, "Visibility"; docs/registry.md, "What a
// Lease may say").

// AnnotationGroups counts the groups the broker holds and serves (their coordinator is this
// broker and their state is loaded), by protocol and state, as FormatGroupCounts writes them:
// "<protocol>/<state>=<count>" entries, e.g. "classic/Stable=3,consumer/Empty=1". Absent when
// the broker holds no group. Written with each renewal, never on a group change of its own.
const AnnotationGroups = "kafka.paddock.dev/groups"

// The group protocols a count may name: Apache's group types.
const (
	GroupProtocolClassic  = "classic"
	GroupProtocolConsumer = "consumer"
)

// groupStates are the states a group of each protocol is counted in: Apache's states without
// Dead (a dead group is gone and counted nowhere).
var groupStates = map[string][]string{
	GroupProtocolClassic:  {"CompletingRebalance", "Empty", "PreparingRebalance", "Stable"},
	GroupProtocolConsumer: {"Assigning", "Empty", "Reconciling", "Stable"},
}

// MaxGroupCountsLength bounds an AnnotationGroups value: every protocol and state once with a
// ten-digit count fits in well under half of it.
const MaxGroupCountsLength = 512

// GroupCount is how many groups of one protocol are in one state.
type GroupCount struct {
	// protocol is the groups' protocol: classic (JoinGroup/SyncGroup) or consumer (KIP-848's
	// ConsumerGroupHeartbeat).
	// +kubebuilder:validation:Enum=classic;consumer
	Protocol string `json:"protocol"`
	// state is the groups' state: Empty, PreparingRebalance, CompletingRebalance or Stable for
	// a classic group; Empty, Assigning, Reconciling or Stable for a consumer group.
	// +kubebuilder:validation:MaxLength=32
	State string `json:"state"`
	// count is how many groups of that protocol are in that state.
	// +kubebuilder:validation:Minimum=1
	Count int32 `json:"count"`
}

// GroupCounts counts a cluster's consumer groups.
type GroupCounts struct {
	// total is the number of groups the serving brokers coordinate.
	// +kubebuilder:validation:Minimum=0
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Groups"
	Total int32 `json:"total"`
	// byState counts them by protocol and state, sorted by protocol then state; a protocol
	// and state without groups is left out.
	// +optional
	// +listType=map
	// +listMapKey=protocol
	// +listMapKey=state
	// +kubebuilder:validation:MaxItems=8
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Groups by State"
	ByState []GroupCount `json:"byState,omitempty"`
}

// KnownGroupState reports whether a group of protocol may be counted in state.
func KnownGroupState(protocol, state string) bool {
	return slices.Contains(groupStates[protocol], state)
}

func compareGroupCounts(a, b GroupCount) int {
	return cmp.Or(strings.Compare(a.Protocol, b.Protocol), strings.Compare(a.State, b.State))
}

// FormatGroupCounts is the AnnotationGroups value for cs: "<protocol>/<state>=<count>"
// entries joined by commas, sorted by protocol and state. Entries of an unknown protocol or
// state, or a count below 1, are left out (the operator would refuse the whole value for
// them); "" when none is left.
func FormatGroupCounts(cs []GroupCount) string {
	sorted := slices.DeleteFunc(slices.Clone(cs), func(c GroupCount) bool {
		return c.Count < 1 || !KnownGroupState(c.Protocol, c.State)
	})
	slices.SortFunc(sorted, compareGroupCounts)
	parts := make([]string, len(sorted))
	for i, c := range sorted {
		parts[i] = c.Protocol + "/" + c.State + "=" + strconv.Itoa(int(c.Count))
	}
	return strings.Join(parts, ",")
}

// ReadGroupCounts reads an AnnotationGroups value strictly, as the operator must read what a
// broker says about itself: at most MaxGroupCountsLength bytes of entries
// "<protocol>/<state>=<count>", a known protocol and one of its states (KnownGroupState),
// the count a decimal ≥ 1 within int32 without sign or leading zeros, no protocol and state
// twice. The first entry that is not is the error, and nothing is returned with it. The
// result is sorted by protocol and state. "" is no group.
func ReadGroupCounts(s string) ([]GroupCount, error) {
	if s == "" {
		return []GroupCount{}, nil
	}
	if len(s) > MaxGroupCountsLength {
		return nil, fmt.Errorf("%d bytes, more than %d", len(s), MaxGroupCountsLength)
	}
	entries := strings.Split(s, ",")
	out := make([]GroupCount, 0, len(entries))
	for _, e := range entries {
		c, err := readGroupCount(e)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(d GroupCount) bool { return d.Protocol == c.Protocol && d.State == c.State }) {
			return nil, fmt.Errorf("%s/%s listed twice", c.Protocol, c.State)
		}
		out = append(out, c)
	}
	slices.SortFunc(out, compareGroupCounts)
	return out, nil
}

func readGroupCount(e string) (GroupCount, error) {
	bad := func(why string) (GroupCount, error) {
		return GroupCount{}, fmt.Errorf("entry %.60q is not <protocol>/<state>=<count>: %s", e, why)
	}
	key, count, ok := strings.Cut(e, "=")
	if !ok {
		return bad("no '='")
	}
	protocol, state, ok := strings.Cut(key, "/")
	if !ok {
		return bad("no '/'")
	}
	if _, known := groupStates[protocol]; !known {
		return bad("the protocol is not classic or consumer")
	}
	if !KnownGroupState(protocol, state) {
		return bad("the state is not one a " + protocol + " group is counted in")
	}
	n, err := readDecimal(count)
	if err != nil || n < 1 {
		return bad("the count is not a decimal ≥ 1")
	}
	return GroupCount{Protocol: protocol, State: state, Count: n}, nil
}
