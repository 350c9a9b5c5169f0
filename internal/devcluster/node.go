package devcluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// nodeLeaseNamespace holds the kubelets' heartbeat Leases.
const nodeLeaseNamespace = "kube-node-lease"

// kubeletLeaseRenewInterval is how often a kubelet renews its node Lease by default (a quarter
// of the 40 s lease), used when the node-monitor grace period is Kubernetes' default too.
const kubeletLeaseRenewInterval = 10 * time.Second

// nodeAgent plays the kubelet of one Node: it registers the Node, renews its Lease, and runs
// the pods bound to it as local processes (one podWorker per pod). Stopping it is a node
// loss: the Lease stops being renewed (so the node-lifecycle controller turns the Node
// NotReady and its pods not ready), and its processes die with it.
type nodeAgent struct {
	name, zone string
	index      int
	rt         *podRuntime
	ips        *podIPs

	mu      sync.Mutex
	cancel  context.CancelFunc       // guarded by mu; nil while stopped
	done    chan struct{}            // guarded by mu; closed when every goroutine has returned
	workers map[types.UID]*podWorker // guarded by mu
	// freeze is set while the agent stops with its processes frozen rather than killed;
	// frozen keeps those processes until they are adopted or killed (frozen.go). Both
	// guarded by mu.
	freeze bool
	frozen map[types.UID]*frozenPod
}

func newNodeAgent(index int, rt *podRuntime) *nodeAgent {
	return &nodeAgent{
		name:  NodeName(index),
		zone:  ZoneName(index),
		index: index,
		rt:    rt,
		ips:   newPodIPs(index),
	}
}

// NodeName is the name of the dev environment's index-th Node.
func NodeName(index int) string { return fmt.Sprintf("paddock-dev-%d", index) }

// ZoneName is the zone label of the index-th Node: zone-a, zone-b, …
func ZoneName(index int) string { return fmt.Sprintf("zone-%c", 'a'+index%26) }

// start registers the Node (or marks it Ready again) and starts the lease and pod loops.
func (n *nodeAgent) start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cancel != nil {
		return nil
	}
	n.mu.Unlock()
	n.settleFrozen(ctx)
	n.mu.Lock()
	if n.cancel != nil {
		return nil
	}
	if err := n.register(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(log.IntoContext(ctx, log.FromContext(ctx).WithValues("node", n.name)))
	n.cancel = cancel
	n.done = make(chan struct{})
	n.workers = map[types.UID]*podWorker{}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); n.heartbeat(ctx) }()
	go func() { defer wg.Done(); n.runPods(ctx) }()
	done := n.done
	go func() { wg.Wait(); close(done) }()
	return nil
}

// stop is a node loss: heartbeats stop and every process of the node is killed at once.
// It returns when the processes are gone.
func (n *nodeAgent) stop() { n.halt(false) }

// halt stops the agent; with freeze its processes are stopped with SIGSTOP and kept
// (frozen.go) instead of killed. It returns when every worker has ended.
func (n *nodeAgent) halt(freeze bool) {
	n.mu.Lock()
	cancel, done := n.cancel, n.done
	n.cancel = nil
	n.freeze = freeze
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	n.mu.Lock()
	n.freeze = false
	n.mu.Unlock()
}

func (n *nodeAgent) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cancel != nil
}

// register creates the Node, or on a restart brings it back, and reports it Ready.
func (n *nodeAgent) register(ctx context.Context) error {
	nodes := n.rt.client.CoreV1().Nodes()
	node, err := nodes.Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err = nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: n.name,
			Labels: map[string]string{
				corev1.LabelHostname:     n.name,
				corev1.LabelTopologyZone: n.zone,
				corev1.LabelOSStable:     "linux",
				corev1.LabelArchStable:   "amd64",
				"paddock.dev/dev-node":   "true",
			},
		}}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("register node %s: %w", n.name, err)
	}
	// The node-lifecycle controller taints a new Node at once; retry on its writes.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := n.reportReady(ctx, node); !apierrors.IsConflict(err) {
			return err
		}
		node, err = nodes.Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return apierrors.NewConflict(corev1.Resource("nodes"), n.name, errors.New("node changed"))
	})
}

