package devcluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// One environment per state directory. The process that runs it holds a lock on
// <dir>/paddock-dev.lock for as long as it runs — the kernel drops it when the process ends,
// however it ends — and writes its pid and start time to <dir>/paddock-dev.pid. Another
// start with the same directory finds the lock taken and stops before it changes anything;
// `paddock dev status` and `down` find the environment through the same two files and its
// control socket.

// Files of the state directory that belong to the running environment's process, not to its
// state: a clean start keeps them while it wipes the rest.
const (
	lockFile   = "paddock-dev.lock"
	pidFile    = "paddock-dev.pid"
	outputFile = "paddock-dev.out" // what a detached environment prints (detach.go)
)

// processFile reports whether name is one of the files above.
func processFile(name string) bool {
	return name == lockFile || name == pidFile || name == outputFile
}

// errAlreadyRunning is Start's error when an environment runs with the same state directory.
var errAlreadyRunning = errors.New("an environment is already running with this state directory")

// lockState takes the state directory's lock, creating the directory and the lock file. It
// fails with errAlreadyRunning when another process holds it.
func lockState(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the state lock: %w", err)
	}
	// An open-file-description lock: held until this descriptor is closed (Stop) or the
	// process ends, and never inherited by a child (the descriptor is close-on-exec).
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		_ = f.Close() // not ours
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("%s: %w", findRunning(dir).describe(dir), errAlreadyRunning)
		}
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return f, nil
}

// lockHeld reports whether a process holds dir's lock, without taking it (a probe that took
// it, even for a moment, could make a start running at that moment fail).
func lockHeld(dir string) bool {
	f, err := os.Open(filepath.Join(dir, lockFile))
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }() // read only
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false
	}
	return lk.Type != unix.F_UNLCK
}

// writePIDFile records this process and its start in dir.
func writePIDFile(dir string, started time.Time) error {
	content := fmt.Sprintf("%d\n%s\n", os.Getpid(), started.Format(time.RFC3339Nano))
	return os.WriteFile(filepath.Join(dir, pidFile), []byte(content), 0o644)
}

// runningEnv is what can be told from outside about the environment of a state directory.
type runningEnv struct {
	// running: its process holds the lock, or its control socket answers.
	running bool
	// pid and started come from the pid file; zero when it is missing.
	pid     int
	started time.Time
	// answers: the control socket accepted a connection (Start has finished).
	answers bool
}

// findRunning looks for the environment of dir.
func findRunning(dir string) runningEnv {
	var r runningEnv
	if b, err := os.ReadFile(filepath.Join(dir, pidFile)); err == nil {
		lines := strings.Split(string(b), "\n")
		r.pid, _ = strconv.Atoi(strings.TrimSpace(lines[0]))
		if len(lines) > 1 {
			r.started, _ = time.Parse(time.RFC3339Nano, strings.TrimSpace(lines[1]))
		}
	}
	if c, err := net.DialTimeout("unix", ControlSocket(dir), time.Second); err == nil {
		_ = c.Close() // only probing
		r.answers = true
	}
	r.running = r.answers || lockHeld(dir)
	return r
}

// describe is one sentence about r for people.
func (r runningEnv) describe(dir string) string {
	s := "paddock dev is already running with state directory " + dir
	switch {
	case r.pid != 0 && !r.started.IsZero() && r.answers:
		s += fmt.Sprintf(" (pid %d, up %s)", r.pid, time.Since(r.started).Round(time.Second))
	case r.pid != 0 && !r.started.IsZero():
		s += fmt.Sprintf(" (pid %d, starting for %s)", r.pid, time.Since(r.started).Round(time.Second))
	case r.pid != 0:
		s += fmt.Sprintf(" (pid %d)", r.pid)
	}
	return s
}
