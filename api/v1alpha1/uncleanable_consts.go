package v1alpha1

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// What a broker says on its heartbeat Lease about the compacted partitions its cleaner cannot
// clean (docs/compaction.md, "When a partition cannot be cleaned"; docs/registry.md, "What a
// Lease may say"), and the names the operator reports them under.

// AnnotationUncleanable lists the compacted partitions the broker leads whose last cleaning
// pass failed, as FormatUncleanable writes them. The partition still serves; its dirty
// section only grows until the cause is fixed (the cleaner retries every ten minutes). The
// assignment reconciler copies them into the KafkaTopic's status and records a Warning
// Event (EventPartitionUncleanable) when one appears.
const AnnotationUncleanable = "kafka.paddock.dev/uncleanable"

// MaxUncleanable bounds AnnotationUncleanable and a registry row's uncleanablePartitions.
const MaxUncleanable = 64

// EventPartitionUncleanable (a Warning, on the KafkaTopic): a compacted partition's cleaner
// failed; the message names the broker, the cause and what fixes it.
const EventPartitionUncleanable = "PartitionUncleanable"

// UncleanableCause is why a cleaning pass failed.
// +kubebuilder:validation:Enum=OffsetMapTooSmall;CorruptBatch;Failed
type UncleanableCause string

const (
	// CauseOffsetMapTooSmall: one batch has more keys than log.cleaner.dedupe.buffer.size
	// holds; raising it fixes the partition.
	CauseOffsetMapTooSmall UncleanableCause = "OffsetMapTooSmall"
	// CauseCorruptBatch: a stored batch does not decode (its records section, not its CRC,
	// which reads would refuse too); the broker's log names the offset.
	CauseCorruptBatch UncleanableCause = "CorruptBatch"
	// CauseFailed: any other error of the pass (the broker's log says which).
	CauseFailed UncleanableCause = "Failed"
)

func (c UncleanableCause) known() bool {
	return c == CauseOffsetMapTooSmall || c == CauseCorruptBatch || c == CauseFailed
}

// UncleanablePartition is one compacted partition a broker's cleaner cannot clean.
type UncleanablePartition struct {
	// topicID is the topic's status.topicID.
	// +kubebuilder:validation:MaxLength=22
	TopicID string `json:"topicID"`
	// partition is the partition index.
	// +kubebuilder:validation:Minimum=0
	Partition int32 `json:"partition"`
	// cause is why its last cleaning pass failed.
	Cause UncleanableCause `json:"cause"`
}

// FormatUncleanable is the AnnotationUncleanable value for us: "<topicID>/<partition>=<cause>"
// entries joined by commas, sorted by topic id and partition; at most MaxUncleanable of them
// (the first ones in that order).
func FormatUncleanable(us []UncleanablePartition) string {
	sorted := slices.Clone(us)
	slices.SortFunc(sorted, compareUncleanable)
	sorted = sorted[:min(len(sorted), MaxUncleanable)]
	parts := make([]string, len(sorted))
	for i, u := range sorted {
		parts[i] = u.TopicID + "/" + strconv.Itoa(int(u.Partition)) + "=" + string(u.Cause)
	}
	return strings.Join(parts, ",")
}

func compareUncleanable(a, b UncleanablePartition) int {
	if c := strings.Compare(a.TopicID, b.TopicID); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// ReadUncleanable reads an AnnotationUncleanable value strictly, as the operator must read
// what a broker says about itself: at most MaxUncleanable entries, each
// "<topicID>/<partition>=<cause>" with a topic id of 22 base64url characters, a partition
// decimal ≥ 0, a known cause, no partition twice. The first entry that is not is the error,
// and nothing is returned with it. "" is none.
func ReadUncleanable(s string) ([]UncleanablePartition, error) {
	return readAnnouncement(s, MaxUncleanable, readUncleanable,
		func(a, b UncleanablePartition) bool { return compareUncleanable(a, b) == 0 },
		func(u UncleanablePartition) string { return fmt.Sprintf("partition %s/%d", u.TopicID, u.Partition) })
}

func readUncleanable(e string) (UncleanablePartition, error) {
	bad := func(why string) (UncleanablePartition, error) {
		return UncleanablePartition{}, fmt.Errorf("entry %.60q is not <topicID>/<partition>=<cause>: %s", e, why)
	}
	id, rest, ok := strings.Cut(e, "/")
	if !ok {
		return bad("no '/'")
	}
	if _, err := ParseKafkaUUID(id); err != nil || len(id) != 22 {
		return bad("the topic id is not 22 base64url characters")
	}
	part, cause, ok := strings.Cut(rest, "=")
	if !ok {
		return bad("no '='")
	}
	p, err := readDecimal(part)
	if err != nil {
		return bad("partition: " + err.Error())
	}
	if c := UncleanableCause(cause); !c.known() {
		return bad(fmt.Sprintf("cause %.30q is not %s, %s or %s", cause, CauseOffsetMapTooSmall, CauseCorruptBatch, CauseFailed))
	}
	return UncleanablePartition{TopicID: id, Partition: p, Cause: UncleanableCause(cause)}, nil
}
