// Command testsummary reads the `go test -json` event files that `make test` writes (through
// gotestsum, one file per go test run, in the directories named on the command line) and
// prints what a person triaging a run wants first: each failed test by package and name,
// each package that failed without a failing test (a build error, a panic, a timeout), the
// slowest tests and the slowest packages. It exits 0; the run's own status is make's.
//
// Usage: testsummary [-slowest N] DIR...
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64 // seconds, on pass/fail/skip
}

// result is one test's or package's outcome in one run (Test empty: the package).
type result struct {
	run, pkg, test string
	action         string
	elapsed        time.Duration
}

func main() {
	slowest := flag.Int("slowest", 10, "how many of the slowest tests and packages to list")
	flag.Parse()
	var all []result
	for _, dir := range flag.Args() {
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		for _, f := range files {
			rs, err := read(f)
			if err != nil {
				fmt.Fprintf(os.Stderr, "testsummary: %s: %v\n", f, err)
				continue
			}
			all = append(all, rs...)
		}
	}
	report(os.Stdout, all, *slowest)
}

// read is the outcomes in one event file; run names it by its directory and file
// (pass-2/race).
func read(path string) ([]result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	run := filepath.Join(filepath.Base(filepath.Dir(path)), strings.TrimSuffix(filepath.Base(path), ".json"))
	var out []result
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil { // a line the build printed, not an event
			continue
		}
		switch e.Action {
		case "pass", "fail", "skip":
			out = append(out, result{run: run, pkg: e.Package, test: e.Test, action: e.Action,
				elapsed: time.Duration(e.Elapsed * float64(time.Second))})
		}
	}
	return out, sc.Err()
}

func report(w io.Writer, all []result, slowest int) {
	trimModule(all)
	var tests, pkgs, failedTests, failedPkgs []result
	for _, r := range all {
		if r.test == "" {
			pkgs = append(pkgs, r)
		} else if !strings.Contains(r.test, "/") { // subtests are inside their parent's time
			tests = append(tests, r)
		}
		if r.action == "fail" && r.test != "" {
			failedTests = append(failedTests, r)
		}
	}
	for _, p := range pkgs {
		if p.action == "fail" && !slices.ContainsFunc(failedTests, func(t result) bool { return t.run == p.run && t.pkg == p.pkg }) {
			failedPkgs = append(failedPkgs, p)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer func() { _ = tw.Flush() }()
	passed, failed := 0, 0
	for _, t := range tests {
		switch t.action {
		case "pass":
			passed++
		case "fail":
			failed++
		}
	}
	fmt.Fprintf(tw, "\n=== test summary: %d packages, %d tests passed, %d failed (subtests not counted; failed ones listed), %d packages failed outside a test\n",
		len(pkgs), passed, failed, len(failedPkgs))
	for _, r := range failedTests {
		fmt.Fprintf(tw, "FAIL\t%s\t%s\t%s\t%s\n", r.run, r.pkg, r.test, r.elapsed.Round(time.Millisecond))
	}
	for _, r := range failedPkgs {
		fmt.Fprintf(tw, "FAIL\t%s\t%s\t(the package: a build error, panic or timeout; see its output)\t%s\n", r.run, r.pkg, r.elapsed.Round(time.Millisecond))
	}
	byTime := func(a, b result) int { return cmp.Compare(b.elapsed, a.elapsed) }
	slices.SortStableFunc(tests, byTime)
	slices.SortStableFunc(pkgs, byTime)
	fmt.Fprintf(tw, "--- slowest tests\n")
	for _, r := range tests[:min(slowest, len(tests))] {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.elapsed.Round(time.Millisecond), r.action, r.run, r.pkg, r.test)
	}
	fmt.Fprintf(tw, "--- slowest packages\n")
	for _, r := range pkgs[:min(slowest, len(pkgs))] {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.elapsed.Round(time.Millisecond), r.action, r.run, r.pkg)
	}
}

// trimModule cuts the module path all packages share (github.com/owner/repo/) from their names.
func trimModule(all []result) {
	if len(all) == 0 {
		return
	}
	prefix := all[0].pkg
	for _, r := range all {
		for !strings.HasPrefix(r.pkg+"/", prefix+"/") {
			i := strings.LastIndex(prefix, "/")
			if i < 0 {
				return
			}
			prefix = prefix[:i]
		}
	}
	for i := range all {
		all[i].pkg = cmp.Or(strings.TrimPrefix(strings.TrimPrefix(all[i].pkg, prefix), "/"), all[i].pkg)
	}
}
