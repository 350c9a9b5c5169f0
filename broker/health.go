package broker

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// healthReport is the /healthz and /readyz body.
type healthReport struct {
	Healthy        bool `json:"healthy"`
	StorageHealthy bool `json:"storageHealthy"`
	Ready          bool `json:"ready"`
	ListenersBound bool `json:"listenersBound"`
	// NoAddress names each listener the broker cannot advertise yet, and why; the broker is
	// not ready while there is one (addresses.go).
	NoAddress []string `json:"noAddress,omitempty"`
	// NoCertificate names each TLS listener the broker has no certificate for yet.
	NoCertificate []string `json:"noCertificate,omitempty"`
	// MountRefused says why the data volume's mount cannot keep the storage rules; the broker
	// serves no partition or group, is unhealthy and never ready while there is one.
	MountRefused        []string `json:"mountRefused,omitempty"`
	ViewSynced          bool     `json:"viewSynced"`
	TakeoverDone        bool     `json:"takeoverDone"`
	Draining            bool     `json:"draining"`
	LastTickAgeSeconds  float64  `json:"lastTickAgeSeconds"`
	HeartbeatAgeSeconds float64  `json:"heartbeatAgeSeconds"` // -1 before the first beat or without a heartbeat
	BrokerID            int32    `json:"brokerID"`
}

func (b *Broker) healthReport() healthReport {
	parts := b.partitions.Load()
	r := healthReport{
		Healthy:            b.Healthy(),
		StorageHealthy:     parts.StorageHealthy(),
		ListenersBound:     b.listenersBound.Load(),
		ViewSynced:         b.View.Snapshot().Synced,
		Draining:           b.draining.Load(),
		LastTickAgeSeconds: b.liveness.Age().Seconds(),
		BrokerID:           b.Config.Identity.ID,
		NoAddress:          b.Addresses.Missing(),
		NoCertificate:      b.missingCertificates(),
		MountRefused:       b.MountRefused(),
		// Every partition the view assigns here has been taken over (served, or answered
		// KAFKA_STORAGE_ERROR after a storage failure); vacuously true without any, or
		// without a data directory.
		TakeoverDone: parts.TakeoverDone(),
	}
	r.HeartbeatAgeSeconds = b.Heartbeat.Age().Seconds()
	r.Ready = r.ListenersBound && r.Healthy && r.ViewSynced && r.TakeoverDone && len(r.NoAddress) == 0 && len(r.NoCertificate) == 0
	return r
}

// healthHandler serves /healthz (liveness: 503 once the request path is wedged), /readyz
// (listeners bound ∧ healthy — request path and storage — ∧ first view read ∧ every assigned
// partition taken over ∧ an address on every listener ∧ a certificate for every TLS
// listener) and /metrics. It runs on its
// own port and goroutines and reads only atomics and the view pointer, so a wedged request
// path makes the probes fail instead of hang.
func (b *Broker) healthHandler() http.Handler {
	mux := http.NewServeMux()
	write := func(w http.ResponseWriter, ok bool, r healthReport) {
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		if err := json.NewEncoder(w).Encode(r); err != nil {
			b.Log.V(1).Info("Health answer not delivered", "reason", err.Error())
		}
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		// Liveness only: a storage failure makes the broker unhealthy in its heartbeat (its
		// partitions move away) and unready, but restarting it would not mend the volume.
		r := b.healthReport()
		write(w, b.liveness.Healthy(), r)
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		r := b.healthReport()
		write(w, r.Ready, r)
	})
	mux.Handle("/metrics", promhttp.HandlerFor(b.metrics.Registry, promhttp.HandlerOpts{}))
	return mux
}
