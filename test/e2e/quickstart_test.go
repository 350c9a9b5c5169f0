package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/devcluster"
)

// The README's quickstart, run as a newcomer runs it. TestReadmeQuickstart takes the block
// between <!-- quickstart --> and <!-- /quickstart --> in README.md, line by line, and runs it
// in order in one bash from the host's network, in a checkout of its own (the repository's
// files, linked, with an empty .paddock/), so it starts its own environment with `make dev`
// as written — then checks what each line shows. A README edit that breaks a line, or drops
// one of the steps below, fails it.

// quickstartStep is what a line of the quickstart does, by its command.
type quickstartStep struct {
	kind string
	// pattern recognises the line.
	pattern *regexp.Regexp
	// what the quickstart must show, for the failure message when no line does it.
	shows string
}

var quickstartSteps = []quickstartStep{
	{"start", regexp.MustCompile(`^make dev\b.*--detach`), "starting paddock dev in the background"},
	{"env", regexp.MustCompile(`^(source|\.) \.paddock/dev/env\b`), "sourcing .paddock/dev/env"},
	{"brokers", regexp.MustCompile(`^kubectl get \S*brokers\b`), "listing the brokers"},
	{"produce", regexp.MustCompile(`\|\s*kcat -P\b`), "producing a record with kcat"},
	{"consume", regexp.MustCompile(`^kcat -C\b`), "consuming it with kcat"},
	{"secure", regexp.MustCompile(`^kcat -b \$PADDOCK_SECURE_BOOTSTRAP .*security\.protocol=SASL_SSL.* -C\b`), "consuming it over the secure listener (TLS, SCRAM) as the sample KafkaUser"},
	{"freeze", regexp.MustCompile(`^kill -STOP \$\(cat \.paddock/dev/run/\S+\.pid\)`), "freezing a broker"},
	{"fenced", regexp.MustCompile(`^kubectl wait .*=Fenced\b`), "watching it fence"},
	{"crash", regexp.MustCompile(`^kill -9 \$\(cat \.paddock/dev/run/\S+\.pid\)`), "crashing a broker"},
	{"serving", regexp.MustCompile(`^kubectl wait .*=Serving\b`), "watching it come back"},
	{"stop", regexp.MustCompile(`^paddock dev down\b`), "stopping it"},
}

// readmeQuickstart returns the command lines of the README's quickstart block.
func readmeQuickstart(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	begin := strings.Index(text, "<!-- quickstart")
	end := strings.Index(text, "<!-- /quickstart -->")
	if begin < 0 || end < begin {
		t.Fatal("README.md has no block between <!-- quickstart --> and <!-- /quickstart -->")
	}
	block := text[begin:end]
	open := strings.Index(block, "```sh\n")
	closing := strings.LastIndex(block, "```")
	if open < 0 || closing <= open {
		t.Fatal("the README's quickstart block holds no ```sh code block")
	}
	var lines []string
	for _, line := range strings.Split(block[open+len("```sh\n"):closing], "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	return lines
}

// kindOf is the step a quickstart line is, or "".
func kindOf(line string) string {
	for _, s := range quickstartSteps {
		if s.pattern.MatchString(line) {
			return s.kind
		}
	}
	return ""
}

// scratchCheckout is a directory that looks like a checkout of the repository to make and go
// — every top-level entry of the repository linked — with a .paddock of its own.
func scratchCheckout(t *testing.T) string {
	t.Helper()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "checkout")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case ".paddock", ".git": // its own state; no git metadata (go build stamps nothing then)
			continue
		}
		if err := os.Symlink(filepath.Join(repo, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// quickstartEnv is the environment of the person's shell: this machine's PATH, home and Go
// settings, nothing of the test's own environment (it runs inside the private network), and a
// host address of its own so the test never takes 127.0.0.1's ports from a person's make dev.
func quickstartEnv(hostAddress string) []string {
	env := []string{"PADDOCK_DEV_HOST_ADDRESS=" + hostAddress}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "PATH", name == "HOME", name == "USER", name == "TMPDIR", name == "LANG",
			strings.HasPrefix(name, "GO"):
			env = append(env, kv)
		}
	}
	return env
}

