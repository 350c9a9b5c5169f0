package broker

import (
	"context"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/testenv"
)

// The envtest control plane (a real kube-apiserver and etcd) is started by the first test that
// needs it and stopped by TestMain, so the wire tests never pay for it.
var testEnv testenv.Lazy

func TestMain(m *testing.M) { os.Exit(testEnv.Run(m)) }

// apiServer returns a client of the shared envtest apiserver with the CRDs installed.
func apiServer(t *testing.T) client.Client {
	t.Helper()
	return testEnv.Get(t).Client
}

// newNamespaceWithCluster creates a fresh namespace holding KafkaCluster "c" whose status
// lists rows, and returns the namespace.
func newNamespaceWithCluster(t *testing.T, c client.Client, rows []v1alpha1.BrokerRow) string {
	t.Helper()
	ns := testEnv.Get(t).NamespaceWithCluster(t, "c")
	if rows != nil {
		setRows(t, c, ns, rows)
	}
	return ns
}

// setRows writes status.brokers of KafkaCluster c, standing in for the registry reconciler.
func setRows(t *testing.T, c client.Client, ns string, rows []v1alpha1.BrokerRow) {
	t.Helper()
	kc := &v1alpha1.KafkaCluster{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "c"}, kc); err != nil {
		t.Fatal(err)
	}
	orig := kc.DeepCopy()
	kc.Status.ClusterID = testClusterID
	kc.Status.Brokers = rows
	if err := c.Status().Patch(context.Background(), kc, client.MergeFrom(orig)); err != nil {
		t.Fatalf("patch status: %v", err)
	}
}
