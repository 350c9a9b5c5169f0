package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkSyncLoop/batch=16KiB-2         	    1594	   1653789 ns/op	   9.91 MB/s
BenchmarkSyncLoop/batch=1024KiB-2       	     735	   5295924 ns/op	 200.00 MB/s
PASS
BenchmarkCompare/produce/server=paddock-2         	  100000	      7042 ns/op	 140.00 MB/s	       145.4 MB/s_acked
BenchmarkCompare/produce/server=paddock-2         	  100000	      7042 ns/op	 190.00 MB/s	       145.4 MB/s_acked
BenchmarkCompare/produce/server=paddock-2         	  100000	      7042 ns/op	 150.00 MB/s	       145.4 MB/s_acked
BenchmarkCompare/produce/server=kfake-2           	  100000	      5408 ns/op	 300.00 MB/s	       189.5 MB/s_acked
BenchmarkCompare/consume/server=paddock-2         	  100000	      1662 ns/op	 600.00 MB/s	       616.5 MB/s_consumed
BenchmarkCompare/consume/server=kfake-2           	  100000	      3195 ns/op	 400.00 MB/s	       324.0 MB/s_consumed
BenchmarkCompare/consume/server=paddock-vectored-2         	  100000	      1662 ns/op	 500.00 MB/s	       616.5 MB/s_consumed
BenchmarkCompare/produce/server=paddock-tls-2         	  100000	      7042 ns/op	 120.00 MB/s
BenchmarkCompare/consume/server=paddock-tls-2         	  100000	      1662 ns/op	 300.00 MB/s
BenchmarkConnect/listener=plaintext-2         	      20	    500000 ns/op
BenchmarkConnect/listener=tls-2               	      20	   2000000 ns/op
BenchmarkConnect/listener=tls+scram-sha-512-2 	      20	   6000000 ns/op
BenchmarkIdleConnections-2   	       1	11393986605 ns/op	      6151 B_rss/idle_conn	      4100 B_rss/idle_conn_go_floor
BenchmarkFetchStorm/copy=false-2         	       1	67045958643 ns/op	       256.0 MiB_budget	        52.19 MiB_rss_base	        18.41 MiB_rss_peak_over_base
BenchmarkFetchStorm/copy=true-2          	       1	91178291196 ns/op	       256.0 MiB_budget	        54.20 MiB_rss_base	      300 MiB_rss_peak_over_base
`

func TestReportTakesTheMedianMBpsAndDividesWithinTheRun(t *testing.T) {
	rates, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if got := rates[producePad]; got != 150 {
		t.Fatalf("produce paddock = %v, want the median of its MB/s column (140, 190, 150), not MB/s_acked", got)
	}
	var out strings.Builder
	if err := report(&out, rates); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"75 %", "0.50 ×", "1.50 ×", "1.25 ×", "1.20 ×", "6151 B", "4100 B", "1.50 ×", "18 MiB over a 52 MiB base", "0.07 ×", "300 MiB over a 54 MiB base", "1.17 ×",
		"0.80 ×", "0.50 ×", "0.50 ms", "2.00 ms  (4.0 × plaintext)", "6.00 ms  (12.0 × plaintext; SCRAM alone 4.00 ms)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestReportFailsWhenABenchmarkIsMissing(t *testing.T) {
	rates, err := parse(strings.NewReader(strings.SplitN(sample, "BenchmarkCompare/consume/server=kfake", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	if err := report(&strings.Builder{}, rates); err == nil || !strings.Contains(err.Error(), consumeFake) {
		t.Fatalf("report without %s = %v, want an error naming it", consumeFake, err)
	}
}
