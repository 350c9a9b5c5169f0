package v1alpha1

import (
	"slices"
	"strings"
	"testing"
)

func TestGroupCountsAnnouncementRoundTripsSortedWithoutEmptyEntries(t *testing.T) {
	in := []GroupCount{
		{Protocol: "consumer", State: "Stable", Count: 2},
		{Protocol: "classic", State: "Stable", Count: 3},
		{Protocol: "classic", State: "Empty", Count: 0}, // nothing to say
		{Protocol: "classic", State: "PreparingRebalance", Count: 1},
	}
	s := FormatGroupCounts(in)
	if want := "classic/PreparingRebalance=1,classic/Stable=3,consumer/Stable=2"; s != want {
		t.Fatalf("FormatGroupCounts = %q, want %q", s, want)
	}
	got, err := ReadGroupCounts(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []GroupCount{{"classic", "PreparingRebalance", 1}, {"classic", "Stable", 3}, {"consumer", "Stable", 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("ReadGroupCounts = %+v, want %+v", got, want)
	}
	if got, err := ReadGroupCounts(""); err != nil || len(got) != 0 {
		t.Fatalf(`ReadGroupCounts("") = %+v, %v; want no group`, got, err)
	}
}

// What a broker says of its groups is a count the operator shows; it must read strictly, or
// not at all, and never as a number a status field cannot hold.
func TestAGroupCountsAnnouncementIsReadStrictlyOrNotAtAll(t *testing.T) {
	for _, tc := range []struct{ rule, value, why string }{
		{"an unknown protocol", "share/Stable=1", "neither classic nor consumer"},
		{"a state of the other protocol", "classic/Reconciling=1", "not a state of a classic group"},
		{"Dead groups are never counted", "consumer/Dead=1", "not a state"},
		{"a zero count", "classic/Stable=0", "count is not a decimal"},
		{"a negative count", "classic/Stable=-1", "count is not a decimal"},
		{"a leading zero", "classic/Stable=01", "count is not a decimal"},
		{"a count past the bound", "classic/Stable=1000001", "count is not a decimal"},
		{"a count past int32", "classic/Stable=99999999999", "count is not a decimal"},
		{"no state", "classic=1", "no '/'"},
		{"no count", "classic/Stable", "no '='"},
		{"an entry twice", "classic/Stable=1,classic/Stable=2", "listed twice"},
		{"an empty entry", "classic/Stable=1,", "no '/'"},
		{"too many entries", strings.Repeat("classic/Stable=1,", 8) + "classic/Stable=1", "more than 8"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got, err := ReadGroupCounts(tc.value)
			if err == nil || !strings.Contains(err.Error(), tc.why) || got != nil {
				t.Fatalf("ReadGroupCounts(%q) = %+v, %v; want nothing and an error saying %q", tc.value, got, err, tc.why)
			}
		})
	}
}

func TestTheClustersGroupCountsAreTheBrokersSummedAndBounded(t *testing.T) {
	sum, total := SumGroupCounts(
		[]GroupCount{{"classic", "Stable", 3}, {"consumer", "Empty", 1}},
		nil,
		[]GroupCount{{"classic", "Stable", 2}, {"classic", "Empty", 4}},
	)
	want := []GroupCount{{"classic", "Empty", 4}, {"classic", "Stable", 5}, {"consumer", "Empty", 1}}
	if !slices.Equal(sum, want) || total != 10 {
		t.Fatalf("SumGroupCounts = %+v total %d, want %+v total 10", sum, total, want)
	}
	sum, total = SumGroupCounts([]GroupCount{{"classic", "Stable", MaxGroupsPerBroker}}, []GroupCount{{"classic", "Stable", MaxGroupsPerBroker}, {"consumer", "Stable", 1}})
	if sum[0].Count != MaxGroupsPerBroker || total != MaxGroupsPerBroker {
		t.Fatalf("SumGroupCounts past the bound = %+v total %d, want each entry and the total capped at %d", sum, total, MaxGroupsPerBroker)
	}
	if sum, total := SumGroupCounts(); len(sum) != 0 || total != 0 {
		t.Fatalf("SumGroupCounts() = %+v, %d; want none", sum, total)
	}
}
