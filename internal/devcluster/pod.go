package devcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// podRuntime is what every node agent shares.
type podRuntime struct {
	client  kubernetes.Interface
	cfg     Config
	history *history
	// images maps the images the node agents can run to local binaries: the installed
	// operator's image to the paddock binary. Set before the first node starts.
	images map[string]string

	mu   sync.Mutex
	held map[string]bool // guarded by mu: "<ns>/<pod>" whose crashed containers stay down
}

// restartsHeld reports whether namespace/pod's crashed containers must stay down for now.
func (rt *podRuntime) restartsHeld(namespace, pod string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.held[namespace+"/"+pod]
}

// Container restart backoff. The kubelet starts at 10 s and caps at 5 min; a dev machine
// wants a crashed broker back quickly, so paddock dev starts at 1 s and caps at 20 s. A run
// longer than backoffReset starts the backoff over.
const (
	backoffInitial = time.Second
	backoffMax     = 20 * time.Second
	backoffReset   = time.Minute
)

// container is the state of one of a pod's containers. Owned by the pod worker's goroutine.
type container struct {
	spec        corev1.Container
	incarnation int      // bumped at every start; events of older incarnations are stale
	proc        *process // nil when not running
	run         *ContainerRun
	startedAt   metav1.Time
	everStarted bool
	started     bool // startup probe passed
	ready       bool
	restarts    int32
	waiting     corev1.ContainerStateWaiting
	lastTerm    *corev1.ContainerStateTerminated
	final       *corev1.ContainerStateTerminated // set when it exited and will not restart
	backoff     time.Duration
	restart     *time.Timer
	stopProbes  context.CancelFunc
}

// podEvent is something that happened to a container, sent to its pod worker.
type podEvent struct {
	index, incarnation int
	exited, restart    bool
	probe              *probeResult
}

// podWorker runs one pod on its node: it starts the containers, probes them, restarts them,
// reports the pod's status, and on deletion stops them and lets the pod go.
type podWorker struct {
	node *nodeAgent

	mu     sync.Mutex
	latest *corev1.Pod // guarded by mu: the newest version the informer delivered
	gone   bool        // guarded by mu: the pod was removed from the API

	kick     chan struct{} // a new latest or gone
	events   chan podEvent
	finished chan struct{} // closed when run returns; senders give up then

	// Owned by run.
	pod         *corev1.Pod
	podIP       string
	startTime   metav1.Time
	containers  []*container
	terminating bool
	// frozen is set when the node froze: the processes and their address were handed to the
	// node (frozen.go).
	frozen      bool
	transitions map[corev1.PodConditionType]conditionState
	lastStatus  []byte
	// projectedVolumes are the pod's projected volumes written so far, by volume name.
	projectedVolumes map[string]*projectedVolume
}

type conditionState struct {
	status corev1.ConditionStatus
	since  metav1.Time
}

func newPodWorker(n *nodeAgent, pod *corev1.Pod) *podWorker {
	return &podWorker{
		node:        n,
		latest:      pod,
		kick:        make(chan struct{}, 1),
		events:      make(chan podEvent),
		finished:    make(chan struct{}),
		transitions: map[corev1.PodConditionType]conditionState{},

		projectedVolumes: map[string]*projectedVolume{},
	}
}

// deliver hands the worker a newer version of its pod.
func (w *podWorker) deliver(pod *corev1.Pod) {
	w.mu.Lock()
	w.latest = pod
	w.mu.Unlock()
	w.poke()
}

// removed tells the worker its pod is gone from the API.
func (w *podWorker) removed() {
	w.mu.Lock()
	w.gone = true
	w.mu.Unlock()
	w.poke()
}

func (w *podWorker) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// send delivers an event unless the worker has finished.
func (w *podWorker) send(ev podEvent) {
	select {
	case w.events <- ev:
	case <-w.finished:
	}
}

