// Command cpuhog keeps every core busy until it is stopped (SIGTERM, SIGINT): one spinning
// goroutine per core (GOMAXPROCS), each doing integer work the compiler cannot drop. `make
// test-under-load` runs it beside the test suite, so a test that bounds wall time tighter than
// its behaviour needs fails here rather than on the next loaded CI machine. It prints, when
// stopped, how many rounds each worker did: a run whose hog barely ran proves nothing.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	workers := runtime.GOMAXPROCS(0)
	rounds := make([]atomic.Int64, workers)
	sink := make([]atomic.Uint64, workers) // each worker's last value: its work is observable
	var stop atomic.Bool
	for i := range workers {
		go func() {
			x := uint64(i) + 1
			for !stop.Load() {
				for range 1 << 16 { // xorshift: cheap, and its result is kept
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
				}
				sink[i].Store(x)
				rounds[i].Add(1)
			}
		}()
	}
	start := time.Now()
	fmt.Printf("cpuhog: %d spinning workers (pid %d)\n", workers, os.Getpid())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	stop.Store(true)
	var total int64
	for i := range rounds {
		total += rounds[i].Load()
	}
	elapsed := time.Since(start)
	fmt.Printf("cpuhog: stopped after %v; %d workers did %.0f rounds/s of 65536 steps each\n",
		elapsed.Round(time.Second), workers, float64(total)/elapsed.Seconds())
}
