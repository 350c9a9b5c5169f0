package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// devOnly are the packages only `paddock dev` needs: the image's binary must link none.
var devOnly = []string{
	"github.com/paddock-dev/paddock/internal/devcluster",
	"sigs.k8s.io/controller-runtime/pkg/envtest",
	"sigs.k8s.io/kustomize/",
}

// deps lists the packages the paddock binary links, built with tags.
func deps(t *testing.T, tags string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-tags="+tags, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps -tags=%q: %v", tags, err)
	}
	return strings.Fields(string(out))
}

func linked(pkgs []string, prefix string) bool {
	for _, p := range pkgs {
		if p == prefix || strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

func TestTheImagesBuildLinksNoDevEnvironment(t *testing.T) {
	slim, full := deps(t, "nodev"), deps(t, "")
	for _, p := range devOnly {
		if linked(slim, p) {
			t.Errorf("the nodev build links %s", p)
		}
		if !linked(full, p) {
			t.Errorf("the default build does not link %s: is it still what paddock dev needs?", p)
		}
	}
	t.Logf("packages linked: %d with the dev environment, %d without", len(full), len(slim))
}

// build builds paddock with tags and link flags into a temporary directory.
func build(t *testing.T, tags, ldflags string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "paddock")
	cmd := exec.Command("go", "build", "-trimpath", "-tags="+tags, "-ldflags="+ldflags, "-o", bin, ".") // make build's flags: its build cache
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags=%q: %v\n%s", tags, err, out)
	}
	return bin
}

// run runs bin with args and returns its stdout, stderr and exit code.
func run(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run %s %v: %v", bin, args, err)
	}
	return o.String(), e.String(), code
}

func TestTheSlimBinarySaysItHasNoDevEnvironmentAndHowToGetOne(t *testing.T) {
	const pkg = "github.com/paddock-dev/paddock/internal/buildinfo"
	bin := build(t, "nodev", "-X "+pkg+".version=9.9.9 -X "+pkg+".commit=abc123")

	_, stderr, code := run(t, bin, "dev", "--no-sample")
	if code != 1 || !strings.Contains(stderr, "has no dev environment") || !strings.Contains(stderr, "make dev") {
		t.Errorf("paddock dev in the slim build: exit %d, stderr:\n%s\nwant exit 1, saying it has no dev environment and to run make dev", code, stderr)
	}
	stdout, _, code := run(t, bin, "version")
	for _, line := range []string{"version: 9.9.9", "commit: abc123", "flavour: slim", "tags: nodev", "go: go1."} {
		if code != 0 || !strings.Contains(stdout, line) {
			t.Errorf("paddock version: exit %d, output:\n%s\nwant a line %q", code, stdout, line)
		}
	}
	if _, _, code := run(t, bin, "version", "extra"); code != 2 {
		t.Errorf("paddock version with an argument: exit %d, want 2", code)
	}
	if stdout, _, _ := run(t, bin, "help"); !strings.Contains(stdout, "not in this build") {
		t.Errorf("the slim build's usage does not say dev is not in it:\n%s", stdout)
	}
}
