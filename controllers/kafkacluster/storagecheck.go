package kafkacluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// The storage check (docs/storage.md, "The storage check"): an Indexed Job of two pods on
// different nodes, both mounting the data claim; index 1 serves its file system, index 0
// runs `paddock storage check` against it and reports per property in its termination
// message. It runs when the claim is first bound and again whenever what it checked changes
// (storageCheckDigest). The finished Job and its pods stay — no TTL — as the record the
// StorageVerified condition is computed from; deleting the Job runs the check again.

const (
	// storageCheckDeadline bounds the Job's run (activeDeadlineSeconds): pods that cannot
	// start, or a volume that hangs, end as CheckNotRun instead of running forever.
	storageCheckDeadline = 600
	// storageCheckTimeout bounds each pod's own run, below the Job's deadline so the checker
	// can still say why it did not finish.
	storageCheckTimeout = "540s"
	// storageCheckRounds is how many times each property is tried.
	storageCheckRounds = 50
	// jobCompletionIndex is the annotation the Job controller puts on an Indexed Job's pods.
	jobCompletionIndex = "batch.kubernetes.io/job-completion-index"
	// jobControllerUID is the label the Job controller puts on its pods: its Job's UID.
	jobControllerUID = "batch.kubernetes.io/controller-uid"
)

// storageCheckDigest is what the check certifies: the storage spec's type, class, access
// mode and size, and the volume the claim is bound to. A different digest runs the check
// again. verification and deleteClaim are not in it: they change what is done with a result,
// not the volume.
func storageCheckDigest(cluster *kafkav1alpha1.KafkaCluster, claim *corev1.PersistentVolumeClaim) string {
	st := cluster.Spec.Storage
	in := struct {
		Type, Class, AccessMode, Size, Volume string
	}{string(st.Type), deref(st.StorageClassName), string(st.AccessMode), "", ""}
	if st.Size != nil {
		in.Size = st.Size.String()
	}
	if claim != nil {
		in.Volume = claim.Spec.VolumeName
	}
	b, _ := json.Marshal(in) // a struct of strings: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// storageCheckLabels are the check pods' labels: the cluster label (the manager caches only
// labelled pods) and LabelStorageCheck, which their anti-affinity and Service select; not
// app.kubernetes.io/name, so no selector of the brokers picks them up.
func storageCheckLabels(cluster *kafkav1alpha1.KafkaCluster) map[string]string {
	return map[string]string{
		kafkav1alpha1.LabelInstance:     cluster.Name,
		kafkav1alpha1.LabelCluster:      cluster.Name,
		kafkav1alpha1.LabelStorageCheck: cluster.Name,
	}
}

// desiredStorageCheckService is the headless Service that gives the check's pods their DNS
// names (<job>-0, <job>-1), published before they are ready: the checker must find the peer
// as soon as it runs.
func desiredStorageCheckService(cluster *kafkav1alpha1.KafkaCluster) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: childMeta(cluster, kafkav1alpha1.StorageCheckJobName(cluster.Name)),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{kafkav1alpha1.LabelStorageCheck: cluster.Name},
			PublishNotReadyAddresses: true,
			Ports:                    []corev1.ServicePort{{Name: "check", Port: kafkav1alpha1.StorageCheckPort, Protocol: corev1.ProtocolTCP}},
		},
	}
}

