package devcluster

import (
	"context"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// A frozen node (docs/devcluster.md, "Node loss by hand"): the node agent stops — no Node
// Lease renewals, so the node-lifecycle controller turns the Node NotReady — but the pods'
// processes are not killed: they are stopped with SIGSTOP and kept by the node, alive and
// unreachable, as a partitioned node's processes are. thaw resumes them while the node stays
// lost (the zombie of docs/recovery.md); start brings the node back and resumes each one whose
// pod is still bound to it, or kills it when its pod is gone.

// frozenContainer is one container process a frozen node keeps.
type frozenContainer struct {
	proc      *process
	run       *ContainerRun
	startedAt metav1.Time
}

// frozenPod is what a frozen node keeps of one pod.
type frozenPod struct {
	uid             types.UID
	namespace, name string
	ip              string
	containers      map[string]*frozenContainer // by container name
}

// freezing reports whether the node is being frozen rather than killed.
func (n *nodeAgent) freezing() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.freeze
}

// freeze stops every running container with SIGSTOP and hands the processes and the pod's
// address to the node. The worker then ends without killing them.
func (w *podWorker) freeze() {
	fp := &frozenPod{uid: w.pod.UID, namespace: w.pod.Namespace, name: w.pod.Name, ip: w.podIP, containers: map[string]*frozenContainer{}}
	for _, c := range w.containers {
		if c.restart != nil {
			c.restart.Stop()
		}
		if c.proc == nil || c.proc.exited() {
			continue
		}
		c.stopProbes()
		c.proc.signal(syscall.SIGSTOP)
		fp.containers[c.spec.Name] = &frozenContainer{proc: c.proc, run: c.run, startedAt: c.startedAt}
	}
	w.frozen = true
	w.node.mu.Lock()
	defer w.node.mu.Unlock()
	if w.node.frozen == nil {
		w.node.frozen = map[types.UID]*frozenPod{}
	}
	w.node.frozen[fp.uid] = fp
}

// adopt makes a frozen container process container i of the worker again and resumes it.
func (w *podWorker) adopt(ctx context.Context, i int, fc *frozenContainer) {
	c := w.containers[i]
	c.incarnation++
	c.proc, c.run, c.startedAt, c.everStarted, c.ready = fc.proc, fc.run, fc.startedAt, true, false
	c.started = c.spec.StartupProbe == nil
	c.waiting.Reason, c.waiting.Message = "", ""
	// Its projected tokens are refreshed from now on by this worker, as for a container it
	// started (written anew here: the frozen worker's refreshes stopped with it).
	for _, v := range w.pod.Spec.Volumes {
		if v.Projected != nil {
			if _, err := w.projected(ctx, v); err != nil {
				log.FromContext(ctx).Error(err, "Rewrite projected volume of a resumed container", "volume", v.Name)
			}
		}
	}
	fc.proc.signal(syscall.SIGCONT)
	if i == 0 {
		w.writePIDFile(fc.proc.pid())
	}
	log.FromContext(ctx).Info("Resumed a frozen container", "container", c.spec.Name, "pid", fc.proc.pid())
	w.watchContainer(ctx, i)
}

// takeFrozen hands the frozen process of pod uid's container name to its new worker.
func (n *nodeAgent) takeFrozen(uid types.UID, name string) *frozenContainer {
	n.mu.Lock()
	defer n.mu.Unlock()
	fp, ok := n.frozen[uid]
	if !ok {
		return nil
	}
	fc := fp.containers[name]
	delete(fp.containers, name)
	if len(fp.containers) == 0 {
		delete(n.frozen, uid)
	}
	return fc
}

// thaw resumes every frozen process (SIGCONT) while the node agent stays stopped: they run
// again, unknown to any kubelet. It returns how many it resumed.
func (n *nodeAgent) thaw() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	count := 0
	for _, fp := range n.frozen {
		for _, fc := range fp.containers {
			fc.proc.signal(syscall.SIGCONT)
			count++
		}
	}
	return count
}

// frozenProcesses lists the PIDs of the frozen (or thawed) processes by pod namespace/name.
func (n *nodeAgent) frozenProcesses() map[string][]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string][]int{}
	for _, fp := range n.frozen {
		for _, fc := range fp.containers {
			out[fp.namespace+"/"+fp.name] = append(out[fp.namespace+"/"+fp.name], fc.proc.pid())
		}
	}
	return out
}

// settleFrozen runs before the node starts again: the processes of a pod still bound to this
// node wait to be adopted by its new worker (their address is freed for it to take again);
// those of a pod that is gone — force-deleted, say, and recreated elsewhere — are killed, as
// a rebooted node's would be.
func (n *nodeAgent) settleFrozen(ctx context.Context) {
	n.mu.Lock()
	frozen := n.frozen
	n.frozen = nil
	n.mu.Unlock()
	kept := map[types.UID]*frozenPod{}
	for uid, fp := range frozen {
		pod, err := n.rt.client.CoreV1().Pods(fp.namespace).Get(ctx, fp.name, metav1.GetOptions{})
		if err == nil && pod.UID == uid && pod.Spec.NodeName == n.name && pod.DeletionTimestamp == nil {
			kept[uid] = fp
		} else {
			if err != nil && !apierrors.IsNotFound(err) {
				log.FromContext(ctx).Error(err, "Read the pod of frozen processes; killing them", "pod", fp.namespace+"/"+fp.name)
			}
			fp.kill()
		}
		n.ips.release(fp.ip)
	}
	n.mu.Lock()
	n.frozen = kept
	n.mu.Unlock()
}

// killFrozen kills every frozen process (the environment stops).
func (n *nodeAgent) killFrozen() {
	n.mu.Lock()
	frozen := n.frozen
	n.frozen = nil
	n.mu.Unlock()
	for _, fp := range frozen {
		fp.kill()
		n.ips.release(fp.ip)
	}
}

// kill SIGKILLs the pod's processes (a stopped process dies of SIGKILL too) and waits.
func (fp *frozenPod) kill() {
	for _, fc := range fp.containers {
		fc.proc.signal(syscall.SIGKILL)
		<-fc.proc.done
	}
}
