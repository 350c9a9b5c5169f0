package registry

import (
	"context"
	"testing"

	"github.com/paddock-dev/paddock/internal/testenv"
)

// The suite runs against a real kube-apiserver and etcd (internal/testenv); there is no
// fallback: without the binaries it fails and says how to build them.
// env.Client is uncached: every read sees the apiserver's current state.
var env *testenv.Env

func TestSuite(t *testing.T) { testenv.RunSuite(t, "registry controller suite", &env) }

// newNamespace creates a namespace for one spec and deletes it afterwards.
func newNamespace(ctx context.Context) string { return env.SpecNamespace(ctx) }
