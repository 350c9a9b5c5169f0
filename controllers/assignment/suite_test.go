package assignment

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/paddock-dev/paddock/internal/testenv"
)

// The suite runs against a real kube-apiserver and etcd (internal/testenv); there is no
// fallback: without the binaries it fails and says how to build them.
var (
	env       *testenv.Env
	cfg       *rest.Config
	k8sClient client.Client // uncached: every read sees the apiserver's current state
	scheme    *runtime.Scheme
)

func TestSuite(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "assignment controller suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
	cfg, k8sClient, scheme = env.Config, env.Client, env.Scheme
})

var _ = AfterSuite(func() {
	Expect(env.Stop()).To(Succeed())
})

// newNamespace creates a namespace for one spec and deletes it afterwards.
func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns, err := testenv.NewNamespace(ctx, k8sClient, "spec")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		_ = k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	return ns
}