// run is the pod's life on its node: it gets the pod an IP, starts (or adopts) its
// containers, then answers the pod's changes and its containers' events until the pod is
// gone, the node stops, or the environment ends.
func (w *podWorker) run(ctx context.Context) {
	defer close(w.finished)
	w.mu.Lock()
	w.pod = w.latest
	w.mu.Unlock()
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("pod", klog.KObj(w.pod)))
	if w.pod.DeletionTimestamp != nil {
		// Deleted while no worker ran it (the node was down): nothing runs, let it go.
		w.deletePod(ctx)
		return
	}
	ip, err := w.node.ips.allocate(w.pod.Status.PodIP)
	if err != nil {
		log.FromContext(ctx).Error(err, "Allocate pod IP")
		return
	}
	w.podIP = ip
	defer func() {
		if !w.frozen {
			w.node.ips.release(ip) // a frozen pod's processes keep their address
		}
	}()
	w.startPod(ctx)
	w.loop(ctx)
}

// startPod starts the pod's containers, or adopts the ones its node kept frozen, and writes
// its first status.
func (w *podWorker) startPod(ctx context.Context) {
	w.startTime = metav1.Now()
	if w.pod.Status.StartTime != nil {
		w.startTime = *w.pod.Status.StartTime
	}
	w.containers = make([]*container, len(w.pod.Spec.Containers))
	for i, spec := range w.pod.Spec.Containers {
		c := &container{spec: spec, waiting: corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
		for _, st := range w.pod.Status.ContainerStatuses {
			if st.Name == spec.Name {
				// A restarted node agent: the container ran before, this start is a restart.
				c.restarts = st.RestartCount
				c.everStarted = st.State.Running != nil || st.State.Terminated != nil || st.LastTerminationState.Terminated != nil
			}
		}
		w.containers[i] = c
	}
	log.FromContext(ctx).Info("Starting pod", "podIP", w.podIP)
	for i, c := range w.containers {
		if fc := w.node.takeFrozen(w.pod.UID, c.spec.Name); fc != nil {
			w.adopt(ctx, i, fc) // the node came back: its frozen process resumes
			continue
		}
		w.startContainer(ctx, i)
	}
	w.writeStatus(ctx)
}

// loop answers the pod's changes, its containers' events and the token refresh, writing the
// status after each, until the pod is done with.
func (w *podWorker) loop(ctx context.Context) {
	var killAfterGrace <-chan time.Time
	// Projected tokens are replaced before they expire, as long as the pod runs.
	refresh := time.NewTicker(time.Second)
	defer refresh.Stop()
	for {
		select {
		case now := <-refresh.C:
			w.refreshProjected(ctx, now)
			continue
		case <-ctx.Done():
			w.nodeStopped()
			return
		case <-w.kick:
			if gone := w.takeLatest(); gone {
				w.killAll()
				w.cleanup()
				return
			}
			if w.pod.DeletionTimestamp != nil && !w.terminating {
				killAfterGrace = w.beginTermination(ctx)
			}
		case ev := <-w.events:
			w.handle(ctx, ev)
		case <-killAfterGrace:
			w.killAfterGrace(ctx)
		}
		if w.terminating && w.allExited() {
			w.writeStatus(ctx)
			w.deletePod(ctx)
			w.cleanup()
			return
		}
		w.writeStatus(ctx)
	}
}

// nodeStopped ends the pod's processes with its node: frozen and handed to the node when it
// stops with --freeze, killed otherwise (a node loss, or the environment's end).
func (w *podWorker) nodeStopped() {
	if w.node.freezing() {
		w.freeze()
		return
	}
	w.killAll()
}

// takeLatest makes the newest delivered pod the current one; gone reports that the pod was
// removed from the API.
func (w *podWorker) takeLatest() (gone bool) {
	w.mu.Lock()
	pod, gone := w.latest, w.gone
	w.mu.Unlock()
	if !gone {
		w.pod = pod
	}
	return gone
}

// killAfterGrace SIGKILLs the containers still running when the grace period is over.
func (w *podWorker) killAfterGrace(ctx context.Context) {
	log.FromContext(ctx).Info("Grace period over, killing containers")
	for _, c := range w.containers {
		if c.proc != nil {
			c.proc.signal(syscall.SIGKILL)
		}
	}
}

// startContainer starts container i as a local process, or schedules a retry when its
// command cannot be built.
func (w *podWorker) startContainer(ctx context.Context, i int) {
	c := w.containers[i]
	c.incarnation++
	if c.everStarted {
		c.restarts++
	}
	_ = os.Remove(w.terminationMessageFile(c.spec.Name)) // each run writes its own message
	argv, env, sandbox, err := w.command(ctx, c.spec)
	if err != nil {
		c.waiting = corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: err.Error()}
		w.scheduleRestart(i)
		return
	}
	name := containerLogName(w.pod.Namespace, w.pod.Name, c.spec.Name)
	logPath := filepath.Join(w.node.rt.cfg.Dir, "logs", "pods", name+".log")
	if f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		// A banner line in the container's log; losing it loses nothing the process writes.
		_, _ = fmt.Fprintf(f, "==== %s paddock dev: starting %q (restart %d) on %s, pod IP %s\n",
			time.Now().Format(time.RFC3339Nano), argv, c.restarts, w.node.name, w.podIP)
		_ = f.Close()
	}
	proc, err := startProcess(name, argv[0], argv[1:], env, logPath, sandbox)
	if err != nil {
		c.waiting = corev1.ContainerStateWaiting{Reason: "RunContainerError", Message: err.Error()}
		w.scheduleRestart(i)
		return
	}
	c.proc, c.everStarted, c.ready = proc, true, false
	c.started = c.spec.StartupProbe == nil
	c.startedAt = metav1.Now()
	c.waiting = corev1.ContainerStateWaiting{}
	c.run = w.node.rt.history.started(ContainerRun{
		Namespace: w.pod.Namespace, Pod: w.pod.Name, Container: c.spec.Name, Node: w.node.name,
		PID: proc.pid(), Started: c.startedAt.Time,
	})
	if i == 0 {
		w.writePIDFile(proc.pid())
	}
	w.watchContainer(ctx, i)
}

