package cluster

import (
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/internal/testenv"
)

// The envtest control plane (a real kube-apiserver and etcd) is started by the first test that
// needs it and stopped by TestMain, so the tests without one never pay for it.
var testEnv testenv.Lazy

func TestMain(m *testing.M) { os.Exit(testEnv.Run(m)) }

// apiServer returns a client of the shared envtest apiserver with the CRDs installed.
func apiServer(t *testing.T) client.Client {
	t.Helper()
	return testEnv.Get(t).Client
}

// newNamespace creates a fresh namespace holding KafkaCluster "c" and returns it.
func newNamespace(t *testing.T) string {
	t.Helper()
	return testEnv.Get(t).NamespaceWithCluster(t, "c")
}

// testClusterID is the cluster id the tests' KafkaClusters carry.
const testClusterID = "cZ4mKx7zQd2cWq0b3nT9fA"
