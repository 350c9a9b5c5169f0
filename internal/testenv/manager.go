package testenv

import (
	"context"
	"fmt"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// NewManager is a controller-runtime manager on the control plane for a test suite: no
// metrics or health listener, no leader election, and controller names may repeat (a suite
// may build the same controller twice). opts adjust the options before the manager is built.
func (e *Env) NewManager(opts ...func(*ctrl.Options)) (ctrl.Manager, error) {
	o := ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}
	for _, opt := range opts {
		opt(&o)
	}
	mgr, err := ctrl.NewManager(e.Config, o)
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	return mgr, nil
}

// EventReasons is the reasons of the events.k8s.io Events in namespace ns about the object
// called name.
func EventReasons(ctx context.Context, c client.Client, ns, name string) ([]string, error) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons, nil
}
