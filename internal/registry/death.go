package registry

import (
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/paddock-dev/paddock/api/v1alpha1"
)

// SeenDead says why the process holding broker Lease l is observed gone, from the pods as the
// cache shows them (by name), or "" when nothing shows it (docs/registry.md, "Death seen, not
// waited for"):
//
//   - PodGone: the pod named by the Lease's holderIdentity (<pod>_<uid>) is a pod of another
//     uid: the holder's pod was deleted and the StatefulSet made a new one (which it does at
//     once, so the window before it shows is short);
//   - ProcessExited: that pod's broker container is terminated (or waiting to restart after
//     a termination) and the Lease was acquired before that termination ended, or it runs a
//     process started after the Lease was acquired — a restart whose process has not beaten
//     yet.
//
// The times compared are the broker's (acquireTime) and its kubelet's (startedAt, finishedAt),
// both read on the node's clock; the kubelet's are whole seconds, so a termination is counted
// up to a second late and a restart only once its start, rounded down, is after the
// acquisition — a restart within the second of the acquisition is left to the session
// timeout, never taken for a death it is not. A Lease whose holder does not read as
// <pod>_<uid>, or that has no acquireTime, shows nothing; nor does a holder whose pod is not
// in the cache at all — brokers run without pod objects (the envtest suites) or a pod not seen
// yet must not be taken for dead, so absence is left to the session timeout.
func SeenDead(l *coordinationv1.Lease, pods map[string]*corev1.Pod) string {
	holder := deref(l.Spec.HolderIdentity, "")
	i := strings.LastIndexByte(holder, '_')
	if i <= 0 || i == len(holder)-1 || l.Spec.AcquireTime == nil {
		return ""
	}
	name, uid := holder[:i], holder[i+1:]
	pod, ok := pods[name]
	switch {
	case !ok:
		return ""
	case string(pod.UID) != uid:
		return v1alpha1.ReasonPodGone
	}
	acquired := l.Spec.AcquireTime.Time
	for j := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[j]
		if cs.Name != v1alpha1.BrokerContainerName {
			continue
		}
		switch st := cs.State; {
		case st.Running != nil:
			if st.Running.StartedAt.After(acquired) {
				return v1alpha1.ReasonProcessExited
			}
		case st.Terminated != nil:
			if exitedAfter(st.Terminated, acquired) {
				return v1alpha1.ReasonProcessExited
			}
		case st.Waiting != nil:
			if t := cs.LastTerminationState.Terminated; t != nil && exitedAfter(t, acquired) {
				return v1alpha1.ReasonProcessExited
			}
		}
		return ""
	}
	return ""
}

// exitedAfter reports whether termination t ended a process that could hold a Lease acquired
// at acquired: the acquisition is not after the end (rounded up to the next second, as the
// kubelet writes whole seconds).
func exitedAfter(t *corev1.ContainerStateTerminated, acquired time.Time) bool {
	return !acquired.After(t.FinishedAt.Add(time.Second))
}
