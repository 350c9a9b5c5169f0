package kafkacluster

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

func checkPodOf(index, node string, term *corev1.ContainerStateTerminated, conds ...corev1.PodCondition) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-storage-check-" + index + "-x", Annotations: map[string]string{jobCompletionIndex: index}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Conditions: conds},
	}
	st := corev1.ContainerStatus{Name: "check"}
	if term != nil {
		st.State.Terminated = term
	} else {
		st.State.Running = &corev1.ContainerStateRunning{}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{st}
	return p
}

func TestStorageVerifiedCondition(t *testing.T) {
	rwx := kafkav1alpha1.Storage{Type: kafkav1alpha1.StoragePersistentClaim, AccessMode: corev1.ReadWriteMany}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "demo-storage-check"}}
	passed := kafkav1alpha1.FormatStorageCheckResults([]kafkav1alpha1.StorageCheckResult{
		{Property: "exclusive create races have one winner", OK: true, Detail: "node a won 25, node b 25"},
		{Property: "a rename replaces a file whole", OK: true, Detail: "300 reads"},
	})
	failed := kafkav1alpha1.FormatStorageCheckResults([]kafkav1alpha1.StorageCheckResult{
		{Property: "exclusive create races have one winner", Detail: "round 0: 2 winners"},
		{Property: "a rename replaces a file whole", OK: true, Detail: "300 reads"},
	})
	running := checkObservation{Storage: rwx, Verification: kafkav1alpha1.StorageVerificationEnforce, ClaimBound: true, Job: job}
	with := func(o checkObservation, pods ...corev1.Pod) checkObservation { o.Pods = pods; return o }
	for _, tc := range []struct {
		rule   string
		o      checkObservation
		status metav1.ConditionStatus
		reason string
		says   []string
		holds  bool
	}{
		{"ephemeral storage needs no check, and says so",
			checkObservation{Storage: kafkav1alpha1.Storage{Type: kafkav1alpha1.StorageEphemeral}, Verification: kafkav1alpha1.StorageVerificationEnforce},
			metav1.ConditionFalse, kafkav1alpha1.ReasonCheckNotRun, []string{"ephemeral storage"}, false},
		{"verification Skip runs no check",
			checkObservation{Storage: rwx, Verification: kafkav1alpha1.StorageVerificationSkip, ClaimBound: true},
			metav1.ConditionFalse, kafkav1alpha1.ReasonCheckNotRun, []string{"Skip"}, false},
		{"a claim one node mounts has no second node to check from",
			checkObservation{Storage: kafkav1alpha1.Storage{AccessMode: corev1.ReadWriteOnce}, Verification: kafkav1alpha1.StorageVerificationEnforce, ClaimBound: true},
			metav1.ConditionFalse, kafkav1alpha1.ReasonCheckNotRun, []string{"ReadWriteOnce"}, false},
		{"an unbound claim is waited for",
			checkObservation{Storage: rwx, Verification: kafkav1alpha1.StorageVerificationEnforce},
			metav1.ConditionUnknown, kafkav1alpha1.ReasonCheckRunning, []string{"bound"}, false},
		{"a running Job is CheckRunning", with(running, checkPodOf("0", "n1", nil), checkPodOf("1", "n2", nil)),
			metav1.ConditionUnknown, kafkav1alpha1.ReasonCheckRunning, []string{"running"}, false},
		{"every property held is True, naming the nodes and the properties",
			with(running, checkPodOf("0", "n1", &corev1.ContainerStateTerminated{Message: passed}), checkPodOf("1", "n2", &corev1.ContainerStateTerminated{})),
			metav1.ConditionTrue, kafkav1alpha1.ReasonStorageVerified, []string{"nodes n1 and n2", "exclusive create races have one winner", "a rename replaces a file whole"}, false},
		{"a failed property is StorageCheckFailed naming it, and holds the brokers under Enforce",
			with(running, checkPodOf("0", "n1", &corev1.ContainerStateTerminated{ExitCode: 1, Message: failed}), checkPodOf("1", "n2", &corev1.ContainerStateTerminated{})),
			metav1.ConditionFalse, kafkav1alpha1.ReasonStorageCheckFailed, []string{"failed: exclusive create races have one winner (round 0: 2 winners)"}, true},
		{"a failed property under Report holds nothing",
			func() checkObservation {
				o := with(running, checkPodOf("0", "n1", &corev1.ContainerStateTerminated{ExitCode: 1, Message: failed}))
				o.Verification = kafkav1alpha1.StorageVerificationReport
				return o
			}(),
			metav1.ConditionFalse, kafkav1alpha1.ReasonStorageCheckFailed, []string{"exclusive create"}, false},
		{"a checker that ended without a result did not run the check",
			with(running, checkPodOf("0", "n1", &corev1.ContainerStateTerminated{ExitCode: 3, Message: "error: reach the peer at x: no such host\n"})),
			metav1.ConditionFalse, kafkav1alpha1.ReasonCheckNotRun, []string{"exit 3", "reach the peer"}, false},
		{"an unschedulable pod is said at once, not waited for",
			with(running, checkPodOf("0", "n1", nil), checkPodOf("1", "", nil, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules"})),
			metav1.ConditionFalse, kafkav1alpha1.ReasonCheckNotRun, []string{"cannot be scheduled", "anti-affinity", "two nodes"}, false},
		{"a Job past its deadline did not run the check",
			func() checkObservation {
				o := running
				o.Job = job.DeepCopy()
				o.Job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}}
				return o
			}(),
			metav1.ConditionFalse, kafkav1alpha1.ReasonCheckNotRun, []string{"DeadlineExceeded"}, false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			c := storageVerifiedCondition(tc.o)
			if c.Type != kafkav1alpha1.ConditionStorageVerified || c.Status != tc.status || c.Reason != tc.reason {
				t.Fatalf("got %s %s %s: %s", c.Type, c.Status, c.Reason, c.Message)
			}
			for _, s := range tc.says {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message %q does not say %q", c.Message, s)
				}
			}
			if held := storageHold(tc.o.Verification, c) != ""; held != tc.holds {
				t.Errorf("holds the brokers: %v, want %v", held, tc.holds)
			}
		})
	}
}