// watchContainer reports container i's exit and runs its probes.
func (w *podWorker) watchContainer(ctx context.Context, i int) {
	c := w.containers[i]
	proc, incarnation := c.proc, c.incarnation
	go func() {
		<-proc.done
		w.send(podEvent{index: i, incarnation: incarnation, exited: true})
	}()
	probeCtx, stop := context.WithCancel(ctx)
	c.stopProbes = stop
	go runProbes(probeCtx, c.spec, w.podIP, func(r probeResult) {
		w.send(podEvent{index: i, incarnation: incarnation, probe: &r})
	})
}

// scheduleRestart starts container i again after its backoff.
func (w *podWorker) scheduleRestart(i int) {
	c := w.containers[i]
	switch {
	case c.backoff == 0 || (c.lastTerm != nil && c.lastTerm.FinishedAt.Sub(c.lastTerm.StartedAt.Time) > backoffReset):
		c.backoff = backoffInitial
	default:
		c.backoff = min(2*c.backoff, backoffMax)
	}
	incarnation := c.incarnation
	c.restart = time.AfterFunc(c.backoff, func() {
		w.send(podEvent{index: i, incarnation: incarnation, restart: true})
	})
}

func (w *podWorker) handle(ctx context.Context, ev podEvent) {
	c := w.containers[ev.index]
	if ev.incarnation != c.incarnation {
		return
	}
	logger := log.FromContext(ctx).WithValues("container", c.spec.Name)
	switch {
	case ev.exited:
		term := w.reap(c)
		logger.Info("Container exited", "exitCode", term.ExitCode, "signal", term.Signal)
		restart := w.pod.Spec.RestartPolicy == corev1.RestartPolicyAlways ||
			(w.pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && term.ExitCode != 0)
		if w.terminating || !restart {
			c.final = term
			return
		}
		c.lastTerm = term
		c.waiting = corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off restarting failed container %s", c.spec.Name)}
		w.scheduleRestart(ev.index)
	case ev.restart:
		switch {
		case w.terminating:
		case w.node.rt.restartsHeld(w.pod.Namespace, w.pod.Name):
			c.restart = time.AfterFunc(backoffInitial, func() {
				w.send(podEvent{index: ev.index, incarnation: ev.incarnation, restart: true})
			})
		default:
			w.startContainer(ctx, ev.index)
		}
	case ev.probe != nil:
		switch ev.probe.kind {
		case probeStartup:
			c.started = ev.probe.ok
		case probeReadiness:
			c.ready = ev.probe.ok && c.proc != nil
		}
		if !ev.probe.ok && ev.probe.kind != probeReadiness && c.proc != nil && !w.terminating {
			logger.Info("Probe failed, restarting container", "probe", ev.probe.kind)
			w.node.rt.history.update(c.run, func(r *ContainerRun) { r.TermSent = time.Now() })
			go c.proc.stop(w.gracePeriod())
		}
	}
}

