package recovery

import (
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// The fence gate believes a leader's claims digest only from the incarnation the assignment
// gave the partitions to (docs/recovery.md, "The fence gate"): a digest copied from the
// assignment by a process the partitions were not given to releases nothing.
func TestAClaimIsBelievedOnlyFromTheIncarnationTheAssignmentGaveThePartitionsTo(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	given := func() Facts {
		f := lostBroker(clk)
		for i := range f.Partitions {
			f.Partitions[i].Incarnation = map[int32]int64{0: 4, 2: 7}[f.Partitions[i].Leader]
		}
		f.ClaimedBy = map[int32]int64{0: 4, 2: 7}
		return f
	}
	if v := Decide(given()); !v.Delete {
		t.Fatalf("claims of the incarnations the partitions were given to: got %+v, want a force delete", v)
	}
	for _, tc := range []struct {
		rule string
		edit func(*Facts)
	}{
		{"a digest announced by an earlier incarnation of the leader", func(f *Facts) { f.ClaimedBy[2] = 6 }},
		{"a digest announced by a later incarnation the assignment has not given the partitions to yet", func(f *Facts) { f.ClaimedBy[0] = 5 }},
		{"a leader whose partitions were given to two incarnations", func(f *Facts) { f.Partitions[1].Incarnation = 6 }},
		{"a digest of more partitions than the assignment gave", func(f *Facts) {
			f.Claimed[0] = kafkav1alpha1.FormatClaims([]kafkav1alpha1.PartitionClaim{
				{TopicID: "AAAAAAAAAAAAAAAAAAAAAA", Partition: 0, Epoch: 3}, {TopicID: "AAAAAAAAAAAAAAAAAAAAAA", Partition: 1, Epoch: 5}})
		}},
		{"a digest of the right partitions at an older epoch", func(f *Facts) {
			f.Claimed[0] = kafkav1alpha1.FormatClaims([]kafkav1alpha1.PartitionClaim{{TopicID: "AAAAAAAAAAAAAAAAAAAAAA", Partition: 0, Epoch: 2}})
		}},
		{"a digest with the right count and a made-up hash", func(f *Facts) { f.Claimed[0] = "1/deadbeefdeadbeef" }},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			f := given()
			tc.edit(&f)
			if v := Decide(f); v.Delete || v.Reason != kafkav1alpha1.ReasonPartitionsNotClaimed {
				t.Fatalf("got %+v, want the recovery held back with %s", v, kafkav1alpha1.ReasonPartitionsNotClaimed)
			}
		})
	}
}

func TestAClaimsValueThatCannotBeADigestIsRefused(t *testing.T) {
	for _, tc := range []struct {
		value      string
		partitions int
		why        string // "" = accepted
	}{
		{kafkav1alpha1.FormatClaims(nil), 0, ""},
		{kafkav1alpha1.FormatClaims([]kafkav1alpha1.PartitionClaim{{TopicID: "A", Partition: 0, Epoch: 1}}), 3, ""},
		{"4/abc", 3, "claims 4 partitions, and the cluster has 3"},
		{"1", 3, "not <count>/<digest>"},
		{"-1/abc", 3, "not <count>/<digest>"},
		{"01/abc", 3, "not <count>/<digest>"},
		{"1/", 3, "not 1 to 16 hex digits"},
		{"1/ABC", 3, "not 1 to 16 hex digits"},
		{"1/" + strings.Repeat("f", 17), 3, "not 1 to 16 hex digits"},
		{"all of them", 3, "not <count>/<digest>"},
	} {
		got := ReadClaims(tc.value, tc.partitions)
		if (tc.why == "") != (got == "") || !strings.Contains(got, tc.why) {
			t.Errorf("ReadClaims(%q, %d) = %q, want %q", tc.value, tc.partitions, got, tc.why)
		}
	}
}

func TestAutoRecoverAcceptsTrueOrFalseOnly(t *testing.T) {
	for _, tc := range []struct {
		value   *string
		on      bool
		refused bool
	}{
		{nil, true, false},
		{strptr("true"), true, false},
		{strptr("false"), false, false},
		{strptr("False"), true, true},
		{strptr("no"), true, true},
		{strptr("0"), true, true},
		{strptr(""), true, true},
	} {
		annotations := map[string]string{}
		if tc.value != nil {
			annotations[kafkav1alpha1.AnnotationAutoRecover] = *tc.value
		}
		on, problem := ReadAutoRecover(annotations)
		if on != tc.on || (problem != "") != tc.refused {
			t.Errorf("auto-recover %v: on %v, problem %q; want on %v, refused %v", tc.value, on, problem, tc.on, tc.refused)
		}
		if tc.refused && !strings.Contains(problem, "stays on") {
			t.Errorf("the problem should say recovery stays on: %q", problem)
		}
	}
}

func strptr(s string) *string { return &s }
