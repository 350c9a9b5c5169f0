package testenv

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CountingClient wraps a client and counts its writes (creates, updates, patches, applies and
// deletes, of objects and of their status), per namespace: give a reconciler one and assert
// it writes nothing at steady state.
type CountingClient struct {
	client.Client
	mu     sync.Mutex
	writes map[string]int // by namespace; guarded by mu
}

// NewCountingClient wraps c.
func NewCountingClient(c client.Client) *CountingClient {
	return &CountingClient{Client: c, writes: map[string]int{}}
}

// Writes is how many writes were made in namespace ns so far.
func (c *CountingClient) Writes(ns string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes[ns]
}

func (c *CountingClient) count(ns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes[ns]++
}

func (c *CountingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.count(obj.GetNamespace())
	return c.Client.Create(ctx, obj, opts...)
}

func (c *CountingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.count(obj.GetNamespace())
	return c.Client.Update(ctx, obj, opts...)
}

func (c *CountingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.count(obj.GetNamespace())
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *CountingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.count(applyNamespace(obj))
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *CountingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.count(obj.GetNamespace())
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *CountingClient) Status() client.SubResourceWriter {
	return &countingStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type countingStatus struct {
	client.SubResourceWriter
	c *CountingClient
}

func (s *countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.c.count(obj.GetNamespace())
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s *countingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.c.count(obj.GetNamespace())
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (s *countingStatus) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	s.c.count(applyNamespace(obj))
	return s.SubResourceWriter.Apply(ctx, obj, opts...)
}

// applyNamespace is the namespace of an apply configuration, typed or unstructured.
func applyNamespace(obj runtime.ApplyConfiguration) string {
	switch o := obj.(type) {
	case interface{ GetNamespace() string }:
		return o.GetNamespace()
	case interface{ GetNamespace() *string }:
		return ptr.Deref(o.GetNamespace(), "")
	}
	return "unknown"
}
