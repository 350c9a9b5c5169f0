package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/testenv"
)

// The envtest control plane (a real kube-apiserver and etcd) is started by the first test that
// needs it and stopped by TestMain, so the wire tests never pay for it.
var (
	envOnce sync.Once
	envErr  error
	testEnv *testenv.Env
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := testEnv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// apiServer returns a client of the shared envtest apiserver with the CRDs installed.
func apiServer(t *testing.T) client.Client {
	t.Helper()
	envOnce.Do(func() { testEnv, envErr = testenv.Start() })
	if envErr != nil {
		t.Fatal(envErr)
	}
	return testEnv.Client
}

// newNamespaceWithCluster creates a fresh namespace holding KafkaCluster "c" whose status
// lists rows, and returns the namespace.
func newNamespaceWithCluster(t *testing.T, c client.Client, rows []v1alpha1.BrokerRow) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "broker-test-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	kc := &v1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns.Name}}
	if err := c.Create(ctx, kc); err != nil {
		t.Fatal(err)
	}
	if rows != nil {
		setRows(t, c, ns.Name, rows)
	}
	return ns.Name
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

// freeLoopbackPort finds a free TCP port on 127.0.0.1 below 32768 (the ephemeral range above
// it is where clients' outgoing ports come from).
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	for range 100 {
		p := 20000 + rand.IntN(12000)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			_ = ln.Close()
			return p
		}
	}
	t.Fatal("no free loopback port below 32768")
	return 0
}

// listenLoopback listens on a free loopback port below 32768.
func listenLoopback(t testing.TB) net.Listener {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000)))
		if err == nil {
			return ln
		}
	}
	t.Fatal("no free loopback port below 32768")
	return nil
}
