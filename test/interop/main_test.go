package interop

import (
	"os"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/broker/groups"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

func TestMain(m *testing.M) {
	os.Exit(kubebrokers.Main(m, "interop"))
}

// newCluster is the test's own two-broker cluster (test/kubebrokers); its consumer groups
// start without group.initial.rebalance.delay.ms's 3 s wait. It returns the Kafka addresses.
func newCluster(t *testing.T) []string {
	t.Helper()
	c := kubebrokers.NewCluster(t, 2, kubebrokers.Options{Namespace: "interop",
		GroupConfig: func(cfg *groups.Config) { cfg.InitialRebalanceDelay = 100 * time.Millisecond }})
	return c.Addrs
}
