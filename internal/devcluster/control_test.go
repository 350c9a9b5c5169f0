package devcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNodeCommandArguments: bad arguments are refused with a usage error (exit 2) before
// anything is sent; good ones reach the control socket, whose absence is a clear error
// (exit 1) naming the state directory.
func TestNodeCommandArguments(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		code int
		says string
	}{
		{nil, 2, "Usage"},
		{[]string{"list", "extra"}, 2, "no arguments"},
		{[]string{"stop"}, 2, "needs a node name"},
		{[]string{"stop", "a", "b"}, 2, "one node at a time"},
		{[]string{"stop", "a", "--gently"}, 2, "unknown flag"},
		{[]string{"start", "a", "--freeze"}, 2, "unknown flag"},
		{[]string{"reboot", "a"}, 2, "Usage"},
		{[]string{"stop", "paddock-dev-1", "--freeze"}, 1, dir},
		{[]string{"list"}, 1, "is `make dev` running"},
	}
	for _, tc := range cases {
		out, errOut := filepath.Join(dir, "out"), filepath.Join(dir, "err")
		stdout, _ := os.Create(out)
		stderr, _ := os.Create(errOut)
		code := nodeMain(dir, tc.args, stdout, stderr)
		_ = stdout.Close()
		_ = stderr.Close()
		said, _ := os.ReadFile(errOut)
		if code != tc.code || !strings.Contains(string(said), tc.says) {
			t.Errorf("paddock dev node %q: exit %d, %q; want exit %d saying %q", tc.args, code, said, tc.code, tc.says)
		}
	}
}