// TestTheStorageCheckRunsAgainOnlyWhenWhatItCheckedChanges: the digest follows the volume —
// type, class, access mode, size, the bound volume — and not what is done with a result.
func TestTheStorageCheckRunsAgainOnlyWhenWhatItCheckedChanges(t *testing.T) {
	claim := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}}
	base := storageCheckDigest(goldenCluster(), claim)
	same := map[string]func(*kafkav1alpha1.KafkaCluster){
		"verification": func(c *kafkav1alpha1.KafkaCluster) {
			c.Spec.Storage.Verification = kafkav1alpha1.StorageVerificationReport
		},
		"deleteClaim": func(c *kafkav1alpha1.KafkaCluster) { c.Spec.Storage.DeleteClaim = true },
		"replicas":    func(c *kafkav1alpha1.KafkaCluster) { c.Spec.Replicas = 5 },
	}
	changed := map[string]func(*kafkav1alpha1.KafkaCluster){
		"size":  func(c *kafkav1alpha1.KafkaCluster) { c.Spec.Storage.Size = ptr.To(resource.MustParse("20Gi")) },
		"class": func(c *kafkav1alpha1.KafkaCluster) { c.Spec.Storage.StorageClassName = ptr.To("nfs") },
	}
	for name, mutate := range same {
		c := goldenCluster()
		mutate(c)
		if d := storageCheckDigest(c, claim); d != base {
			t.Errorf("%s changed the digest", name)
		}
	}
	for name, mutate := range changed {
		c := goldenCluster()
		mutate(c)
		if d := storageCheckDigest(c, claim); d == base {
			t.Errorf("%s left the digest as it was", name)
		}
	}
	if d := storageCheckDigest(goldenCluster(), &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-2"}}); d == base {
		t.Error("another bound volume left the digest as it was")
	}
}