// reap records a container's exit and returns its terminated state.
func (w *podWorker) reap(c *container) *corev1.ContainerStateTerminated {
	code, sig := c.proc.exitStatus()
	now := metav1.Now()
	term := &corev1.ContainerStateTerminated{
		ExitCode: int32(code), Signal: int32(sig), Reason: "Completed",
		StartedAt: c.startedAt, FinishedAt: now, ContainerID: containerID(c.proc),
	}
	if code != 0 {
		term.Reason = "Error"
	}
	term.Message = w.terminationMessage(c.spec, code)
	w.node.rt.history.update(c.run, func(r *ContainerRun) { r.Exited, r.ExitCode = now.Time, code })
	c.stopProbes()
	c.proc, c.ready, c.started = nil, false, false
	if c == w.containers[0] {
		w.removePIDFile()
	}
	return term
}

// beginTermination sends SIGTERM to every container and returns when to SIGKILL them.
func (w *podWorker) beginTermination(ctx context.Context) <-chan time.Time {
	w.terminating = true
	grace := w.gracePeriod()
	if s := w.pod.DeletionGracePeriodSeconds; s != nil {
		grace = time.Duration(*s) * time.Second
	}
	log.FromContext(ctx).Info("Pod deleted, stopping containers", "gracePeriod", grace)
	now := time.Now()
	for _, c := range w.containers {
		if c.restart != nil {
			c.restart.Stop()
		}
		if c.proc != nil {
			w.node.rt.history.update(c.run, func(r *ContainerRun) { r.TermSent = now })
			c.proc.signal(syscall.SIGTERM)
		}
	}
	return time.After(grace)
}

func (w *podWorker) gracePeriod() time.Duration {
	if s := w.pod.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return 30 * time.Second
}

func (w *podWorker) allExited() bool {
	for _, c := range w.containers {
		if c.proc != nil {
			return false
		}
	}
	return true
}

// killAll SIGKILLs every running container and waits for them.
func (w *podWorker) killAll() {
	for _, c := range w.containers {
		if c.restart != nil {
			c.restart.Stop()
		}
		if c.proc != nil {
			c.proc.signal(syscall.SIGKILL)
			<-c.proc.done
			w.reap(c)
		}
	}
}

// deletePod removes the pod from the API once nothing of it runs, so its controller can
// replace it.
func (w *podWorker) deletePod(ctx context.Context) {
	err := w.node.rt.client.CoreV1().Pods(w.pod.Namespace).Delete(ctx, w.pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &w.pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
		log.FromContext(ctx).Error(err, "Delete terminated pod")
	}
}

// cleanup removes the pod's emptyDir and projected volumes.
func (w *podWorker) cleanup() {
	_ = os.RemoveAll(w.node.rt.cfg.podDir(w.pod.UID))
	_ = os.RemoveAll(filepath.Dir(w.projectedDir("_")))
}

func (w *podWorker) pidFile() string {
	return filepath.Join(w.node.rt.cfg.Dir, "run", w.pod.Namespace, w.pod.Name+".pid")
}

