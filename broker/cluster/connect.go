package cluster

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/paddock-dev/paddock/internal/scheme"
)

// Conn is a broker's access to the Kubernetes API server: one rest config, scheme and client
// for its informers (the view, the addresses) and its writes (the Lease, the KafkaTopics).
type Conn struct {
	rest   *rest.Config
	scheme *runtime.Scheme
	// Client reads and writes through the API server (never from a cache).
	Client client.Client
}

// Connect connects with the in-cluster config, or $KUBECONFIG when set. The informers and
// clients log through controller-runtime's logger, which Connect sets to log: without one it
// prints a stack trace the first time something logs (a watch that ends).
func Connect(log logr.Logger) (*Conn, error) {
	crlog.SetLogger(log)
	restCfg, err := config.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	c, err := client.New(restCfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &Conn{rest: restCfg, scheme: s, Client: c}, nil
}

// InformerView prepares the informer view of KafkaCluster cluster in namespace (Start runs
// it).
func (c *Conn) InformerView(namespace, cluster string, log logr.Logger) (*InformerView, error) {
	return NewInformerView(c.rest, c.scheme, namespace, cluster, log)
}

// WatchAddresses keeps addrs' external listeners' addresses current (the package function).
func (c *Conn) WatchAddresses(ctx context.Context, addrs *Addresses, log logr.Logger) error {
	return WatchAddresses(ctx, c.rest, c.scheme, addrs, log)
}
