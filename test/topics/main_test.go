package topics

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/paddock-dev/paddock/controllers/assignment"
	"github.com/paddock-dev/paddock/controllers/kafkacluster"
	"github.com/paddock-dev/paddock/internal/testenv"
)

// env is the control plane every test shares, with the manager running the assignment and
// provisioning reconcilers for every namespace.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "topics:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "topics:", err)
		}
	}()
	mgr, err := env.NewManager()
	if err != nil {
		fmt.Fprintln(os.Stderr, "topics:", err)
		return 1
	}
	if err := (&assignment.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("assignment")}).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, "topics:", err)
		return 1
	}
	provisioning := &kafkacluster.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("kafkacluster"),
		Options: kafkacluster.Options{DefaultBrokerImage: "paddock:test"},
	}
	if err := provisioning.SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, "topics:", err)
		return 1
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	stop()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "topics: manager:", err)
	}
	return code
}
