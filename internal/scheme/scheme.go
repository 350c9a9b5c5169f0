// Package scheme builds the runtime.Scheme every paddock process uses: the Kubernetes types
// (client-go's scheme) and paddock's API. There is one constructor so that the manager, the
// broker, `paddock dev` and the test suites cannot disagree on which types they know.
//
// It holds no state and must never import a controller or the broker.
package scheme

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// New returns a fresh scheme with the Kubernetes built-in types and paddock's kafka.paddock.dev
// types registered.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("register Kubernetes types: %w", err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("register paddock types: %w", err)
	}
	return s, nil
}
