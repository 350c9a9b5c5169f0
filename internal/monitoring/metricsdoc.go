package monitoring

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Series is one documented row of docs/metrics.md: a metric name (or a prefix ending in *,
// for a library's collectors) and the process that exports it.
type Series struct {
	Name    string
	Process string
	Type    string
}

// metricsHeading names the process a section of docs/metrics.md documents:
// "## Broker series (`paddock broker`)" → "broker".
var metricsHeading = regexp.MustCompile("^## .*\\(`paddock (broker|manager)`\\)")

// DocumentedSeries reads docs/metrics.md: in each section whose heading names a process, every
// table row whose first cell is a `code` name is a series of that process.
func DocumentedSeries(md []byte) ([]Series, error) {
	var out []Series
	process := ""
	sc := bufio.NewScanner(bytes.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			process = ""
			if m := metricsHeading.FindStringSubmatch(line); m != nil {
				process = m[1]
			}
			continue
		}
		if process == "" || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			return nil, fmt.Errorf("docs/metrics.md: row %q has fewer than two cells", line)
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		out = append(out, Series{Name: name, Process: process, Type: strings.TrimSpace(cells[2])})
	}
	return out, sc.Err()
}

// Compare lists the registered names no row documents and the documented names (of process)
// nothing registers. A row ending in * documents every name with that prefix and is itself
// never missing.
func Compare(process string, registered []string, doc []Series) (undocumented, unregistered []string) {
	have := map[string]bool{}
	for _, n := range registered {
		have[n] = true
	}
	var names, prefixes []string
	for _, s := range doc {
		if s.Process != process {
			continue
		}
		if p, ok := strings.CutSuffix(s.Name, "*"); ok {
			prefixes = append(prefixes, p)
			continue
		}
		names = append(names, s.Name)
		if !have[s.Name] {
			unregistered = append(unregistered, s.Name)
		}
	}
	for _, n := range registered {
		if slices.Contains(names, n) || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(n, p) }) {
			continue
		}
		undocumented = append(undocumented, n)
	}
	slices.Sort(undocumented)
	slices.Sort(unregistered)
	return undocumented, unregistered
}

// descName is the fqName of a prometheus.Desc from its String form: client_golang has no
// getter, and its String is stable ("Desc{fqName: \"x\", ...").
var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// DescNames returns the metric names in the String forms of descs.
func DescNames(descs []string) []string {
	var out []string
	for _, d := range descs {
		if m := descName.FindStringSubmatch(d); m != nil && !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return out
}
