package controllers

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/paddock-dev/paddock/controllers/assignment"
	"github.com/paddock-dev/paddock/controllers/certificates"
	"github.com/paddock-dev/paddock/controllers/kafkacluster"
	"github.com/paddock-dev/paddock/controllers/kafkauser"
	"github.com/paddock-dev/paddock/controllers/recovery"
	"github.com/paddock-dev/paddock/controllers/registry"
)

// Options configure the reconcilers the manager runs.
type Options struct {
	// DefaultBrokerImage runs the brokers of a KafkaCluster whose spec.image is empty. The
	// manager Deployment passes its own image, since one image serves every role.
	DefaultBrokerImage string
}

// SetupWithManager registers every paddock reconciler with mgr. `paddock manager` and
// `paddock dev` both call it, so they run the same controllers.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	provisioning := &kafkacluster.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("kafkacluster"),
		Options:   kafkacluster.Options{DefaultBrokerImage: opts.DefaultBrokerImage},
	}
	if err := provisioning.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up kafkacluster controller: %w", err)
	}
	certs := &certificates.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("certificates")}
	if err := certs.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up certificates controller: %w", err)
	}
	users := &kafkauser.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("kafkauser")}
	if err := users.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up kafkauser controller: %w", err)
	}
	brokers := &registry.Reconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("registry")}
	if err := brokers.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up registry controller: %w", err)
	}
	leaders := &assignment.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("assignment")}
	if err := leaders.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up assignment controller: %w", err)
	}
	lost := &recovery.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("recovery")}
	if err := lost.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up recovery controller: %w", err)
	}
	RegisterMetrics(mgr.GetCache())
	return nil
}
