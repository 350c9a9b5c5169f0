package devcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// The control channel of a running environment (docs/devcluster.md, "Node loss by hand"):
// a unix socket in its state directory, through which `paddock dev node …` run from another
// terminal stops, freezes, thaws and starts nodes. One JSON request per connection, one JSON
// answer.

// ControlSocket is the control channel's path in state directory dir.
func ControlSocket(dir string) string { return filepath.Join(dir, "control.sock") }

// NodeStopMode says what happens to the processes of a node that stops.
type NodeStopMode string

const (
	// NodeKill kills them: the node is gone with everything on it.
	NodeKill NodeStopMode = "kill"
	// NodeFreeze stops them with SIGSTOP and keeps them: alive, unreachable, the zombies of
	// a partitioned node. ThawNode resumes them; StartNode adopts or kills them.
	NodeFreeze NodeStopMode = "freeze"
)

// StopNodeMode stops node name's agent for good (until StartNode): its Node Lease is no
// longer renewed, so the node-lifecycle controller turns the Node NotReady, and its
// processes are killed or frozen.
func (e *Env) StopNodeMode(name string, mode NodeStopMode) error {
	n, err := e.node(name)
	if err != nil {
		return err
	}
	switch mode {
	case NodeKill:
		n.halt(false)
		n.killFrozen() // a node frozen earlier: now its processes die too
	case NodeFreeze:
		n.halt(true)
	default:
		return fmt.Errorf("unknown stop mode %q (kill or freeze)", mode)
	}
	e.proxy.resync()
	return nil
}

// ThawNode resumes the frozen processes of stopped node name (SIGCONT) while the node stays
// lost, and returns how many it resumed.
func (e *Env) ThawNode(name string) (int, error) {
	n, err := e.node(name)
	if err != nil {
		return 0, err
	}
	if n.running() {
		return 0, fmt.Errorf("node %s is running: only a stopped node has frozen processes", name)
	}
	return n.thaw(), nil
}

// NodeInfo is one node as `paddock dev node list` shows it.
type NodeInfo struct {
	Name  string `json:"name"`
	Zone  string `json:"zone"`
	Agent string `json:"agent"` // running or stopped
	Ready string `json:"ready"` // the Node's Ready condition status
	// Pods are the pods bound to the node (namespace/name), Frozen the processes the node
	// keeps frozen (or thawed) by pod.
	Pods   []string         `json:"pods"`
	Frozen map[string][]int `json:"frozen,omitempty"`
}

// NodeList describes every node.
func (e *Env) NodeList(ctx context.Context) ([]NodeInfo, error) {
	pods := &corev1.PodList{}
	if err := e.client.List(ctx, pods); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var out []NodeInfo
	for _, n := range e.nodes {
		info := NodeInfo{Name: n.name, Zone: n.zone, Agent: "stopped", Ready: "Unknown", Frozen: n.frozenProcesses()}
		if n.running() {
			info.Agent = "running"
		}
		node := &corev1.Node{}
		if err := e.client.Get(ctx, client.ObjectKey{Name: n.name}, node); err == nil {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					info.Ready = string(c.Status)
				}
			}
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == n.name {
				info.Pods = append(info.Pods, p.Namespace+"/"+p.Name)
			}
		}
		slices.Sort(info.Pods)
		out = append(out, info)
	}
	return out, nil
}

// controlRequest is one command on the control channel.
type controlRequest struct {
	Op   string       `json:"op"` // list, stop, thaw, start; status, down
	Node string       `json:"node,omitempty"`
	Mode NodeStopMode `json:"mode,omitempty"`
}

// controlAnswer is its answer: Error, or Nodes (list), Status (status) and Message.
type controlAnswer struct {
	Error   string     `json:"error,omitempty"`
	Message string     `json:"message,omitempty"`
	Nodes   []NodeInfo `json:"nodes,omitempty"`
	Status  *envStatus `json:"status,omitempty"`
}

// serveControl listens on the control socket until ctx ends.
func (e *Env) serveControl(ctx context.Context) error {
	path := ControlSocket(e.cfg.Dir)
	_ = os.Remove(path) // a socket left by an environment that did not stop cleanly
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen on the control socket %s: %w", path, err)
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		<-ctx.Done()
		_ = ln.Close() // ends Accept below
	}()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go e.answer(ctx, conn)
		}
	}()
	return nil
}

func (e *Env) answer(ctx context.Context, conn net.Conn) {
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Minute))
	var req controlRequest
	var ans controlAnswer
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&req); err != nil {
		ans.Error = fmt.Sprintf("bad request: %v", err)
	} else {
		ans = e.do(ctx, req)
	}
	log.FromContext(ctx).Info("Control request", "op", req.Op, "node", req.Node, "mode", req.Mode, "error", ans.Error)
	_ = json.NewEncoder(conn).Encode(ans) // the client hung up: nobody to tell
}

