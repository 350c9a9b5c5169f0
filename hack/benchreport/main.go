// Command benchreport reads the output of `make bench`'s benchmarks (go test -bench, on
// standard input, from one run) and prints their throughputs and the ratios issue 13 asks
// for: produce through one broker against the disk bound (broker/storage's plain
// write+fdatasync loop) and against franz-go's kfake, consume (sendfile and the vectored write)
// against kfake, produce and consume over a TLS + SCRAM-SHA-512 listener against plaintext,
// and what a new connection costs on each kind of listener. The aims are
// printed beside the ratios; nothing is asserted (the numbers depend on the machine).
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The benchmarks the report needs (names without the -GOMAXPROCS suffix).
const (
	loop16K      = "BenchmarkSyncLoop/batch=16KiB"
	loop1M       = "BenchmarkSyncLoop/batch=1024KiB"
	producePad   = "BenchmarkCompare/produce/server=paddock"
	produceFake  = "BenchmarkCompare/produce/server=kfake"
	consumePad   = "BenchmarkCompare/consume/server=paddock"
	consumeFake  = "BenchmarkCompare/consume/server=kfake"
	consumeVec   = "BenchmarkCompare/consume/server=paddock-vectored"
	produceTLS   = "BenchmarkCompare/produce/server=paddock-tls"
	consumeTLS   = "BenchmarkCompare/consume/server=paddock-tls"
	connectPlain = "BenchmarkConnect/listener=plaintext ns/op"
	connectTLS   = "BenchmarkConnect/listener=tls ns/op"
	connectSCRAM = "BenchmarkConnect/listener=tls+scram-sha-512 ns/op"
	idleRSS      = "BenchmarkIdleConnections B_rss/idle_conn"
	idleFloor    = "BenchmarkIdleConnections B_rss/idle_conn_go_floor"
	stormFile    = "BenchmarkFetchStorm/copy=false"
	stormMemory  = "BenchmarkFetchStorm/copy=true"
	peakUnit     = " MiB_rss_peak_over_base"
	baseUnit     = " MiB_rss_base"
	budgetUnit   = " MiB_budget"
	reportHeader = "make bench: one run, MB/s (1 MB = 10^6 bytes; the median of -count runs)"
)

func main() {
	rates, err := parse(os.Stdin)
	if err == nil {
		err = report(os.Stdout, rates)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

var procSuffix = regexp.MustCompile(`-\d+$`)

// parse returns the MB/s column of every benchmark result line, by name without the
// -GOMAXPROCS suffix, and every other reported metric by name, a space and its unit; a
// benchmark run several times (-count) gives its median.
func parse(r io.Reader) (map[string]float64, error) {
	runs := map[string][]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := procSuffix.ReplaceAllString(fields[0], "")
		for i := 2; i+1 < len(fields); i += 2 {
			unit := fields[i+1]
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %s %q: %w", fields[0], unit, fields[i], err)
			}
			key := name
			if unit != "MB/s" {
				key += " " + unit
			}
			runs[key] = append(runs[key], v)
		}
	}
	rates := map[string]float64{}
	for name, vs := range runs {
		rates[name] = median(vs)
	}
	return rates, sc.Err()
}

