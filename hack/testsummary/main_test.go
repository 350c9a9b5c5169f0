package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A run with a failed test, a package that failed outside any test, and passing tests: the
// summary names the failure by package and test, the broken package, and lists the slowest
// test first.
func TestSummaryNamesEachFailureAndTheSlowestTests(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pass-1")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	events := strings.Join([]string{
		`{"Action":"run","Package":"example/a","Test":"TestQuick"}`,
		`{"Action":"pass","Package":"example/a","Test":"TestQuick","Elapsed":0.01}`,
		`{"Action":"pass","Package":"example/a","Test":"TestSlow/sub","Elapsed":9}`,
		`{"Action":"pass","Package":"example/a","Test":"TestSlow","Elapsed":9.5}`,
		`{"Action":"fail","Package":"example/a","Test":"TestFlaky","Elapsed":2.931}`,
		`{"Action":"fail","Package":"example/a","Elapsed":12}`,
		`# example/b [example/b.test]`,
		`{"Action":"fail","Package":"example/b","Elapsed":0}`,
	}, "\n")
	if err := os.WriteFile(filepath.Join(dir, "race.json"), []byte(events), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var all []result
	rs, err := read(filepath.Join(dir, "race.json"))
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, rs...)
	report(&out, all, 2)
	got := out.String()
	for _, want := range []string{
		`2 packages, 2 tests passed, 1 failed \(subtests not counted; failed ones listed\), 1 packages failed outside a test`,
		`FAIL\s+pass-1/race\s+a\s+TestFlaky\s+2.931s`,
		`FAIL\s+pass-1/race\s+b\s+\(the package`,
	} {
		if !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("summary lacks %s:\n%s", want, got)
		}
	}
	slow := got[strings.Index(got, "--- slowest tests"):strings.Index(got, "--- slowest packages")]
	if lines := strings.Split(strings.TrimSpace(slow), "\n"); len(lines) != 3 || !strings.Contains(lines[1], "TestSlow") || strings.Contains(slow, "TestSlow/sub") {
		t.Errorf("slowest tests: want TestSlow first, no subtests, two rows:\n%s", slow)
	}
}
