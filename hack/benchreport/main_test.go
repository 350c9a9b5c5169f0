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
	for _, want := range []string{"75 %", "0.50 ×", "1.50 ×"} {
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
