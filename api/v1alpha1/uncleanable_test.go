package v1alpha1

import (
	"slices"
	"strings"
	"testing"
)

func TestUncleanableAnnouncementRoundTrips(t *testing.T) {
	in := []UncleanablePartition{{TopicID: topicA, Partition: 3, Cause: CauseCorruptBatch}, {TopicID: topicA, Partition: 0, Cause: CauseOffsetMapTooSmall}}
	s := FormatUncleanable(in)
	if s != topicA+"/0=OffsetMapTooSmall,"+topicA+"/3=CorruptBatch" {
		t.Fatalf("FormatUncleanable = %q", s)
	}
	got, err := ReadUncleanable(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []UncleanablePartition{in[1], in[0]}
	if !slices.Equal(got, want) {
		t.Fatalf("ReadUncleanable = %+v, want %+v", got, want)
	}
	if got, err := ReadUncleanable(""); err != nil || len(got) != 0 {
		t.Fatalf(`ReadUncleanable("") = %+v, %v; want none`, got, err)
	}
	many := make([]UncleanablePartition, MaxUncleanable+5)
	for i := range many {
		many[i] = UncleanablePartition{TopicID: topicA, Partition: int32(i), Cause: CauseFailed}
	}
	if got, err := ReadUncleanable(FormatUncleanable(many)); err != nil || len(got) != MaxUncleanable {
		t.Fatalf("a long list is written as its first %d entries: read %d, %v", MaxUncleanable, len(got), err)
	}
}

func TestAnUncleanableAnnouncementIsReadStrictlyOrNotAtAll(t *testing.T) {
	many := make([]string, MaxUncleanable+1)
	for i := range many {
		many[i] = topicA + "/1=Failed"
	}
	for _, tc := range []struct{ rule, value, says string }{
		{"a topic id that is no id", "orders/0=Failed", "topic id"},
		{"no cause", topicA + "/1", "no '='"},
		{"an unknown cause", topicA + "/1=Tired", "cause"},
		{"a cause in another case", topicA + "/1=failed", "cause"},
		{"a partition with leading zeros", topicA + "/01=Failed", "partition"},
		{"a partition listed twice", topicA + "/1=Failed," + topicA + "/1=CorruptBatch", "twice"},
		{"more entries than a row holds", strings.Join(many, ","), "more than 64"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got, err := ReadUncleanable(tc.value)
			if err == nil || got != nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("ReadUncleanable(%.60q) = %+v, %v; want nothing and an error saying %q", tc.value, got, err, tc.says)
			}
		})
	}
}
