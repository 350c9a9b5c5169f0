package devcluster

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// A detached start (`paddock dev --detach`, `make dev DEV_FLAGS=--detach`): the command a
// person typed starts paddock dev again in a session of its own, its output going to
// <dir>/paddock-dev.out, shows that output as it grows — the same progress and instructions
// a foreground start prints — and returns once the environment is ready (exit 0) or has
// exited (exit 1). The environment runs on until `paddock dev down`.

// detachedEnv marks the first process of a detached environment.
const detachedEnv = "PADDOCK_DEV_DETACHED"

// detachedChild reports whether this process (or its parent, inside the private network) was
// started by detach: the machine has been checked, and nobody is at its terminal.
func detachedChild() bool { return os.Getenv(detachedEnv) != "" }

// detach starts `paddock <args>` (without --detach) in the background and follows its output
// until the environment of dir is ready or the process exits.
func detach(dir string, args []string, out io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(out, "paddock dev:", err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		return fail(fmt.Errorf("find own executable: %w", err))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	outPath := filepath.Join(dir, outputFile)
	f, err := os.Create(outPath)
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command(self, withoutDetach(args)...)
	cmd.Env = append(os.Environ(), detachedEnv+"=1")
	cmd.Stdout, cmd.Stderr = f, f // stdin: /dev/null
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	_ = f.Close() // the child has its own copy
	if err != nil {
		return fail(fmt.Errorf("start in the background: %w", err))
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(signals)

	follow := &follower{path: outPath, w: out}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			follow.copy()
			return fail(fmt.Errorf("the environment exited while starting (%v); its output is above and in %s", err, outPath))
		case <-signals:
			fmt.Fprintln(out, "paddock dev: interrupted: stopping the environment it was starting")
			_ = cmd.Process.Signal(syscall.SIGTERM) // it forwards it inside
		case <-tick.C:
			follow.copy()
			if st, err := controlStatus(dir); err == nil && st.Ready {
				follow.copy()
				fmt.Fprintf(out, "paddock dev: running in the background (pid %d): paddock dev status shows it, paddock dev down stops it; its output goes on in %s\n",
					st.PID, relativeToWD(outPath))
				return 0
			}
		}
	}
}

// withoutDetach is args without the --detach flag.
func withoutDetach(args []string) []string {
	var out []string
	for _, a := range args {
		switch a {
		case "--detach", "-detach", "--detach=true", "-detach=true":
			continue
		}
		out = append(out, a)
	}
	return out
}

// follower copies what is appended to a file.
type follower struct {
	path   string
	w      io.Writer
	offset int64
}

func (f *follower) copy() {
	file, err := os.Open(f.path)
	if err != nil {
		return // not there yet
	}
	defer func() { _ = file.Close() }() // read only
	if _, err := file.Seek(f.offset, io.SeekStart); err != nil {
		return
	}
	n, _ := io.Copy(f.w, file) // what could be read is shown; the rest comes next time
	f.offset += n
}
