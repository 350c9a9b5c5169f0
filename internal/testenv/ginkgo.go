package testenv

import (
	"context"

	. "github.com/onsi/ginkgo/v2" //nolint:staticcheck // the Ginkgo DSL reads best unqualified
	. "github.com/onsi/gomega"    //nolint:staticcheck // the Gomega DSL reads best unqualified
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// StartSuite is a Ginkgo suite's BeforeSuite: it routes controller-runtime's log to the
// GinkgoWriter, starts the control plane, and stops it after the suite.
func StartSuite() *Env {
	GinkgoHelper()
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
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
