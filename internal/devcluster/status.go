package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// `paddock dev status` and `paddock dev down`, run from any terminal: they find the
// environment of a state directory through its lock, pid file and control socket
// (running.go).

// envStatus is what `paddock dev status` shows: what runs, where, and how to reach it.
type envStatus struct {
	Dir     string    `json:"dir"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// Ready: paddock dev brought its sample up and printed how to use it.
	Ready bool `json:"ready"`
	// APIServer is the URL the kubeconfig names (the host address); APIServerInside the
	// apiserver's own, inside the private network.
	APIServer       string            `json:"apiServer"`
	APIServerInside string            `json:"apiServerInside"`
	Kubeconfig      string            `json:"kubeconfig"`
	EnvFile         string            `json:"envFile"`
	Shell           string            `json:"shell"`
	Components      []componentStatus `json:"components"`
	Operator        string            `json:"operator"`
	Nodes           []NodeInfo        `json:"nodes"`
	Clusters        []clusterStatus   `json:"clusters"`
}

// componentStatus is one process of the environment that is not a pod.
type componentStatus struct {
	Name    string `json:"name"`
	PID     int    `json:"pid"`
	Running bool   `json:"running"`
	Log     string `json:"log"`
}

// clusterStatus is one KafkaCluster: its brokers, and its bootstrap Service's addresses by
// listener — Inside by the name the cluster DNS answers, FromHost at the host address's
// nodePort.
type clusterStatus struct {
	Name       string            `json:"name"` // namespace/name
	Replicas   int32             `json:"replicas"`
	Registered int32             `json:"registered"`
	Serving    int32             `json:"serving"`
	Inside     map[string]string `json:"inside,omitempty"`
	FromHost   map[string]string `json:"fromHost,omitempty"`
}

// status describes the environment as it is now.
func (e *Env) status(ctx context.Context) (envStatus, error) {
	st := envStatus{
		Dir: e.cfg.Dir, PID: os.Getpid(), Ready: e.isReady(),
		APIServer: "https://" + e.cfg.hostAPIServerAddr(), APIServerInside: e.APIServerHost(),
		Kubeconfig: e.KubeconfigPath(), EnvFile: filepath.Join(e.cfg.Dir, "env"), Shell: e.ShellPath(),
	}
	if r := findRunning(e.cfg.Dir); r.pid == st.PID {
		st.Started = r.started
	}
	procs := append([]*process{}, e.cp.procs...)
	if e.dns != nil {
		procs = append(procs, e.dns.proc)
	}
	if e.prom != nil {
		procs = append(procs, e.prom.proc)
	}
	for _, p := range procs {
		st.Components = append(st.Components, componentStatus{Name: p.name, PID: p.pid(), Running: !p.exited(), Log: e.cfg.logPath(p.name)})
	}
	var d appsv1.Deployment
	if err := e.client.Get(ctx, e.inst.manager, &d); err != nil {
		return st, fmt.Errorf("get the operator's Deployment: %w", err)
	}
	st.Operator = fmt.Sprintf("Deployment %s: %d/%d available", e.inst.manager, d.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 1))
	var err error
	if st.Nodes, err = e.NodeList(ctx); err != nil {
		return st, err
	}
	st.Clusters, err = e.clusterStatuses(ctx)
	return st, err
}

// clusterStatuses describes every KafkaCluster and how to reach its bootstrap Service.
func (e *Env) clusterStatuses(ctx context.Context) ([]clusterStatus, error) {
	var list kafkav1alpha1.KafkaClusterList
	if err := e.client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list KafkaClusters: %w", err)
	}
	var out []clusterStatus
	for _, kc := range list.Items {
		cs := clusterStatus{Name: kc.Namespace + "/" + kc.Name, Replicas: kc.Spec.Replicas,
			Registered: kc.Status.Counts.Registered, Serving: kc.Status.Counts.Serving,
			Inside: map[string]string{}, FromHost: map[string]string{}}
		// A cluster with external listeners bootstraps its internal ones through a Service of
		// their own (KafkaCluster.BootstrapServiceOf).
		names := []string{kafkav1alpha1.BootstrapServiceName(kc.Name)}
		for _, l := range kc.Spec.Listeners {
			if name := kc.BootstrapServiceOf(l.Name); !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
		for _, name := range names {
			svc := &corev1.Service{}
			if err := e.client.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: name}, svc); err == nil {
				inside, fromHost := bootstrapAddresses(kc.Spec.Listeners, svc, e.cfg.HostAddress)
				maps.Copy(cs.Inside, inside)
				maps.Copy(cs.FromHost, fromHost)
			}
		}
		out = append(out, cs)
	}
	return out, nil
}

// bootstrapAddresses are where the bootstrap Service svc is reached on each listener: an
// Internal listener's brokers advertise names and addresses of the private network, so it is
// reached inside, by the Service's name; a NodePort listener's brokers advertise host-reachable
// addresses (the sample's advertise the host address), so it is reached at its nodePort.
func bootstrapAddresses(listeners []kafkav1alpha1.Listener, svc *corev1.Service, hostAddress string) (inside, fromHost map[string]string) {
	inside, fromHost = map[string]string{}, map[string]string{}
	for _, l := range listeners {
		for _, p := range svc.Spec.Ports {
			switch {
			case p.Name != l.Name:
			case l.Type == kafkav1alpha1.ListenerNodePort && p.NodePort != 0:
				fromHost[l.Name] = net.JoinHostPort(hostAddress, strconv.Itoa(int(p.NodePort)))
			case l.Type == kafkav1alpha1.ListenerInternal || l.Type == "":
				inside[l.Name] = net.JoinHostPort(svc.Name+"."+svc.Namespace, strconv.Itoa(int(p.Port)))
			}
		}
	}
	return inside, fromHost
}

// controlStatus asks the environment of dir for its status over the control socket.
func controlStatus(dir string) (envStatus, error) {
	ans, err := control(dir, controlRequest{Op: "status"})
	if err != nil {
		return envStatus{}, err
	}
	if ans.Error != "" {
		return envStatus{}, errors.New(ans.Error)
	}
	if ans.Status == nil {
		return envStatus{}, errors.New("the environment answered no status")
	}
	return *ans.Status, nil
}

// statusMain is `paddock dev status`: exit 0 and the status when an environment runs in dir,
// 1 with what is known when it is starting, 3 when nothing runs there.
func statusMain(dir string, stdout, stderr io.Writer) int {
	run := findRunning(dir)
	if !run.running {
		fmt.Fprintf(stdout, "paddock dev: nothing runs with state directory %s (start it with make dev)\n", dir)
		return 3
	}
	st, err := controlStatus(dir)
	if err != nil {
		fmt.Fprintf(stderr, "paddock dev: %s, but its control socket does not answer (%v): "+
			"it is still starting, see its terminal (or %s when detached)\n", run.describe(dir), err, filepath.Join(dir, outputFile))
		return 1
	}
	printStatus(stdout, st)
	return 0
}

// printStatus writes st for people: what runs, its addresses, and the commands that reach it.
func printStatus(w io.Writer, st envStatus) {
	rel := relativeToWD
	state := "ready"
	if !st.Ready {
		state = "up; its sample is still coming up"
	}
	fmt.Fprintf(w, "paddock dev is running with state directory %s: pid %d, up %s, %s\n\n",
		rel(st.Dir), st.PID, time.Since(st.Started).Round(time.Second), state)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tPID\tSTATE\tLOG")
	for _, c := range st.Components {
		state := "running"
		if !c.Running {
			state = "EXITED"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", c.Name, c.PID, state, rel(c.Log))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\napiserver: %s from this machine (%s inside the private network)\noperator:  %s\n\n",
		st.APIServer, st.APIServerInside, st.Operator)
	printNodes(w, st.Nodes)
	for _, c := range st.Clusters {
		fmt.Fprintf(w, "\nKafkaCluster %s: %d brokers wanted, %d registered, %d serving\n", c.Name, c.Replicas, c.Registered, c.Serving)
		for _, l := range sortedKeys(c.FromHost) {
			fmt.Fprintf(w, "  listener %-10s from this machine: kcat -b %s -L\n", l, c.FromHost[l])
		}
		for _, l := range sortedKeys(c.Inside) {
			fmt.Fprintf(w, "  listener %-10s inside (%s): kcat -b %s -L\n", l, rel(st.Shell), c.Inside[l])
		}
	}
	fmt.Fprintf(w, `
Reach it from any terminal of this machine:
  source %s      # KUBECONFIG, PATH with kubectl and paddock, PADDOCK_BOOTSTRAP, PADDOCK_EXTERNAL_BOOTSTRAP
  kubectl get kafkaclusters,brokers
  %s             # a shell inside the private network
Stop it: paddock dev down
`, rel(st.EnvFile), rel(st.Shell))
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// downMain is `paddock dev down`: it stops the environment of dir, whichever terminal (or
// none, --detach) started it, and returns once every process of it is gone. Nothing running
// there is no error.
func downMain(dir string, stdout, stderr io.Writer) int {
	run := findRunning(dir)
	if !run.running {
		fmt.Fprintf(stdout, "paddock dev: nothing runs with state directory %s\n", dir)
		return 0
	}
	began := time.Now()
	// The control socket answers once Start is done; while it starts, its process is told
	// with SIGTERM, which it handles the same way.
	if ans, err := control(dir, controlRequest{Op: "down"}); err != nil || ans.Error != "" {
		if run.pid == 0 {
			fmt.Fprintf(stderr, "paddock dev: %s, but it has no pid file and its control socket does not answer (%v)\n", run.describe(dir), err)
			return 1
		}
		if err := syscall.Kill(run.pid, syscall.SIGTERM); err != nil {
			fmt.Fprintf(stderr, "paddock dev: stop pid %d: %v\n", run.pid, err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "paddock dev: stopping the environment of %s (pid %d)\n", dir, run.pid)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for findRunning(dir).running {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "paddock dev: still running after %s; its log: %s\n", time.Since(began).Round(time.Second), filepath.Join(dir, "logs"))
			return 1
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Fprintf(stdout, "paddock dev: stopped in %s; every process it started is gone\n", time.Since(began).Round(100*time.Millisecond))
	return 0
}