// desiredStorageCheckJob is the check: two pods of the broker image, required on different
// nodes, each mounting the data claim where the brokers do, without a ServiceAccount token
// (they talk to no API), placed by the broker template's node selector and tolerations.
func desiredStorageCheckJob(cluster *kafkav1alpha1.KafkaCluster, opts Options, digest string) *batchv1.Job {
	name := kafkav1alpha1.StorageCheckJobName(cluster.Name)
	meta := childMeta(cluster, name)
	meta.Annotations = map[string]string{kafkav1alpha1.AnnotationStorageDigest: digest}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{kafkav1alpha1.LabelStorageCheck: cluster.Name}}
	spec := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		Subdomain:                     name,
		AutomountServiceAccountToken:  ptr.To(false),
		EnableServiceLinks:            ptr.To(false),
		TerminationGracePeriodSeconds: ptr.To[int64](5),
		SecurityContext:               podSecurityContext(cluster),
		Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: selector, TopologyKey: corev1.LabelHostname}},
		}},
		Containers: []corev1.Container{{
			Name:  "check",
			Image: brokerImage(cluster, opts),
			Args: []string{
				"storage", "check", "--by-job-index",
				"--data-dir=" + kafkav1alpha1.DataMountPath,
				fmt.Sprintf("--peer=%s-1.%s:%d", name, name, kafkav1alpha1.StorageCheckPort),
				fmt.Sprintf("--serve-address=:%d", kafkav1alpha1.StorageCheckPort),
				fmt.Sprintf("--rounds=%d", storageCheckRounds),
				"--timeout=" + storageCheckTimeout,
				"--termination-message-path=" + corev1.TerminationMessagePathDefault,
			},
			Env: []corev1.EnvVar{{Name: "JOB_COMPLETION_INDEX", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.annotations['" + jobCompletionIndex + "']"},
			}}},
			Ports:                    []corev1.ContainerPort{{Name: "check", ContainerPort: kafkav1alpha1.StorageCheckPort, Protocol: corev1.ProtocolTCP}},
			TerminationMessagePath:   corev1.TerminationMessagePathDefault,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			VolumeMounts:             []corev1.VolumeMount{{Name: kafkav1alpha1.DataVolumeName, MountPath: kafkav1alpha1.DataMountPath}},
			SecurityContext:          containerSecurityContext(cluster),
		}},
		Volumes: []corev1.Volume{dataVolume(cluster)},
	}
	schedulingExtras(cluster, &spec)
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			CompletionMode:        ptr.To(batchv1.IndexedCompletion),
			Completions:           ptr.To[int32](2),
			Parallelism:           ptr.To[int32](2),
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To[int64](storageCheckDeadline),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: storageCheckLabels(cluster)},
				Spec:       spec,
			},
		},
	}
}

// checkObservation is what the StorageVerified condition is computed from.
type checkObservation struct {
	Generation   int64
	Storage      kafkav1alpha1.Storage
	Verification kafkav1alpha1.StorageVerification
	// ClaimBound says the data claim is bound (the check needs the volume).
	ClaimBound bool
	// Job is the check Job of the current digest (nil when there is none yet); Pods are its pods.
	Job  *batchv1.Job
	Pods []corev1.Pod
}

// storageCheckNeeded says why no check runs for o, or "" when one must.
func storageCheckNeeded(o checkObservation) string {
	switch {
	case o.Storage.Type == kafkav1alpha1.StorageEphemeral:
		return "ephemeral storage: each broker has its own emptyDir, there is no shared volume to check"
	case o.Verification == kafkav1alpha1.StorageVerificationSkip:
		return "spec.storage.verification is Skip"
	case o.Storage.AccessMode != "" && o.Storage.AccessMode != corev1.ReadWriteMany:
		return fmt.Sprintf("the claim is %s: one node mounts it, there is no second node to check it from", o.Storage.AccessMode)
	}
	return ""
}

