package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/paddock-dev/paddock/internal/devcluster"
)

// paddockBinary is the paddock binary built for this run; the manager and broker pods run it.
var paddockBinary string

func TestMain(m *testing.M) {
	if !devcluster.InPrivateNetwork() {
		code, err := devcluster.RunInPrivateNetwork()
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
		}
		os.Exit(code)
	}
	if err := devcluster.SetupPrivateNetwork(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "paddock-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	if paddockBinary, err = devcluster.BuildPaddock(filepath.Join("..", ".."), dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	code := m.Run()
	printSummary()
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: remove the build directory:", err)
	}
	os.Exit(code)
}

// measurement is one delay a scenario measured.
type measurement struct {
	scenario, what string
	took           time.Duration
}

// tally is one number a scenario counted (records acknowledged, lost, ...).
type tally struct {
	scenario, what string
	n              int
}

var (
	measurementsMu sync.Mutex
	measurements   []measurement // guarded by measurementsMu
	tallies        []tally       // guarded by measurementsMu
)

// count records a number for the summary's second table; the scenario logs its own.
func count(scenario, what string, n int) {
	measurementsMu.Lock()
	defer measurementsMu.Unlock()
	tallies = append(tallies, tally{scenario, what, n})
}

// measure records a delay for the summary table and logs it.
func measure(t *testing.T, scenario, what string, took time.Duration) {
	t.Helper()
	t.Logf("%s: %s = %s", scenario, what, took.Round(time.Millisecond))
	measurementsMu.Lock()
	defer measurementsMu.Unlock()
	measurements = append(measurements, measurement{scenario: scenario, what: what, took: took})
}

func printSummary() {
	measurementsMu.Lock()
	defer measurementsMu.Unlock()
	if len(measurements) == 0 {
		return
	}
	fmt.Println("\n=== paddock e2e: measured delays")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SCENARIO\tMEASURED\tDELAY")
	for _, m := range measurements {
		fmt.Fprintf(w, "%s\t%s\t%s\n", m.scenario, m.what, m.took.Round(time.Millisecond))
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: print the summary:", err)
	}
	if len(tallies) == 0 {
		return
	}
	fmt.Println("\n=== paddock e2e: counted")
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SCENARIO\tCOUNTED\tNUMBER")
	for _, c := range tallies {
		fmt.Fprintf(w, "%s\t%s\t%d\n", c.scenario, c.what, c.n)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: print the summary:", err)
	}
}
