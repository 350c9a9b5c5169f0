package storagecheck

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/storage"
)

// freeAddr is a loopback address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

type roleRun struct {
	code           int
	stdout, stderr bytes.Buffer
	message        string
}

// runBoth runs the peer and the checker as the Job's two pods do, each with its own
// options, over real TCP on dir, and returns what each reported.
func runBoth(t *testing.T, dir string, peerFS storage.FS) (checker, peer *roleRun) {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	checker, peer = &roleRun{}, &roleRun{}
	msgDir := t.TempDir()
	var wg sync.WaitGroup
	for _, r := range []struct {
		run *roleRun
		o   Options
	}{
		{peer, Options{DataDir: dir, ServeAddress: addr, Rounds: 20, PeerFS: peerFS, TerminationMessagePath: filepath.Join(msgDir, "peer")}},
		{checker, Options{DataDir: dir, Peer: addr, Rounds: 20, TerminationMessagePath: filepath.Join(msgDir, "checker")}},
	} {
		wg.Go(func() {
			r.run.code = Run(ctx, r.o, &r.run.stdout, &r.run.stderr)
			b, _ := os.ReadFile(r.o.TerminationMessagePath)
			r.run.message = string(b)
		})
	}
	wg.Wait()
	return checker, peer
}

// TestTheStorageCheckPassesALocalDiskFromTwoProcessesOverTCP: the peer and the checker, as
// the Job's two pods run them, certify a local disk: every property held, exit 0 for both,
// and the termination message the operator reads lists every property as ok.
func TestTheStorageCheckPassesALocalDiskFromTwoProcessesOverTCP(t *testing.T) {
	dir := t.TempDir()
	checker, peer := runBoth(t, dir, nil)
	if checker.code != ExitVerified || peer.code != ExitVerified {
		t.Fatalf("checker exit %d, peer exit %d\nchecker:\n%s%s\npeer:\n%s%s", checker.code, peer.code, checker.stdout.String(), checker.stderr.String(), peer.stdout.String(), peer.stderr.String())
	}
	results, ok := v1alpha1.ParseStorageCheckResults(checker.message)
	if !ok || len(results) != 7 {
		t.Fatalf("termination message %q: %d results", checker.message, len(results))
	}
	for _, r := range results {
		if !r.OK {
			t.Errorf("%s failed: %s", r.Property, r.Detail)
		}
	}
	if names, _ := (storage.OSFS{}).ReadDirNames(dir); len(names) != 0 {
		t.Errorf("the check left %v in the data directory", names)
	}
	t.Logf("checker:\n%s", checker.stdout.String())
}

// nonExclusiveFS is a volume whose exclusive create is not exclusive (O_EXCL ignored), as on
// an object-store mount.
type nonExclusiveFS struct{ storage.FS }

func (n nonExclusiveFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	return n.FS.OpenFile(name, flag&^os.O_EXCL, perm)
}

// TestTheStorageCheckFailsWhenThePeersExclusiveCreateIsNotExclusive: the check can fail —
// a peer whose file system ignores O_EXCL lets both nodes win a create race, and the checker
// exits 1 naming that property in its termination message.
func TestTheStorageCheckFailsWhenThePeersExclusiveCreateIsNotExclusive(t *testing.T) {
	checker, peer := runBoth(t, t.TempDir(), nonExclusiveFS{storage.OSFS{}})
	if checker.code != ExitFailed {
		t.Fatalf("checker exit %d, want %d\n%s%s", checker.code, ExitFailed, checker.stdout.String(), checker.stderr.String())
	}
	if peer.code != ExitVerified {
		t.Errorf("peer exit %d, want 0 (it served the checker to the end)\n%s", peer.code, peer.stderr.String())
	}
	results, _ := v1alpha1.ParseStorageCheckResults(checker.message)
	var failed []string
	for _, r := range results {
		if !r.OK {
			failed = append(failed, r.Property)
		}
	}
	if len(failed) == 0 || failed[0] != storage.PropExclusiveCreate {
		t.Fatalf("failed %v, want %q first:\n%s", failed, storage.PropExclusiveCreate, checker.message)
	}
	t.Logf("checker:\n%s", checker.stdout.String())
}

// TestThePeerRefusesPathsOutsideACheckDirectory: the peer serves only CheckVolume's work
// directories, never the cluster's data beside them.
func TestThePeerRefusesPathsOutsideACheckDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fence"), []byte("cluster data"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newPeerFS(dir, storage.OSFS{})
	for _, path := range []string{filepath.Join(dir, "fence"), dir, filepath.Join(dir, checkDirPrefix+"x", "..", "fence"), "/etc/passwd"} {
		var a Answer
		if err := p.OpenFile(OpenArgs{Path: path, Flag: os.O_RDWR}, &a); err != nil || a.Err == nil {
			t.Errorf("open %s: answer %+v, want refused", path, a.Err)
		}
		if err := p.Remove(PathArgs{Path: path}, &a); err != nil || a.Err == nil {
			t.Errorf("remove %s: answer %+v, want refused", path, a.Err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "fence")); err != nil || string(b) != "cluster data" {
		t.Fatalf("the cluster's file: %q %v", b, err)
	}
}

// TestTheCommandRunsBothRolesLocallyAndRefusesBadUsage: `paddock storage check --local` is
// the whole protocol on one machine; missing or conflicting roles are usage errors (exit 2).
func TestTheCommandRunsBothRolesLocallyAndRefusesBadUsage(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"check", "--local", "--rounds=5", "--data-dir=" + t.TempDir()}, &out, &errs); code != ExitVerified {
		t.Fatalf("--local: exit %d\n%s%s", code, out.String(), errs.String())
	}
	if !strings.Contains(out.String(), "--- summary") {
		t.Errorf("no summary in\n%s", out.String())
	}
	for _, args := range [][]string{{}, {"check"}, {"check", "--local"}, {"check", "--data-dir=/x", "--local", "--peer=a:1"}, {"verify"}} {
		if code := run(args, &out, &errs); code != ExitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, ExitUsage)
		}
	}
	t.Setenv("JOB_COMPLETION_INDEX", "2")
	if code := run([]string{"check", "--data-dir=/x", "--by-job-index", "--peer=a:1", "--serve-address=:1"}, &out, &errs); code != ExitUsage {
		t.Errorf("index 2: exit %d, want %d", code, ExitUsage)
	}
}

// TestTheCheckerSaysWhyItDidNotRunWhenNoPeerAnswers: no peer within the timeout is exit 3
// with the reason in the termination message (the operator's CheckNotRun).
func TestTheCheckerSaysWhyItDidNotRunWhenNoPeerAnswers(t *testing.T) {
	msg := filepath.Join(t.TempDir(), "message")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	if code := Run(ctx, Options{DataDir: t.TempDir(), Peer: freeAddr(t), TerminationMessagePath: msg}, &out, &errs); code != ExitNotRun {
		t.Fatalf("exit %d, want %d", code, ExitNotRun)
	}
	b, _ := os.ReadFile(msg)
	if _, ok := v1alpha1.ParseStorageCheckResults(string(b)); ok || !strings.HasPrefix(string(b), "error: reach the peer") {
		t.Fatalf("termination message %q", b)
	}
}
