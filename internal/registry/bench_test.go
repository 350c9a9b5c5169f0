package registry

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkCompute1000Brokers is one recompute of a 1000-broker cluster: 1000 Leases and the
// headless Service sharded over 10 slices of 100 endpoints (the EndpointSlice controller's
// default maximum per slice).
func BenchmarkCompute1000Brokers(b *testing.B) {
	const brokers, perSlice = 1000, 100
	in := Input{Cluster: "c", Replicas: brokers, PortName: "kafka", Now: t0}
	for s := 0; s < brokers/perSlice; s++ {
		eps := make([]ep, 0, perSlice)
		for i := 0; i < perSlice; i++ {
			id := int32(s*perSlice + i)
			e := serving(id)
			e.addr = fmt.Sprintf("10.0.%d.%d", id/250, id%250)
			eps = append(eps, e)
		}
		in.Slices = append(in.Slices, slice(fmt.Sprintf("c-brokers-%d", s), eps...))
	}
	ls := make([]lease, brokers)
	for i := range ls {
		ls[i] = lease{id: int32(i), age: time.Duration(i%5) * time.Second}
	}
	in.Leases = leases(ls...)

	b.ReportAllocs()
	for b.Loop() {
		res := compute(in)
		if res.Counts.Alive != brokers {
			b.Fatalf("alive = %d, want %d", res.Counts.Alive, brokers)
		}
	}
}
