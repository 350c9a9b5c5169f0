package devcluster

import (
	"sync"
	"time"
)

// ContainerRun is one run of a pod's container as a local process, as its node agent saw it.
// Tests read these to time what happened to a process (SIGTERM → exit, kill → restart).
type ContainerRun struct {
	Namespace, Pod, Container, Node string
	PID                             int
	Started                         time.Time
	// TermSent is when the agent sent SIGTERM (pod deletion or failed liveness probe); zero
	// if it never did.
	TermSent time.Time
	// Exited is when the process exited; zero while it runs.
	Exited time.Time
	// ExitCode is the exit code, 128+n when signal n killed it.
	ExitCode int
}

// history records every container run of the environment.
type history struct {
	mu   sync.Mutex
	runs []*ContainerRun // guarded by mu
}

func (h *history) started(r ContainerRun) *ContainerRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	run := &r
	h.runs = append(h.runs, run)
	return run
}

func (h *history) update(run *ContainerRun, change func(*ContainerRun)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	change(run)
}

// of returns copies of the runs of namespace/pod, oldest first.
func (h *history) of(namespace, pod string) []ContainerRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []ContainerRun
	for _, r := range h.runs {
		if r.Namespace == namespace && r.Pod == pod {
			out = append(out, *r)
		}
	}
	return out
}
