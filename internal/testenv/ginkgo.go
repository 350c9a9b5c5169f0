package testenv

import (
	"context"
	"sync"
	"testing"

	. "github.com/onsi/ginkgo/v2" //nolint:staticcheck // the Ginkgo DSL reads best unqualified
	. "github.com/onsi/gomega"    //nolint:staticcheck // the Gomega DSL reads best unqualified
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/paddock-dev/paddock/internal/testkit"
)

// RunSuite runs the Ginkgo specs of a package's TestSuite against a control plane of their own:
// *env is set (StartSuite) before the first spec, and the control plane is stopped after the
// last. There is no fallback: without the binaries the suite fails and says how to build them.
// env.Client is uncached: every read sees the apiserver's current state. There is no node
// agent and no controller-manager: specs write Nodes, pods and their status by hand.
func RunSuite(t *testing.T, description string, env **Env) {
	RegisterFailHandler(Fail)
	BeforeSuite(func() { *env = StartSuite() })
	RunSpecs(t, description)
}

// StartSuite is a Ginkgo suite's BeforeSuite: it routes controller-runtime's log to the
// GinkgoWriter, makes every Eventually wait testkit.Deadline unless it says otherwise, starts
// the control plane, and stops it after the suite.
func StartSuite() *Env {
	GinkgoHelper()
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(testkit.Deadline)
	env, err := Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	return env
}

// SpecNamespace creates a namespace for the running spec and deletes it after the spec.
func (e *Env) SpecNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns, err := NewNamespace(ctx, e.Client, "spec")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		_ = e.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) // the suite's end removes it anyway
	})
	return ns
}

// StartManager builds a manager with NewManager (opts adjust its options), lets setup add the
// reconcilers under test, and runs it until the returned stop is called or the Ginkgo node
// that started it ends (a BeforeAll's container, an It's spec). stop waits for the manager to
// return and is safe to call twice.
func (e *Env) StartManager(setup func(ctrl.Manager) error, opts ...func(*ctrl.Options)) (stop func()) {
	GinkgoHelper()
	mgr, err := e.NewManager(opts...)
	Expect(err).NotTo(HaveOccurred())
	Expect(setup(mgr)).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			Eventually(done).Should(BeClosed(), "the manager did not stop")
		})
	}
	DeferCleanup(stop)
	return stop
}