// storageVerifiedCondition is the StorageVerified condition: True when the checker's every
// property held; False StorageCheckFailed naming each failed one; False CheckNotRun when no
// check is needed or it could not finish (unschedulable, a deadline, no result), saying why;
// Unknown CheckRunning until then.
func storageVerifiedCondition(o checkObservation) metav1.Condition {
	c := metav1.Condition{Type: kafkav1alpha1.ConditionStorageVerified, ObservedGeneration: o.Generation}
	set := func(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		c.Status, c.Reason, c.Message = status, reason, msg
		return c
	}
	if why := storageCheckNeeded(o); why != "" {
		return set(metav1.ConditionFalse, kafkav1alpha1.ReasonCheckNotRun, "not checked: "+why)
	}
	if !o.ClaimBound {
		return set(metav1.ConditionUnknown, kafkav1alpha1.ReasonCheckRunning, "waiting for the data claim to be bound")
	}
	if o.Job == nil {
		return set(metav1.ConditionUnknown, kafkav1alpha1.ReasonCheckRunning, "starting the storage check Job")
	}
	job := o.Job.Name
	checker, peer := checkPod(o.Pods, "0"), checkPod(o.Pods, "1")
	if term := terminated(checker); term != nil {
		results, ok := kafkav1alpha1.ParseStorageCheckResults(term.Message)
		if !ok {
			return set(metav1.ConditionFalse, kafkav1alpha1.ReasonCheckNotRun, fmt.Sprintf("the checker of Job %s ended (exit %d) without a result: %s", job, term.ExitCode, firstLine(term.Message)))
		}
		nodes := fmt.Sprintf("from nodes %s and %s", nodeOf(checker), nodeOf(peer))
		var failed, held []string
		for _, r := range results {
			if r.OK {
				held = append(held, r.Property)
			} else {
				failed = append(failed, fmt.Sprintf("%s (%s)", r.Property, r.Detail))
			}
		}
		if len(failed) > 0 {
			return set(metav1.ConditionFalse, kafkav1alpha1.ReasonStorageCheckFailed, fmt.Sprintf("Job %s %s: failed: %s; held: %s", job, nodes, strings.Join(failed, "; "), strings.Join(held, "; ")))
		}
		return set(metav1.ConditionTrue, kafkav1alpha1.ReasonStorageVerified, fmt.Sprintf("every property held, checked by Job %s %s: %s", job, nodes, strings.Join(held, "; ")))
	}
	for _, jc := range o.Job.Status.Conditions {
		if jc.Type == batchv1.JobFailed && jc.Status == corev1.ConditionTrue {
			return set(metav1.ConditionFalse, kafkav1alpha1.ReasonCheckNotRun, fmt.Sprintf("Job %s failed before the checker reported (%s: %s)", job, jc.Reason, jc.Message))
		}
	}
	for _, p := range []*corev1.Pod{checker, peer} {
		if why := unschedulable(p); why != "" {
			return set(metav1.ConditionFalse, kafkav1alpha1.ReasonCheckNotRun, fmt.Sprintf("pod %s cannot be scheduled: %s (the check needs two nodes that mount the claim; spec.storage.verification: Skip opts out)", p.Name, why))
		}
	}
	return set(metav1.ConditionUnknown, kafkav1alpha1.ReasonCheckRunning, fmt.Sprintf("the storage check Job %s is running", job))
}

// storageHold says why the brokers are held (Enforce, and a property failed), or "".
func storageHold(verification kafkav1alpha1.StorageVerification, c metav1.Condition) string {
	if verification != kafkav1alpha1.StorageVerificationEnforce || c.Reason != kafkav1alpha1.ReasonStorageCheckFailed {
		return ""
	}
	return "the storage check failed and spec.storage.verification is Enforce: the brokers are held (see the StorageVerified condition)"
}

// checkPod is the newest pod of completion index idx, or nil.
func checkPod(pods []corev1.Pod, idx string) *corev1.Pod {
	var out *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Annotations[jobCompletionIndex] == idx && (out == nil || out.CreationTimestamp.Before(&p.CreationTimestamp)) {
			out = p
		}
	}
	return out
}

// terminated is pod's check container's terminated state, or nil.
func terminated(pod *corev1.Pod) *corev1.ContainerStateTerminated {
	if pod == nil {
		return nil
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			return cs.State.Terminated
		}
	}
	return nil
}