// median is the middle value of vs (the mean of the two middle ones for an even count).
func median(vs []float64) float64 {
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// report prints the throughputs and ratios; a benchmark missing from the run is an error.
func report(w io.Writer, rates map[string]float64) error {
	for _, name := range []string{loop16K, loop1M, producePad, produceFake, consumePad, consumeFake, consumeVec, produceTLS, consumeTLS,
		connectPlain, connectTLS, connectSCRAM,
		idleRSS, idleFloor, stormFile + peakUnit, stormFile + baseUnit, stormFile + budgetUnit, stormMemory + peakUnit, stormMemory + baseUnit, stormMemory + budgetUnit} {
		if rates[name] <= 0 {
			return fmt.Errorf("no figure for %s in the benchmark output (did it fail or not run?)", name)
		}
	}
	rows := []struct {
		what string
		name string
	}{
		{"disk: write+fdatasync loop, 16 KiB writes", loop16K},
		{"disk: write+fdatasync loop, 1 MiB writes (disk bound)", loop1M},
		{"produce, paddock (kgo, acks=all, 1 KiB, 16 partitions)", producePad},
		{"produce, kfake (in memory, no fsync)", produceFake},
		{"consume, paddock (kgo, 16 partitions; sendfile)", consumePad},
		{"consume, paddock through memory (vectored write)", consumeVec},
		{"consume, kfake", consumeFake},
		{"produce, paddock over TLS + SCRAM-SHA-512", produceTLS},
		{"consume, paddock over TLS + SCRAM-SHA-512", consumeTLS},
	}
	fmt.Fprintln(w, reportHeader)
	for _, r := range rows {
		fmt.Fprintf(w, "  %-58s %9.1f\n", r.what, rates[r.name])
	}
	fmt.Fprintln(w, "ratios:")
	fmt.Fprintf(w, "  %-58s %8.0f %%  (aim ≥ 70 %%)\n", "produce / disk bound (1 MiB fsync loop)", 100*rates[producePad]/rates[loop1M])
	fmt.Fprintf(w, "  %-58s %8.1f ×\n", "produce / plain 16 KiB fsync loop", rates[producePad]/rates[loop16K])
	fmt.Fprintf(w, "  %-58s %8.2f ×\n", "produce / kfake", rates[producePad]/rates[produceFake])
	fmt.Fprintf(w, "  %-58s %8.2f ×  (aim ≥ 1.5)\n", "consume (sendfile) / kfake", rates[consumePad]/rates[consumeFake])
	fmt.Fprintf(w, "  %-58s %8.2f ×\n", "consume (vectored write) / kfake", rates[consumeVec]/rates[consumeFake])
	fmt.Fprintf(w, "  %-58s %8.2f ×\n", "consume: sendfile / vectored write", rates[consumePad]/rates[consumeVec])
	fmt.Fprintf(w, "  %-58s %8.2f ×  (aim ≥ 0.8)\n", "produce over TLS + SCRAM / plaintext", rates[produceTLS]/rates[producePad])
	fmt.Fprintf(w, "  %-58s %8.2f ×  (aim ≥ 0.8)\n", "consume over TLS + SCRAM / plaintext (sendfile)", rates[consumeTLS]/rates[consumePad])
	fmt.Fprintln(w, "a new connection, dial to its first Metadata answer (kgo Ping):")
	fmt.Fprintf(w, "  %-58s %8.2f ms\n", "plaintext", rates[connectPlain]/1e6)
	fmt.Fprintf(w, "  %-58s %8.2f ms  (%.1f × plaintext)\n", "TLS", rates[connectTLS]/1e6, rates[connectTLS]/rates[connectPlain])
	fmt.Fprintf(w, "  %-58s %8.2f ms  (%.1f × plaintext; SCRAM alone %.2f ms)\n", "TLS + SCRAM-SHA-512", rates[connectSCRAM]/1e6,
		rates[connectSCRAM]/rates[connectPlain], (rates[connectSCRAM]-rates[connectTLS])/1e6)
	fmt.Fprintln(w, "bounds (docs/bounds.md):")
	fmt.Fprintf(w, "  %-58s %8.0f B  (aim ≤ 8192)\n", "RSS per idle connection, 15,000 connections", rates[idleRSS])
	fmt.Fprintf(w, "  %-58s %8.0f B\n", "the same for a bare Go server (a goroutine in a read)", rates[idleFloor])
	fmt.Fprintf(w, "  %-58s %8.2f ×\n", "idle connection / bare Go server's", rates[idleRSS]/rates[idleFloor])
	fmt.Fprintf(w, "  %-58s %8.0f MiB over a %.0f MiB base\n", "fetch storm, peak RSS, records sent from the files", rates[stormFile+peakUnit], rates[stormFile+baseUnit])
	fmt.Fprintf(w, "  %-58s %8.0f MiB  (aim ≤ %d MiB, the storm's own state)\n", "  its peak over the base (the records take no budget)", rates[stormFile+peakUnit], stormBaselineMiB)
	fmt.Fprintf(w, "  %-58s %8.2f ×\n", "  its peak over the base / queued.max.response.bytes", rates[stormFile+peakUnit]/rates[stormFile+budgetUnit])
	fmt.Fprintf(w, "  %-58s %8.0f MiB over a %.0f MiB base\n", "fetch storm, peak RSS, records through memory", rates[stormMemory+peakUnit], rates[stormMemory+baseUnit])
	fmt.Fprintf(w, "  %-58s %8.0f MiB  (aim ≤ %d MiB, the storm's own state)\n", "  its peak over the base − queued.max.response.bytes", rates[stormMemory+peakUnit]-rates[stormMemory+budgetUnit], stormBaselineMiB)
	fmt.Fprintf(w, "  %-58s %8.2f ×\n", "  its peak over the base / queued.max.response.bytes", rates[stormMemory+peakUnit]/rates[stormMemory+budgetUnit])
	return nil
}

// stormBaselineMiB is the stated baseline of docs/bounds.md, "Measured": under a fetch storm
// the broker's RSS stays within its base + queued.max.response.bytes + this — the storm's own
// state (51 connections, their requests within queued.max.request.bytes, the encoded answers'
// headers, the runtime's stacks and buffers), measured at 17–18 MiB when the records take no
// budget (sent from the files).
const stormBaselineMiB = 32
