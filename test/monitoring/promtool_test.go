package monitoring

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/paddock-dev/paddock/internal/monitoring"
)

// kit is the monitoring kit's directory.
const kit = "../../config/monitoring"

// promtoolPath is $PROMTOOL (the Makefile exports it), else the newest bin/promtool-* of the
// checkout; without either the test fails and says how to build it.
func promtoolPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("PROMTOOL=%s: %v (make promtool builds it)", p, err)
		}
		return p
	}
	found, _ := filepath.Glob("../../bin/promtool-*")
	if len(found) == 0 {
		t.Fatal("no promtool: run through `make test-rules`, or `make promtool` (it lands in bin/)")
	}
	slices.Sort(found)
	return found[len(found)-1]
}

// promtool runs promtool with args in dir, stdin as its input, and returns its combined
// output; a non-zero exit fails the test with that output.
func promtool(t *testing.T, dir string, stdin []byte, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtoolPath(t), args...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// kitRules reads the kit's PrometheusRule.
func kitRules(t *testing.T) monitoring.RuleFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(kit, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := monitoring.RulesOf(b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// writeRules writes f as dir/name.
func writeRules(t *testing.T, dir, name string, f monitoring.RuleFile) {
	t.Helper()
	b, err := f.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
