// Package testkit is what the broker's tests share to wait and to listen: one deadline for
// "eventually", one test context, loopback listeners below 32768. Test support only: tests
// and test-support packages (broker/brokertest) import it, nothing that runs in a cluster.
// It imports nothing of paddock, so any package's tests (broker/wire's included) may use it.
package testkit

import (
	"context"
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
	"time"
)

// Deadline bounds every wait of a test: generous, because the machines tests run on are
// shared and loaded; a wait that holds returns as soon as it holds.
const Deadline = 60 * time.Second

// Context is a context that ends after Deadline or with the test.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Deadline)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond every 10 ms until it holds, failing the test after Deadline.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Deadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", Deadline, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Listen listens on a free loopback port below 32768 (the ephemeral range above it is where
// clients' outgoing ports come from).
func Listen(t testing.TB) net.Listener {
	t.Helper()
	for range 200 {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(20000+rand.IntN(12000))))
		if err == nil {
			return ln
		}
	}
	t.Fatal("no free loopback port below 32768")
	return nil
}

// FreePort is a loopback port below 32768 that was free a moment ago: for a process that
// binds it itself.
func FreePort(t testing.TB) int {
	t.Helper()
	ln := Listen(t)
	_ = ln.Close() // only the port was wanted
	return ln.Addr().(*net.TCPAddr).Port
}