// quickstartScript runs lines in order, marking each line's output and exit status, and
// stops at the first line that fails. After the start it runs `make dev` once more (the
// second make dev of a person who forgot the first): it must refuse and leave the first
// environment alone, which the lines after it then use.
func quickstartScript(dir, log string, lines []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exec >%s 2>&1\ncd %s\nmark() { printf '\\n::%%s::\\n' \"$1\"; }\n", shellQuote(log), shellQuote(dir))
	for i, line := range lines {
		fmt.Fprintf(&b, "mark 'step %d'\n%s\nrc=$?\nmark \"exit %d $rc\"\n[ $rc -eq 0 ] || exit 1\n", i, line, i)
		if kindOf(line) == "start" {
			b.WriteString("mark 'step pid-before'\ncat .paddock/dev/paddock-dev.pid\nmark 'exit pid-before 0'\n")
			b.WriteString("mark 'step second-make-dev'\nmake dev\nmark \"exit second-make-dev $?\"\n")
			b.WriteString("mark 'step pid-after'\ncat .paddock/dev/paddock-dev.pid\nmark 'exit pid-after 0'\n")
		}
	}
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// stepResult is one line's output and exit status.
type stepResult struct {
	out  string
	exit int
	ran  bool
}

var stepMarks = regexp.MustCompile(`(?m)^::(step|exit) (\S+)(?: (\d+))?::$`)

// parseSteps splits the script's log into each step's output and exit status.
func parseSteps(log string) map[string]stepResult {
	out := map[string]stepResult{}
	var current string
	var start int
	for _, m := range stepMarks.FindAllStringSubmatchIndex(log, -1) {
		kind, id := log[m[2]:m[3]], log[m[4]:m[5]]
		switch kind {
		case "step":
			current, start = id, m[1]
		case "exit":
			if id == current {
				code, _ := strconv.Atoi(log[m[6]:m[7]])
				out[id] = stepResult{out: log[start:m[0]], exit: code, ran: true}
			}
		}
	}
	return out
}

var (
	produceValue = regexp.MustCompile(`^echo\s+(?:"([^"]*)"|'([^']*)'|(\S+))\s*\|`)
	topicFlag    = regexp.MustCompile(`\s-t\s+(\S+)`)
)

// TestReadmeQuickstart runs the README's quickstart and checks what each line shows: make dev
// started in the background and consumed its first record, the three brokers Serving and
// Alive, the produced record consumed back, the frozen broker Fenced and, crashed, Serving again,
// everything stopped; and a second make dev while it ran refused and changed nothing.
func TestReadmeQuickstart(t *testing.T) {
	lines := readmeQuickstart(t)
	seen := map[string]bool{}
	for _, line := range lines {
		seen[kindOf(line)] = true
	}
	for _, s := range quickstartSteps {
		if !seen[s.kind] {
			t.Errorf("the README's quickstart no longer shows %s (a line matching %s)", s.shows, s.pattern)
		}
	}
	if t.Failed() {
		return
	}
	dir := scratchCheckout(t)
	env := quickstartEnv(devcluster.TestHostAddress())
	t.Cleanup(func() { // a run that failed half-way leaves nothing running
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, err := devcluster.HostCommand(ctx, env, filepath.Join(dir, "bin", "paddock"), "dev", "down", "--dir="+filepath.Join(dir, ".paddock", "dev"))
		t.Logf("cleanup: paddock dev down: %v\n%s", err, out)
	})
	logPath := filepath.Join(t.TempDir(), "quickstart.log")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	started := time.Now()
	_, err := devcluster.HostCommand(ctx, env, "bash", "-c", quickstartScript(dir, logPath, lines))
	measure(t, "quickstart", "the README's quickstart, make dev to paddock dev down", time.Since(started))
	log, readErr := os.ReadFile(logPath)
	if readErr != nil {
		t.Fatalf("the quickstart wrote no log (%v; script: %v)", readErr, err)
	}
	t.Logf("the quickstart as a person sees it:\n%s", log)
	results := parseSteps(string(log))

	var produced, topic string
	for i, line := range lines {
		r := results[strconv.Itoa(i)]
		if !r.ran || r.exit != 0 {
			t.Fatalf("quickstart line %d failed (exit %d, ran %v): %s\n%s", i+1, r.exit, r.ran, line, r.out)
		}
		kind := kindOf(line)
		if kind == "produce" {
			produced, topic = producedRecord(line)
		}
		if msg := checkStep(kind, line, r.out, produced, topic); msg != "" {
			t.Errorf("quickstart line %d (%s) shows the wrong thing: %s\n%s", i+1, line, msg, r.out)
		}
		if kind == "start" {
			checkSecondMakeDev(t, results)
		}
	}
	status, err := devcluster.HostCommand(ctx, env, filepath.Join(dir, "bin", "paddock"), "dev", "status", "--dir="+filepath.Join(dir, ".paddock", "dev"))
	if err == nil || !strings.Contains(string(status), "nothing runs with state directory") {
		t.Errorf("after the quickstart's last line, paddock dev status says (err %v):\n%s", err, status)
	}
}

// producedRecord is the value and topic of a line `echo <value> | kcat -P … -t <topic>`.
func producedRecord(line string) (value, topic string) {
	if m := produceValue.FindStringSubmatch(line); m != nil {
		value = m[1] + m[2] + m[3]
	}
	if m := topicFlag.FindStringSubmatch(line); m != nil {
		topic = m[1]
	}
	return value, topic
}

var servingAlive = regexp.MustCompile(`(?m)^\S*demo-(\d)\s.*\bServing\s+Alive\b`)

// checkStep says what is wrong with what a line of kind showed, or "".
func checkStep(kind, line, out, produced, topic string) string {
	switch kind {
	case "start":
		for _, want := range []string{"preflight passed", "first record consumed", "running in the background"} {
			if !strings.Contains(out, want) {
				return "no " + strconv.Quote(want)
			}
		}
	case "brokers":
		if n := len(servingAlive.FindAllString(out, -1)); n != 3 {
			return fmt.Sprintf("%d brokers Serving and Alive, want demo-0, demo-1 and demo-2", n)
		}
	case "produce":
		if produced == "" || topic == "" {
			return "no record value (echo …) or topic (-t …) the test can follow"
		}
	case "consume", "secure":
		if m := topicFlag.FindStringSubmatch(line); m == nil || m[1] != topic {
			return fmt.Sprintf("consumes another topic than the one produced to (%s)", topic)
		}
		if !strings.Contains(out, produced) {
			return fmt.Sprintf("the produced record %q is not in the output", produced)
		}
	case "fenced", "serving":
		if !strings.Contains(out, "condition met") {
			return "kubectl wait did not say condition met"
		}
	case "stop":
		if !strings.Contains(out, "every process it started is gone") {
			return "paddock dev down did not say everything stopped"
		}
	}
	return ""
}

// checkSecondMakeDev: the second make dev, run while the first environment runs, refused
// with the line that says so, and the environment's process is the same.
func checkSecondMakeDev(t *testing.T, results map[string]stepResult) {
	t.Helper()
	second := results["second-make-dev"]
	if !second.ran || second.exit == 0 || !strings.Contains(second.out, "already running with state directory .paddock/dev") ||
		!strings.Contains(second.out, "paddock dev down") {
		t.Errorf("a second make dev while the first runs: exit %d, want it refused naming the running environment and how to stop it:\n%s",
			second.exit, second.out)
	}
	before, after := strings.TrimSpace(results["pid-before"].out), strings.TrimSpace(results["pid-after"].out)
	if before == "" || before != after {
		t.Errorf("the environment's pid file changed across the second make dev: %q, then %q", before, after)
	}
}
