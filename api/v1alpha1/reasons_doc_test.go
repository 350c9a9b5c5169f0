package v1alpha1_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// reasonConstants are the values of every Condition*, Reason* and Event* string constant of
// this package: what the operator writes as condition types, condition reasons and Event
// reasons.
func reasonConstants(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	values := map[string][]string{} // value → constant names
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range spec.Names {
				if i >= len(spec.Values) || !regexp.MustCompile(`^(Condition|Reason|Event)[A-Z]`).MatchString(name.Name) {
					continue
				}
				lit, ok := spec.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				values[v] = append(values[v], name.Name)
			}
			return true
		})
	}
	return values
}

// documentedReasons are the first-column values of the troubleshooting table of
// docs/operations.md, between its reasons markers.
func documentedReasons(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "<!-- reasons:")
	table, _, closed := strings.Cut(table, "<!-- /reasons -->")
	if !ok || !closed {
		t.Fatal("docs/operations.md has no <!-- reasons: ... --> … <!-- /reasons --> table")
	}
	var out []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z]+)` \\|").FindAllStringSubmatch(table, -1) {
		out = append(out, m[1])
	}
	return out
}

// A user who reads a reason in `kubectl describe` finds it in docs/operations.md,
// "Troubleshoot", and the guide names no reason the operator no longer writes.
func TestEveryReasonIsInTheOperationsGuide(t *testing.T) {
	consts := reasonConstants(t)
	documented := documentedReasons(t)
	if len(consts) == 0 || len(documented) == 0 {
		t.Fatalf("found %d constants and %d documented reasons", len(consts), len(documented))
	}
	for v, names := range consts {
		if !slices.Contains(documented, v) {
			t.Errorf("%s (%s) is not in docs/operations.md's troubleshooting table", v, strings.Join(names, ", "))
		}
	}
	for _, v := range documented {
		if consts[v] == nil {
			t.Errorf("docs/operations.md documents %q, which no constant of api/v1alpha1 has", v)
		}
	}
}
