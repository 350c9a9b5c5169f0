package v1alpha1

import (
	"slices"
	"strings"
	"testing"
)

func TestGroupCountsAnnouncementRoundTrips(t *testing.T) {
	in := []GroupCount{
		{GroupProtocolConsumer, "Stable", 2},
		{GroupProtocolClassic, "Stable", 1},
		{GroupProtocolClassic, "Empty", 3},
		{GroupProtocolConsumer, "Dead", 1},              // not a counted state: left out
		{GroupProtocolClassic, "PreparingRebalance", 0}, // no group: left out
	}
	s := FormatGroupCounts(in)
	if s != "classic/Empty=3,classic/Stable=1,consumer/Stable=2" {
		t.Fatalf("FormatGroupCounts = %q", s)
	}
	got, err := ReadGroupCounts(s)
	want := []GroupCount{{GroupProtocolClassic, "Empty", 3}, {GroupProtocolClassic, "Stable", 1}, {GroupProtocolConsumer, "Stable", 2}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ReadGroupCounts = %+v, %v; want %+v", got, err, want)
	}
	if got, err := ReadGroupCounts(""); err != nil || len(got) != 0 {
		t.Fatalf(`ReadGroupCounts("") = %+v, %v; want no group`, got, err)
	}
	if s := FormatGroupCounts(nil); s != "" {
		t.Fatalf("FormatGroupCounts(nil) = %q, want empty", s)
	}
}

func TestEveryCountedStateIsOneTheBrokerCountsIn(t *testing.T) {
	// The broker's group states (broker/groups) are Apache's; Dead is never counted.
	for protocol, states := range map[string][]string{
		GroupProtocolClassic:  {"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"},
		GroupProtocolConsumer: {"Empty", "Assigning", "Reconciling", "Stable"},
	} {
		for _, state := range states {
			if !KnownGroupState(protocol, state) {
				t.Errorf("%s/%s is not counted", protocol, state)
			}
		}
		if KnownGroupState(protocol, "Dead") {
			t.Errorf("%s/Dead is counted", protocol)
		}
	}
	if KnownGroupState(GroupProtocolClassic, "Assigning") || KnownGroupState("share", "Stable") {
		t.Error("a state of another protocol, or another protocol, is counted")
	}
}

func TestAGroupCountsAnnouncementIsReadStrictlyOrNotAtAll(t *testing.T) {
	for _, tc := range []struct{ rule, value, says string }{
		{"an unknown protocol", "share/Stable=1", "protocol"},
		{"a state of another protocol", "classic/Assigning=1", "state"},
		{"the Dead state", "consumer/Dead=1", "state"},
		{"a state in other case", "classic/stable=1", "state"},
		{"no count", "classic/Stable", "no '='"},
		{"no state", "classic=1", "no '/'"},
		{"a negative count", "classic/Stable=-1", "count"},
		{"a count of zero", "classic/Stable=0", "count"},
		{"a count with a leading zero", "classic/Stable=01", "count"},
		{"a count with a sign", "classic/Stable=+1", "count"},
		{"a count beyond 32 bits", "classic/Stable=2147483648", "count"},
		{"a count that is no number", "classic/Stable=1e3", "count"},
		{"an empty entry", "classic/Stable=1,", "no '='"},
		{"a protocol and state twice", "classic/Stable=1,classic/Stable=2", "twice"},
		{"a value longer than the bound", strings.Repeat("classic/Stable=1,", 40), "more than 512"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got, err := ReadGroupCounts(tc.value)
			if err == nil || got != nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("ReadGroupCounts(%.60q) = %+v, %v; want nothing and an error saying %q", tc.value, got, err, tc.says)
			}
		})
	}
}