func (w *podWorker) writePIDFile(pid int) {
	_ = os.MkdirAll(filepath.Dir(w.pidFile()), 0o755)
	_ = os.WriteFile(w.pidFile(), []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

func (w *podWorker) removePIDFile() { _ = os.Remove(w.pidFile()) }

func containerID(p *process) string { return fmt.Sprintf("paddock-dev://%d", p.pid()) }

// writeStatus patches the pod's status when it changed since the last write.
func (w *podWorker) writeStatus(ctx context.Context) {
	patch, err := json.Marshal(map[string]any{"status": w.status()})
	if err != nil || string(patch) == string(w.lastStatus) {
		return
	}
	_, err = w.node.rt.client.CoreV1().Pods(w.pod.Namespace).Patch(ctx, w.pod.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{}, "status")
	if err != nil {
		if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "Patch pod status")
		}
		return
	}
	w.lastStatus = patch
}

// status is the pod status the kubelet would report for the containers' current state.
func (w *podWorker) status() corev1.PodStatus {
	st := corev1.PodStatus{
		Phase:     corev1.PodPending,
		HostIP:    w.node.ips.nodeIP(),
		HostIPs:   []corev1.HostIP{{IP: w.node.ips.nodeIP()}},
		PodIP:     w.podIP,
		PodIPs:    []corev1.PodIP{{IP: w.podIP}},
		StartTime: &w.startTime,
		QOSClass:  w.pod.Status.QOSClass,
	}
	allReady, anyStarted, allFinal, allSucceeded := true, false, true, true
	for _, c := range w.containers {
		st.ContainerStatuses = append(st.ContainerStatuses, c.status())
		allReady = allReady && c.ready
		anyStarted = anyStarted || c.everStarted
		allFinal = allFinal && c.final != nil
		allSucceeded = allSucceeded && c.final != nil && c.final.ExitCode == 0
	}
	switch {
	case allFinal && !w.terminating && allSucceeded:
		st.Phase = corev1.PodSucceeded
	case allFinal && !w.terminating:
		st.Phase = corev1.PodFailed
	case anyStarted:
		st.Phase = corev1.PodRunning
	}
	st.Conditions = w.conditions(allReady)
	return st
}

// status is the container's status: running, terminated for good, or waiting.
func (c *container) status() corev1.ContainerStatus {
	cs := corev1.ContainerStatus{
		Name: c.spec.Name, Image: c.spec.Image, ImageID: "paddock-dev://" + c.spec.Image,
		RestartCount: c.restarts, Ready: c.ready, Started: ptr.To(c.proc != nil && c.started),
	}
	switch {
	case c.proc != nil:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: c.startedAt}
		cs.ContainerID = containerID(c.proc)
	case c.final != nil:
		cs.State.Terminated = c.final
		cs.ContainerID = c.final.ContainerID
	default:
		waiting := c.waiting
		cs.State.Waiting = &waiting
	}
	cs.LastTerminationState.Terminated = c.lastTerm
	return cs
}

// conditions are the pod's conditions, each keeping the time it last changed.
func (w *podWorker) conditions(allReady bool) []corev1.PodCondition {
	ready := corev1.ConditionFalse
	if allReady {
		ready = corev1.ConditionTrue
	}
	var out []corev1.PodCondition
	for _, c := range []struct {
		t      corev1.PodConditionType
		status corev1.ConditionStatus
	}{
		{corev1.PodReadyToStartContainers, corev1.ConditionTrue},
		{corev1.PodInitialized, corev1.ConditionTrue},
		{corev1.ContainersReady, ready},
		{corev1.PodReady, ready},
	} {
		prev, ok := w.transitions[c.t]
		if !ok || prev.status != c.status {
			prev = conditionState{status: c.status, since: metav1.Now()}
			w.transitions[c.t] = prev
		}
		out = append(out, corev1.PodCondition{Type: c.t, Status: c.status, LastTransitionTime: prev.since})
	}
	return out
}