// unschedulable is the scheduler's reason pod cannot be placed, or "".
func unschedulable(pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	for _, pc := range pod.Status.Conditions {
		if pc.Type == corev1.PodScheduled && pc.Status == corev1.ConditionFalse && pc.Reason == corev1.PodReasonUnschedulable {
			return pc.Message
		}
	}
	return ""
}

func nodeOf(pod *corev1.Pod) string {
	if pod == nil || pod.Spec.NodeName == "" {
		return "?"
	}
	return pod.Spec.NodeName
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if line == "" {
		return "no message"
	}
	return line
}

// observeStorageCheck reads the check Job of the current digest and its pods, and computes
// StorageVerified and whether the brokers are held, before the StatefulSet is applied.
func (r *Reconciler) observeStorageCheck(ctx context.Context, s *scope) error {
	c := s.cluster
	s.check = checkObservation{
		Generation: c.Generation, Storage: c.Spec.Storage, Verification: c.Spec.StorageVerificationOrDefault(),
		ClaimBound: s.dataClaim != nil && s.dataClaim.Status.Phase == corev1.ClaimBound,
	}
	s.checkDigest = storageCheckDigest(c, s.dataClaim)
	job, err := getOptional(ctx, r.Client, c.Namespace, kafkav1alpha1.StorageCheckJobName(c.Name), &batchv1.Job{})
	if err != nil {
		return err
	}
	s.checkJob = job
	if job != nil && metav1.IsControlledBy(job, c) && job.Annotations[kafkav1alpha1.AnnotationStorageDigest] == s.checkDigest && job.DeletionTimestamp.IsZero() {
		pods := &corev1.PodList{}
		if err := r.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels{jobControllerUID: string(job.UID)}); err != nil {
			return fmt.Errorf("list pods of job %s: %w", job.Name, err)
		}
		s.check.Job, s.check.Pods = job, pods.Items
	}
	s.storageVerified = storageVerifiedCondition(s.check)
	s.storageHold = storageHold(s.check.Verification, s.storageVerified)
	return nil
}

// runStorageCheck starts the check when one is needed and none of the current digest exists:
// a Job of an older digest is deleted first (with its pods), then the Service and the new Job
// are made. A check that is not needed leaves an existing Job as it is.
func (r *Reconciler) runStorageCheck(ctx context.Context, s *scope) error {
	c := s.cluster
	if storageCheckNeeded(s.check) != "" || !s.check.ClaimBound || s.check.Job != nil {
		return nil
	}
	if old := s.checkJob; old != nil {
		if !metav1.IsControlledBy(old, c) {
			return reconcile.TerminalError(fmt.Errorf("job %s exists and is not this cluster's: the storage check cannot run", old.Name))
		}
		if old.DeletionTimestamp.IsZero() {
			if err := r.Delete(ctx, old, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete job %s of an earlier storage: %w", old.Name, err)
			}
			log.FromContext(ctx).Info("Replacing the storage check: the storage changed", "job", old.Name,
				"digest", s.checkDigest, "previous", old.Annotations[kafkav1alpha1.AnnotationStorageDigest])
		}
		return nil // the Job's deletion comes back as an event; the new one is made then
	}
	if err := apply(ctx, r.Client, desiredStorageCheckService(c)); err != nil {
		return err
	}
	job := desiredStorageCheckJob(c, r.Options, s.checkDigest)
	if err := r.Create(ctx, job, client.FieldOwner(kafkav1alpha1.FieldOwner)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create job %s: %w", job.Name, err)
	}
	log.FromContext(ctx).Info("Started the storage check", "job", job.Name, "digest", s.checkDigest)
	return nil
}

// checkPodToCluster maps a storage check pod to its cluster.
func checkPodToCluster(_ context.Context, obj client.Object) []reconcile.Request {
	cluster := obj.GetLabels()[kafkav1alpha1.LabelStorageCheck]
	if cluster == "" || !slices.ContainsFunc(obj.GetOwnerReferences(), func(o metav1.OwnerReference) bool { return o.Kind == "Job" }) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: cluster}}}
}
