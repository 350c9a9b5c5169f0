package v1alpha1

import (
	"slices"
	"strings"
	"testing"
)

const topicA = "AAAAAAAAAAAAAAAAAAAAAQ" // 22 base64url characters: a 16-byte id

func TestFailuresAnnouncementRoundTrips(t *testing.T) {
	in := []PartitionFailure{{TopicID: topicA, Partition: 3, Epoch: 7, Failures: 2}, {TopicID: topicA, Partition: 0, Epoch: 0, Failures: 1}}
	s := FormatFailures(in)
	if s != topicA+"/0@0x1,"+topicA+"/3@7x2" {
		t.Fatalf("FormatFailures = %q", s)
	}
	got, err := ReadFailures(s)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(in)
	slices.SortFunc(want, comparePartitionFailures)
	if !slices.Equal(got, want) {
		t.Fatalf("ReadFailures = %+v, want %+v", got, want)
	}
	if got, err := ReadFailures(""); err != nil || len(got) != 0 {
		t.Fatalf(`ReadFailures("") = %+v, %v; want no failure`, got, err)
	}
}

func TestAFailuresAnnouncementIsReadStrictlyOrNotAtAll(t *testing.T) {
	many := make([]string, MaxFailures+1)
	for i := range many {
		many[i] = topicA + "/" + strings.Repeat("1", 1) + "@1x1"
	}
	for _, tc := range []struct{ rule, value, says string }{
		{"a topic id that is no id", "orders/0@1x1", "topic id"},
		{"a partition with a sign", topicA + "/-1@1x1", "partition"},
		{"an epoch with leading zeros", topicA + "/1@01x1", "epoch"},
		{"no failure count", topicA + "/1@1", "no 'x'"},
		{"a failure count of zero", topicA + "/1@1x0", "failures"},
		{"an epoch beyond 32 bits", topicA + "/1@4294967296x1", "32-bit"},
		{"a partition listed twice", topicA + "/1@1x1," + topicA + "/1@2x1", "twice"},
		{"more entries than a row holds", strings.Join(many, ","), "more than 64"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got, err := ReadFailures(tc.value)
			if err == nil || got != nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("ReadFailures(%.60q) = %+v, %v; want nothing and an error saying %q", tc.value, got, err, tc.says)
			}
		})
	}
}

func TestAMountRefusalIsPrintableTextOfBoundedLength(t *testing.T) {
	if got, err := ReadMountRefused("soft: a soft mount fails an fsync with EIO"); err != nil || got == "" {
		t.Fatalf("a plain refusal: %q, %v", got, err)
	}
	if _, err := ReadMountRefused("soft\x1b[31m"); err == nil {
		t.Fatal("a refusal with a control byte was believed")
	}
	if _, err := ReadMountRefused(strings.Repeat("a", MaxMountRefusedLength+1)); err == nil {
		t.Fatal("a refusal longer than the row holds was believed")
	}
}
