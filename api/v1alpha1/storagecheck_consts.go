package v1alpha1

import (
	"fmt"
	"strings"
)

// The storage check (docs/storage.md, "The storage check"): a Job of two pods on different
// nodes that exercises the cluster's data claim with `paddock storage check`, and the
// StorageVerified condition the provisioning reconciler writes from its result.

// StorageVerification says what a failed storage check does.
// +kubebuilder:validation:Enum=Enforce;Report;Skip
type StorageVerification string

const (
	// StorageVerificationEnforce runs the check and, when a property fails, holds the brokers
	// (the StatefulSet is scaled to zero) until the storage is fixed or the user opts out.
	StorageVerificationEnforce StorageVerification = "Enforce"
	// StorageVerificationReport runs the check and reports it, never holding the brokers.
	StorageVerificationReport StorageVerification = "Report"
	// StorageVerificationSkip does not run the check.
	StorageVerificationSkip StorageVerification = "Skip"
)

// ConditionStorageVerified is True when the storage check proved, from two nodes, every
// property of the data volume the storage rules rely on (KafkaCluster).
const ConditionStorageVerified = "StorageVerified"

// StorageVerified reasons.
const (
	// ReasonStorageVerified: every property held on the data claim, checked from two nodes.
	ReasonStorageVerified = "StorageVerified"
	// ReasonStorageCheckFailed: a property failed; the message names each. Under
	// verification Enforce the brokers are held.
	ReasonStorageCheckFailed = "StorageCheckFailed"
	// ReasonCheckRunning: the storage check Job has not finished yet (or waits for the data
	// claim to be bound).
	ReasonCheckRunning = "CheckRunning"
	// ReasonCheckNotRun: the check did not run or could not finish (ephemeral storage, a
	// claim one node mounts, verification Skip, one node only, a deadline); the message says
	// why. It holds nothing.
	ReasonCheckNotRun = "CheckNotRun"
)

// AnnotationStorageDigest on the storage check Job is the digest of what the check checked:
// the storage spec's type, class, access mode and size and the volume the claim is bound to.
// A different digest replaces the Job (the check runs again).
const AnnotationStorageDigest = "kafka.paddock.dev/storage-digest"

// LabelStorageCheck is on the storage check's pods, with the cluster's name: their
// anti-affinity and headless Service select on it. The pods carry kafka.paddock.dev/cluster
// (the manager caches only labelled pods) but not app.kubernetes.io/name, so no selector of
// the brokers (StatefulSet, Services, PodDisruptionBudget, NetworkPolicy) picks them up.
const LabelStorageCheck = "kafka.paddock.dev/storage-check"

// StorageCheckJobName is the storage check Job of cluster; its headless Service has the same
// name, and its pods the hostnames <name>-0 (the checker) and <name>-1 (the peer).
func StorageCheckJobName(cluster string) string { return cluster + "-storage-check" }

// StorageCheckPort is the port the storage check's peer serves its file-system calls on.
const StorageCheckPort int32 = 7070

// StorageCheckResult is one property as the storage check's checker reports it in its
// termination message: one line each, "ok|FAIL <property>: <detail>".
// +kubebuilder:object:generate=false
type StorageCheckResult struct {
	Property string
	OK       bool
	Detail   string
}

// FormatStorageCheckResults is the checker's termination message for results, kept under the
// 4096 bytes a termination message may hold by shortening details.
func FormatStorageCheckResults(results []StorageCheckResult) string {
	per := 4000 / max(len(results), 1)
	var b strings.Builder
	for _, r := range results {
		verdict := "ok"
		if !r.OK {
			verdict = "FAIL"
		}
		line := fmt.Sprintf("%s %s: %s", verdict, r.Property, strings.ReplaceAll(r.Detail, "\n", " "))
		if len(line) > per {
			line = line[:per-3] + "..."
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// ParseStorageCheckResults reads a termination message FormatStorageCheckResults wrote. Lines
// that are not results (a log tail, after FallbackToLogsOnError) are skipped; ok is false when
// there was no result at all.
func ParseStorageCheckResults(msg string) (results []StorageCheckResult, ok bool) {
	for line := range strings.SplitSeq(msg, "\n") {
		verdict, rest, found := strings.Cut(strings.TrimSpace(line), " ")
		if !found || (verdict != "ok" && verdict != "FAIL") {
			continue
		}
		property, detail, found := strings.Cut(rest, ": ")
		if !found {
			property, detail = strings.TrimSuffix(rest, ":"), ""
		}
		results = append(results, StorageCheckResult{Property: property, OK: verdict == "ok", Detail: detail})
	}
	return results, len(results) > 0
}