// reportReady writes the Node's status: capacity, addresses and a fresh Ready condition.
func (n *nodeAgent) reportReady(ctx context.Context, node *corev1.Node) error {
	now := metav1.Now()
	node = node.DeepCopy()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node.Status.Capacity = capacity
	node.Status.Allocatable = capacity
	node.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: n.ips.nodeIP()},
		{Type: corev1.NodeHostName, Address: n.name},
	}
	node.Status.NodeInfo = corev1.NodeSystemInfo{
		KubeletVersion: "v1.37.2-paddock-dev", OperatingSystem: "linux", Architecture: "amd64",
		ContainerRuntimeVersion: "paddock-dev://processes",
	}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "paddock dev node agent is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}
	conditions := []corev1.NodeCondition{ready}
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		conditions = append(conditions, corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: "KubeletHasNo" + string(t),
			LastHeartbeatTime: now, LastTransitionTime: now})
	}
	for _, old := range node.Status.Conditions {
		for i := range conditions {
			if conditions[i].Type == old.Type && conditions[i].Status == old.Status {
				conditions[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	node.Status.Conditions = conditions
	if _, err := n.rt.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("report node %s ready: %w", n.name, err)
	}
	return nil
}

// heartbeat renews the node Lease often enough for the node-lifecycle controller's grace
// period, and re-reports Ready when that controller marked the Node Unknown or when the last
// status report is old.
func (n *nodeAgent) heartbeat(ctx context.Context) {
	interval := kubeletLeaseRenewInterval
	if grace := n.rt.cfg.NodeMonitorGracePeriod; grace > 0 {
		interval = max(grace/4, 500*time.Millisecond)
	}
	logger := log.FromContext(ctx)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if err := n.renewLease(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Renew node lease")
		}
		if err := n.refreshStatus(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Refresh node status")
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (n *nodeAgent) renewLease(ctx context.Context) error {
	leases := n.rt.client.CoordinationV1().Leases(nodeLeaseNamespace)
	now := metav1.NowMicro()
	lease, err := leases.Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err := n.rt.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node %s: %w", n.name, err)
		}
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: n.name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: n.name, UID: node.UID,
			}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node lease: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node lease: %w", err)
	}
	lease.Spec.RenewTime = &now
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renew node lease: %w", err)
	}
	return nil
}

func (n *nodeAgent) refreshStatus(ctx context.Context) error {
	node, err := n.rt.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s: %w", n.name, err)
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && time.Since(c.LastHeartbeatTime.Time) < time.Minute {
			return nil
		}
	}
	return n.reportReady(ctx, node)
}

// runPods watches the pods bound to this node and hands each to its worker.
func (n *nodeAgent) runPods(ctx context.Context) {
	lw := cache.NewFilteredListWatchFromClient(n.rt.client.CoreV1().RESTClient(), "pods", metav1.NamespaceAll,
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", n.name).String()
		})
	informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.podChanged(ctx, obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { n.podChanged(ctx, obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				n.podRemoved(pod.UID)
			}
		},
	})
	if err != nil {
		log.FromContext(ctx).Error(err, "Watch pods")
		return
	}
	informer.Run(ctx.Done())
	// Node loss or shutdown: wait for every worker to kill its processes.
	n.mu.Lock()
	workers := make([]*podWorker, 0, len(n.workers))
	for _, w := range n.workers {
		workers = append(workers, w)
	}
	n.mu.Unlock()
	for _, w := range workers {
		<-w.finished
	}
}

func (n *nodeAgent) podChanged(ctx context.Context, pod *corev1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if w, ok := n.workers[pod.UID]; ok {
		w.deliver(pod)
		return
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || n.cancel == nil {
		return
	}
	w := newPodWorker(n, pod)
	n.workers[pod.UID] = w
	go func() {
		w.run(ctx)
		n.mu.Lock()
		delete(n.workers, pod.UID)
		n.mu.Unlock()
	}()
}

func (n *nodeAgent) podRemoved(uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if w, ok := n.workers[uid]; ok {
		w.removed()
	}
}