func (e *Env) do(ctx context.Context, req controlRequest) controlAnswer {
	var err error
	var msg string
	switch req.Op {
	case "list":
		nodes, err := e.NodeList(ctx)
		if err != nil {
			return controlAnswer{Error: err.Error()}
		}
		return controlAnswer{Nodes: nodes}
	case "status":
		st, err := e.status(ctx)
		if err != nil {
			return controlAnswer{Error: err.Error()}
		}
		return controlAnswer{Status: &st}
	case "down":
		e.requestStop()
		msg = "stopping"
	case "stop":
		mode := req.Mode
		if mode == "" {
			mode = NodeFreeze
		}
		if err = e.StopNodeMode(req.Node, mode); err == nil {
			msg = fmt.Sprintf("node %s stopped (%s): its Node turns NotReady after the node monitor grace period", req.Node, mode)
		}
	case "thaw":
		var n int
		if n, err = e.ThawNode(req.Node); err == nil {
			msg = fmt.Sprintf("node %s: %d frozen processes resumed; the node stays stopped", req.Node, n)
		}
	case "start":
		if err = e.StartNode(req.Node); err == nil {
			msg = fmt.Sprintf("node %s started: Ready again, its pods run (frozen processes of pods still bound to it resumed, the others killed)", req.Node)
		}
	default:
		err = fmt.Errorf("unknown operation %q", req.Op)
	}
	if err != nil {
		return controlAnswer{Error: err.Error()}
	}
	return controlAnswer{Message: msg}
}

// nodeUsage is `paddock dev node help`.
const nodeUsage = `Usage: paddock dev [--dir=DIR] node list
       paddock dev [--dir=DIR] node stop <node> [--freeze|--kill]
       paddock dev [--dir=DIR] node thaw <node>
       paddock dev [--dir=DIR] node start <node>

Talk to the running paddock dev environment of DIR (default .paddock/dev):
  list   the nodes, their agent (running/stopped), Ready status, pods and frozen processes
  stop   stop a node's agent for good: its Node goes NotReady; --freeze (the default) stops
         its pods' processes with SIGSTOP, alive and unreachable (zombies); --kill kills them
  thaw   resume a stopped node's frozen processes (SIGCONT); the node stays stopped
  start  bring a node back: Ready again, frozen processes of pods still bound to it resume,
         those of pods that are gone are killed`

// nodeMain runs `paddock dev node <list|stop|thaw|start> …` against the environment whose
// state directory is dir.
func nodeMain(dir string, args []string, stdout, stderr io.Writer) int {
	req, usageErr := parseNodeArgs(args)
	switch {
	case usageErr == errHelp:
		fmt.Fprintln(stdout, nodeUsage)
		return 0
	case usageErr == errUsage:
		fmt.Fprintln(stderr, nodeUsage)
		return 2
	case usageErr != nil:
		fmt.Fprintf(stderr, "paddock dev node: %v\n", usageErr)
		return 2
	}
	ans, err := control(dir, req)
	if err != nil {
		fmt.Fprintf(stderr, "paddock dev node: %v (is `make dev` running with state directory %s?)\n", err, dir)
		return 1
	}
	if ans.Error != "" {
		fmt.Fprintln(stderr, "paddock dev node:", ans.Error)
		return 1
	}
	if req.Op == "list" {
		printNodes(stdout, ans.Nodes)
		return 0
	}
	fmt.Fprintln(stdout, ans.Message)
	return 0
}

// Answers of parseNodeArgs that are not about one argument: show the usage.
var (
	errHelp  = errors.New("help")
	errUsage = errors.New("usage")
)

// parseNodeArgs turns `node …` arguments into a control request; a bad argument is refused
// here, before anything is sent.
func parseNodeArgs(args []string) (controlRequest, error) {
	if len(args) == 0 {
		return controlRequest{}, errUsage
	}
	req := controlRequest{Op: args[0]}
	rest := args[1:]
	switch req.Op {
	case "list":
		if len(rest) != 0 {
			return req, errors.New("list takes no arguments")
		}
		return req, nil
	case "stop", "thaw", "start":
	case "-h", "--help", "help":
		return req, errHelp
	default:
		return req, errUsage
	}
	for _, a := range rest {
		switch {
		case a == "--freeze" && req.Op == "stop":
			req.Mode = NodeFreeze
		case a == "--kill" && req.Op == "stop":
			req.Mode = NodeKill
		case strings.HasPrefix(a, "-"):
			return req, fmt.Errorf("unknown flag %s", a)
		case req.Node != "":
			return req, errors.New("one node at a time")
		default:
			req.Node = a
		}
	}
	if req.Node == "" {
		return req, fmt.Errorf("%s needs a node name (paddock dev node list shows them)", req.Op)
	}
	return req, nil
}

// control sends req over dir's control socket and returns the answer.
func control(dir string, req controlRequest) (controlAnswer, error) {
	var ans controlAnswer
	conn, err := net.DialTimeout("unix", ControlSocket(dir), 5*time.Second)
	if err != nil {
		return ans, fmt.Errorf("connect to the control socket: %w", err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Minute))
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return ans, fmt.Errorf("send: %w", err)
	}
	if err := json.NewDecoder(conn).Decode(&ans); err != nil {
		return ans, errors.Join(errors.New("read the answer"), err)
	}
	return ans, nil
}

func printNodes(out io.Writer, nodes []NodeInfo) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tZONE\tAGENT\tREADY\tPODS\tFROZEN")
	for _, n := range nodes {
		var frozen []string
		for _, pod := range slices.Sorted(maps.Keys(n.Frozen)) {
			frozen = append(frozen, fmt.Sprintf("%s%v", pod, n.Frozen[pod]))
		}
		pods := strings.Join(n.Pods, ",")
		if pods == "" {
			pods = "-"
		}
		fz := strings.Join(frozen, ",")
		if fz == "" {
			fz = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.Zone, n.Agent, n.Ready, pods, fz)
	}
	_ = tw.Flush()
}
