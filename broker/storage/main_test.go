package storage

import (
	"fmt"
	"os"
	"testing"
)

// childEnv selects a child-process role when the test binary re-executes itself (crash and
// multi-process claim tests). The child does its work and exits; it never runs the tests.
const childEnv = "PADDOCK_STORAGE_TEST_CHILD"

var childRoles = map[string]func() error{}

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		run, ok := childRoles[role]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown child role %q\n", role)
			os.Exit(2)
		}
		if err := run(); err != nil {
			fmt.Fprintf(os.Stderr, "child %s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
