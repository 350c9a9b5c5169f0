package testenv

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// Lazy is an Env started by the first test that asks for it, so a package's tests that need
// no API server never pay for one. Stop it from TestMain once the tests ran.
type Lazy struct {
	once sync.Once
	env  *Env
	err  error
}

// Get starts the Env on the first call and returns it; it fails t when it could not start.
func (l *Lazy) Get(t testing.TB) *Env {
	t.Helper()
	l.once.Do(func() { l.env, l.err = Start() })
	if l.err != nil {
		t.Fatal(l.err)
	}
	return l.env
}

// Stop stops the Env if it was started.
func (l *Lazy) Stop() error { return l.env.Stop() }

// NamespaceWithCluster creates a fresh namespace (removed when the test ends) holding an
// empty KafkaCluster called cluster, and returns the namespace: what a broker's informers
// and heartbeat need to exist.
func (e *Env) NamespaceWithCluster(t testing.TB, cluster string) string {
	t.Helper()
	ctx := context.Background()
	ns, err := NewNamespace(ctx, e.Client, "broker-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	kc := &v1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster, Namespace: ns}}
	if err := e.Client.Create(ctx, kc); err != nil {
		t.Fatal(err)
	}
	return ns
}

// Run runs m's tests, then stops the Env if a test started it, and returns the exit code: a
// package's TestMain is os.Exit(env.Run(m)).
func (l *Lazy) Run(m *testing.M) int {
	code := m.Run()
	if err := l.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// BrokerLease reads the heartbeat Lease of broker id of cluster in namespace ns.
func BrokerLease(c client.Client, ns, cluster string, id int32) (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{}
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: v1alpha1.LeaseName(cluster, id)}, l)
	return l, err
}
