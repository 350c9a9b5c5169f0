package v1alpha1

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// What a broker says on its heartbeat Lease about storage it cannot use (docs/storage.md, "A
// failed partition comes back"; docs/registry.md, "What a Lease may say"), and the names the
// operator reports it under.

// AnnotationFailed lists the partitions whose storage failed on this broker recently, as
// FormatFailures writes them: every partition it holds failed now (KAFKA_STORAGE_ERROR), and
// every partition that failed here more than once within the broker's memory of failures
// (ten minutes), held or not. The assignment reconciler retries a partition that failed once
// at the next epoch on the same broker, and moves one that failed here again to another
// broker, which it then keeps away from this one while the broker remembers.
const AnnotationFailed = "kafka.paddock.dev/failed"

// AnnotationMountRefused says why the broker refuses to serve from its data volume's mount
// (storage.CheckMount: an NFS older than v4.1, a soft mount, ...): the reasons joined by
// "; ", at most MaxMountRefusedLength bytes. Absent or empty when the mount is accepted. The
// KafkaCluster reports it in a Degraded condition (ReasonMountRefused).
const AnnotationMountRefused = "kafka.paddock.dev/mount-refused"

// MaxFailures bounds AnnotationFailed and a registry row's failedPartitions: a broker that
// fails more partitions than this at once has a failing volume, which its probe reports
// (unhealthy) and which moves every partition.
const MaxFailures = 64

// MaxMountRefusedLength bounds AnnotationMountRefused and a row's mountRefused.
const MaxMountRefusedLength = 512

// ReasonMountRefused (Degraded, KafkaCluster): a broker refuses to serve from its data
// volume's mount; the message names the broker and the mount option.
const ReasonMountRefused = "MountRefused"

// ReasonPartitionsFailed (Degraded, KafkaTopic): a partition's storage failed on every alive
// broker it may go to; it stays offline until a failure is forgotten or a broker joins.
const ReasonPartitionsFailed = "PartitionsFailed"

// EventPartitionFailed (a Warning, on the KafkaTopic): a partition's storage failed on its
// leader; the message says where and what the assignment did: taken over again on the same
// broker, moved, or left offline because it failed everywhere.
const EventPartitionFailed = "PartitionFailed"

// PartitionFailure is one partition whose storage failed on a broker.
type PartitionFailure struct {
	// topicID is the topic's status.topicID.
	// +kubebuilder:validation:MaxLength=22
	TopicID string `json:"topicID"`
	// partition is the partition index.
	// +kubebuilder:validation:Minimum=0
	Partition int32 `json:"partition"`
	// epoch is the leader epoch it last failed at on this broker.
	// +kubebuilder:validation:Minimum=0
	Epoch int32 `json:"epoch"`
	// failures is how many times it failed on this broker within the broker's memory of
	// failures: 1 is retried on the same broker, more moves it away.
	// +kubebuilder:validation:Minimum=1
	Failures int32 `json:"failures"`
}

// FormatFailures is the AnnotationFailed value for fs: "<topicID>/<partition>@<epoch>x<failures>"
// entries joined by commas, sorted by topic id and partition; at most MaxFailures of them (the
// first ones in that order).
func FormatFailures(fs []PartitionFailure) string {
	sorted := slices.Clone(fs)
	slices.SortFunc(sorted, comparePartitionFailures)
	sorted = sorted[:min(len(sorted), MaxFailures)]
	parts := make([]string, len(sorted))
	for i, f := range sorted {
		parts[i] = f.TopicID + "/" + strconv.Itoa(int(f.Partition)) + "@" + strconv.Itoa(int(f.Epoch)) + "x" + strconv.Itoa(int(f.Failures))
	}
	return strings.Join(parts, ",")
}

func comparePartitionFailures(a, b PartitionFailure) int {
	if c := strings.Compare(a.TopicID, b.TopicID); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// ReadFailures reads an AnnotationFailed value strictly, as the operator must read what a
// broker says about itself: at most MaxFailures entries, each
// "<topicID>/<partition>@<epoch>x<failures>" with a topic id of 22 base64url characters,
// partition and epoch decimals ≥ 0, failures ≥ 1, no partition twice. The first entry that
// is not is the error, and nothing is returned with it. "" is no failure.
func ReadFailures(s string) ([]PartitionFailure, error) {
	return readAnnouncement(s, MaxFailures, readFailure,
		func(a, b PartitionFailure) bool { return comparePartitionFailures(a, b) == 0 },
		func(f PartitionFailure) string { return fmt.Sprintf("partition %s/%d", f.TopicID, f.Partition) })
}

func readFailure(e string) (PartitionFailure, error) {
	bad := func(why string) (PartitionFailure, error) {
		return PartitionFailure{}, fmt.Errorf("entry %.60q is not <topicID>/<partition>@<epoch>x<failures>: %s", e, why)
	}
	id, rest, ok := strings.Cut(e, "/")
	if !ok {
		return bad("no '/'")
	}
	if _, err := ParseKafkaUUID(id); err != nil || len(id) != 22 {
		return bad("the topic id is not 22 base64url characters")
	}
	part, rest, ok := strings.Cut(rest, "@")
	if !ok {
		return bad("no '@'")
	}
	epoch, failures, ok := strings.Cut(rest, "x")
	if !ok {
		return bad("no 'x'")
	}
	p, perr := readDecimal(part)
	ep, eerr := readDecimal(epoch)
	n, nerr := readDecimal(failures)
	switch {
	case perr != nil:
		return bad("partition: " + perr.Error())
	case eerr != nil:
		return bad("epoch: " + eerr.Error())
	case nerr != nil || n < 1:
		return bad("failures is not a decimal ≥ 1")
	}
	return PartitionFailure{TopicID: id, Partition: p, Epoch: ep, Failures: n}, nil
}

// readDecimal reads a non-negative int32 written without sign or leading zeros.
func readDecimal(s string) (int32, error) {
	if s == "" || s[0] == '+' || s[0] == '-' || len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%.12q is not a decimal without sign or leading zeros", s)
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%.12q is not a 32-bit decimal", s)
	}
	return int32(v), nil
}

// ReadMountRefused reads an AnnotationMountRefused value strictly: at most
// MaxMountRefusedLength bytes of printable ASCII. It is text for people, shown in a condition.
func ReadMountRefused(s string) (string, error) {
	if len(s) > MaxMountRefusedLength {
		return "", fmt.Errorf("%d bytes, more than %d", len(s), MaxMountRefusedLength)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return "", fmt.Errorf("byte %d is not printable ASCII", i)
		}
	}
	return s, nil
}
