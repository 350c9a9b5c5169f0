package v1alpha1_test

import (
	"context"
	"testing"

	"github.com/paddock-dev/paddock/internal/testenv"
)

// env is the suite's control plane (testenv.RunSuite).
var env *testenv.Env

func TestSuite(t *testing.T) { testenv.RunSuite(t, "CRD suite", &env) }

func newNamespace(ctx context.Context) string { return env.SpecNamespace(ctx) }
