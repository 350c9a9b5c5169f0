package storage

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestSoakStorage runs the seeded simulations — two racing takeovers and a deposed writer, the
// two-leader test, node crashes — on the local disk and on NFSSim, round after round with
// fresh seeds, for -storage.soak (make soak-storage DURATION=...), and prints the iterations,
// seeds and faults survived. It stops at the first failure, printing the seed that replays it.
func TestSoakStorage(t *testing.T) {
	if *flagSoak <= 0 {
		t.Skip("a soak runs only when asked: -storage.soak=<duration> (make soak-storage); make test runs the seeded simulations it repeats")
	}
	families := []struct {
		test     string
		scenario func(t *testing.T, seed uint64, b *simBackend) simStats
	}{
		{"TestTwoRacingTakeoversAndADeposedWriter", func(t *testing.T, seed uint64, b *simBackend) simStats { return takeoverRace(t, seed, b, 4, 2, false) }},
		{"TestTwoLogsAtEpochs5And6NeverLoseAnAcknowledgedAppend", func(t *testing.T, seed uint64, b *simBackend) simStats { return takeoverRace(t, seed, b, 5, 1, false) }},
		{"TestADeposedLeadersCleanerRacingTwoTakeovers", func(t *testing.T, seed uint64, b *simBackend) simStats {
			return takeoverRaceCompacted(t, seed, b, 4, 2)
		}},
		{"TestAcknowledgedAppendsSurviveNodeCrashes", nodeCrashes},
	}
	type tally struct {
		iterations, steps, acked, served int
		seeds                            []uint64
	}
	tallies := map[string]*tally{}
	faults := map[string]int{}
	start, deadline := time.Now(), time.Now().Add(*flagSoak)
	report := func() {
		var b strings.Builder
		total, totalFaults := 0, 0
		for _, f := range families {
			for _, backend := range simBackends {
				k := f.test + " on " + backend
				tl := tallies[k]
				if tl == nil {
					continue
				}
				total += tl.iterations
				seeds := make([]string, len(tl.seeds))
				for i, s := range tl.seeds {
					seeds[i] = fmt.Sprint(s)
				}
				fmt.Fprintf(&b, "%s: %d iterations, %d scheduled steps, %d acknowledged and %d served batches checked\n  seeds: %s\n", k, tl.iterations, tl.steps, tl.acked, tl.served, strings.Join(seeds, " "))
			}
		}
		kinds := make([]string, 0, len(faults))
		for k := range faults {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		for _, k := range kinds {
			totalFaults += faults[k]
			fmt.Fprintf(&b, "faults survived: %6d × %s\n", faults[k], k)
		}
		fmt.Fprintf(&b, "soak: %d iterations in %v, %d faults survived\n", total, time.Since(start).Round(time.Second), totalFaults)
		fmt.Fprint(os.Stdout, b.String())
	}
	defer report()
	for round := 0; time.Now().Before(deadline); round++ {
		for _, f := range families {
			for _, backend := range simBackends {
				seed := rand.Uint64()
				var st simStats
				ok := t.Run(fmt.Sprintf("%s/%s/seed=%d", f.test, backend, seed), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) { st = f.scenario(t, seed, newSimBackend(t, backend, seed)) })
				})
				if !ok {
					t.Fatalf("replay with: go test ./broker/storage -run '^%s$' -storage.seed=%d", f.test, seed)
				}
				k := f.test + " on " + backend
				if tallies[k] == nil {
					tallies[k] = &tally{}
				}
				tl := tallies[k]
				tl.iterations++
				tl.steps += st.grants
				tl.acked += st.acked
				tl.served += st.served
				tl.seeds = append(tl.seeds, seed)
				for _, fault := range st.faults {
					faults[faultKind(fault)]++
				}
			}
		}
	}
}

// faultKind is a fault's description without its numbers ("the node died after 12 steps" →
// "the node died after N steps").
func faultKind(s string) string {
	var b strings.Builder
	digits := false
	for _, r := range s {
		if r >= '0' && r <= '9' {
			if !digits {
				b.WriteByte('N')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteRune(r)
	}
	return b.String()
}
