package broker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/paddock-dev/paddock/broker/storage"
)

// The plan file switches the faults while the broker runs: a plan is applied, a plan that does
// not parse keeps the last one, and a removed file is the empty plan.
func TestTheDevFaultPlanFollowsItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "faults")
	faults := storage.NewFaults()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); followFaultPlan(ctx, path, faults, testr.New(t)) }()
	t.Cleanup(func() { cancel(); <-done })
	wait := func(what string, ok func([]storage.FaultRule) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok(faults.Rules()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: rules %v", what, faults.Rules())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := os.WriteFile(path, []byte("eio@topics/orders-AQID/0/"), 0o644); err != nil {
		t.Fatal(err)
	}
	wait("a plan is applied", func(r []storage.FaultRule) bool { return len(r) == 1 && r[0].String() == "eio@topics/orders-AQID/0/" })
	if err := os.WriteFile(path, []byte("explode@x"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * faultsPollInterval)
	wait("a plan that does not parse keeps the last", func(r []storage.FaultRule) bool { return len(r) == 1 })
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	wait("a removed file clears the plan", func(r []storage.FaultRule) bool { return len(r) == 0 })
}
