package recovery

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/paddock-dev/paddock/internal/testenv"
)

// The suite runs against a real kube-apiserver and etcd (internal/testenv); there is no
// fallback: without the binaries it fails and says how to build them. There is no node agent
// and no controller-manager: the specs write Nodes, pods and their status by hand.
var env *testenv.Env

func TestSuite(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "recovery controller suite")
}

var _ = BeforeSuite(func() { env = testenv.StartSuite() })

func newNamespace(ctx context.Context) string { return env.SpecNamespace(ctx) }
