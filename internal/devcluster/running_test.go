package devcluster

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// identity is what a wipe and a new start would change about a file of the state directory:
// the file itself (its inode) and its content.
type identity struct {
	inode   uint64
	content string
}

func identities(t *testing.T, dir string, names ...string) map[string]identity {
	t.Helper()
	out := map[string]identity{}
	for _, name := range names {
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		id := identity{inode: fi.Sys().(*syscall.Stat_t).Ino}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			id.content = string(b)
		}
		out[name] = id
	}
	return out
}

// secondStartChangesNothing is the second `make dev` while one runs: with env running in
// cfg.Dir, another Start with the same directory, and `paddock dev` run from the host's
// terminal as make dev runs it, both refuse with the command to reuse or stop it — and the
// running environment keeps its files, its processes and its answers.
func secondStartChangesNothing(ctx context.Context, t *testing.T, env *Env, cfg Config, pods ...string) {
	kept := []string{stateMarker, "kubeconfig", "pki", filepath.Join("pki", tokenFile), "etcd", pidFile, lockFile, "shell"}
	before := identities(t, env.Dir(), kept...)
	pids := map[string]int{}
	for _, pod := range pods {
		ns, name, _ := strings.Cut(pod, "/")
		pids[pod] = readPID(t, env, ns, name)
	}

	if second, err := Start(ctx, cfg); !errors.Is(err, errAlreadyRunning) {
		if second != nil {
			second.Stop()
		}
		t.Fatalf("a second Start with the same state directory: %v; want it refused (already running)", err)
	} else if !strings.Contains(err.Error(), "already running with state directory "+env.Dir()) {
		t.Errorf("Start's refusal does not name the state directory: %v", err)
	}

	out, err := HostCommand(ctx, []string{"PATH=" + os.Getenv("PATH")}, paddockBinary, "dev",
		"--dir="+cfg.Dir, "--host-address="+cfg.HostAddress, "--config-dir="+cfg.ConfigDir)
	for _, want := range []string{"FAIL  environment", "already running with state directory", "paddock dev down", "nothing was changed"} {
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("paddock dev with the running environment's directory: err %v, output without %q:\n%s", err, want, out)
		}
	}

	if after := identities(t, env.Dir(), kept...); !maps.Equal(before, after) {
		t.Errorf("the running environment's files changed:\nbefore %+v\nafter  %+v", before, after)
	}
	for pod, pid := range pids {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("%s's process %d is gone after the second start: %v", pod, pid, err)
		}
	}
	status, err := HostCommand(ctx, []string{"PATH=" + os.Getenv("PATH")}, paddockBinary, "dev", "status", "--dir="+cfg.Dir)
	if err != nil || !strings.Contains(string(status), NodeName(0)) || !strings.Contains(string(status), pods[0]) {
		t.Errorf("paddock dev status after the second start: %v\n%s", err, status)
	}
	t.Logf("paddock dev status:\n%s", status)
}
