package devcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// process is one child process that paddock dev started: a control-plane component or a pod's
// container. It runs in its own process group, so stopping it also stops anything it forked,
// and it gets SIGKILL if paddock dev itself dies (Pdeathsig), so no process outlives the
// environment.
type process struct {
	name string
	cmd  *exec.Cmd
	// done is closed when the process has exited; err then holds what Wait returned.
	done chan struct{}
	err  error
}

// startProcess starts bin with args and env, appending its stdout and stderr to logPath.
// A nil env inherits paddock dev's environment. With a sandbox, the process starts inside it
// (a pod's container); without, in paddock dev's own namespaces (a control-plane component).
func startProcess(name, bin string, args, env []string, logPath string, sandbox *podSandbox) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		if sandbox != nil {
			// The sandbox is this OS thread's mount namespace, and a child's parent-death
			// signal fires when the thread that forked it ends: the thread stays locked to
			// this goroutine, which waits for the child, and ends with it (never unlocked).
			runtime.LockOSThread()
			if err := sandbox.enter(); err != nil {
				started <- err
				return
			}
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		_ = logFile.Close() // the process that wrote it has exited
		close(p.done)
	}()
	if err := <-started; err != nil {
		_ = logFile.Close() // nothing was written to it
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// pid is the process id, also its process group id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// signal sends sig to the process's whole group.
func (p *process) signal(sig syscall.Signal) {
	// ESRCH only means the group is already gone.
	_ = syscall.Kill(-p.pid(), sig)
}

// stop sends SIGTERM, waits up to grace for the exit, then SIGKILLs the group and waits.
func (p *process) stop(grace time.Duration) {
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	// Kill the rest of the group even after a clean exit of the leader: a child it forked
	// must not survive it.
	p.signal(syscall.SIGKILL)
	<-p.done
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitStatus returns the exit code and, when a signal killed the process, the signal.
// Only valid once done is closed.
func (p *process) exitStatus() (code int, sig syscall.Signal) {
	var exitErr *exec.ExitError
	if p.err != nil && !errors.As(p.err, &exitErr) {
		return 128, 0
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok {
		return p.cmd.ProcessState.ExitCode(), 0
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal()), ws.Signal()
	}
	return ws.ExitStatus(), 0
}

// BuildPaddock builds the paddock binary of the module at moduleRoot into dir, for tests
// whose pods run it. It works inside the private network, which has no route out:
// everything must come from the module cache.
func BuildPaddock(moduleRoot, dir string) (string, error) {
	bin := filepath.Join(dir, "paddock")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = moduleRoot
	build.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOPROXY=off", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build paddock: %w\n%s", err, out)
	}
	return bin, nil
}
