package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Defaults the CRD schema applies. The accessors below return them for fields left unset, so
// code that builds objects in Go (tests, the dev environment) sees the same values the
// apiserver would fill in. Keep them equal to the +kubebuilder:default markers.
const (
	DefaultReplicas               int32 = 3
	DefaultHeartbeatInterval            = time.Second
	DefaultSessionTimeout               = 6 * time.Second
	DefaultDrainTimeout                 = 60 * time.Second
	DefaultNodeLossTimeout              = 5 * time.Second
	DefaultRackTopologyKey              = "topology.kubernetes.io/zone"
	DefaultStorageSize                  = "10Gi"
	DefaultCertificateValidity          = 8760 * time.Hour
	DefaultCertificateRenewBefore       = 720 * time.Hour
	DefaultMaxTopics              int32 = 2000
	DefaultMaxPartitions          int32 = 50000
)

// MaxTopicsOrDefault is spec.limits.maxTopics, or its default.
func (s *KafkaClusterSpec) MaxTopicsOrDefault() int32 {
	if s.Limits.MaxTopics <= 0 {
		return DefaultMaxTopics
	}
	return s.Limits.MaxTopics
}

// MaxPartitionsOrDefault is spec.limits.maxPartitions, or its default.
func (s *KafkaClusterSpec) MaxPartitionsOrDefault() int32 {
	if s.Limits.MaxPartitions <= 0 {
		return DefaultMaxPartitions
	}
	return s.Limits.MaxPartitions
}

// CertificateValidity is spec.certificates.validity, or its default.
func (s *KafkaClusterSpec) CertificateValidity() time.Duration {
	if s.Certificates.Validity == nil {
		return DefaultCertificateValidity
	}
	return s.Certificates.Validity.Duration
}

// CertificateRenewBefore is spec.certificates.renewBefore, or its default.
func (s *KafkaClusterSpec) CertificateRenewBefore() time.Duration {
	if s.Certificates.RenewBefore == nil {
		return DefaultCertificateRenewBefore
	}
	return s.Certificates.RenewBefore.Duration
}

// NeedsTLS reports whether a listener serves TLS, or a KafkaUser may need client
// certificates: the operator then keeps the CAs.
func (s *KafkaClusterSpec) NeedsTLS() bool {
	for _, l := range s.Listeners {
		if l.TLS {
			return true
		}
	}
	return false
}

// HeartbeatInterval is spec.heartbeat.interval, or its default.
func (s *KafkaClusterSpec) HeartbeatInterval() time.Duration {
	if s.Heartbeat.Interval == nil {
		return DefaultHeartbeatInterval
	}
	return s.Heartbeat.Interval.Duration
}

// SessionTimeout is spec.heartbeat.sessionTimeout, or its default.
func (s *KafkaClusterSpec) SessionTimeout() time.Duration {
	if s.Heartbeat.SessionTimeout == nil {
		return DefaultSessionTimeout
	}
	return s.Heartbeat.SessionTimeout.Duration
}

// DrainTimeoutOrDefault is spec.drainTimeout, or its default.
func (s *KafkaClusterSpec) DrainTimeoutOrDefault() time.Duration {
	if s.DrainTimeout == nil {
		return DefaultDrainTimeout
	}
	return s.DrainTimeout.Duration
}

// NodeLossTimeoutOrDefault is spec.nodeLossTimeout, or its default.
func (s *KafkaClusterSpec) NodeLossTimeoutOrDefault() time.Duration {
	if s.NodeLossTimeout == nil {
		return DefaultNodeLossTimeout
	}
	return s.NodeLossTimeout.Duration
}

// StorageSize is spec.storage.size, or its default.
func (s *KafkaClusterSpec) StorageSize() resource.Quantity {
	if s.Storage.Size == nil {
		return resource.MustParse(DefaultStorageSize)
	}
	return *s.Storage.Size
}

// RackTopologyKey is spec.rack.topologyKey, or its default.
func (s *KafkaClusterSpec) RackTopologyKey() string {
	if s.Rack.TopologyKey == "" {
		return DefaultRackTopologyKey
	}
	return s.Rack.TopologyKey
}

// NetworkPolicyEnabled is spec.networkPolicy.enabled, or its default (true).
func (s *KafkaClusterSpec) NetworkPolicyEnabled() bool {
	return s.NetworkPolicy.Enabled == nil || *s.NetworkPolicy.Enabled
}

// ClusterHasSecurity reports whether any listener of cluster has TLS or authentication, or
// authorization is on: its brokers then read certificates, credentials and KafkaUsers.
func ClusterHasSecurity(cluster *KafkaCluster) bool {
	for _, l := range cluster.Spec.Listeners {
		if l.TLS || l.Authentication != nil {
			return true
		}
	}
	return cluster.Spec.Authorization != nil
}

// StorageVerificationOrDefault is spec.storage.verification, Enforce when unset.
func (s *KafkaClusterSpec) StorageVerificationOrDefault() StorageVerification {
	if s.Storage.Verification == "" {
		return StorageVerificationEnforce
	}
	return s.Storage.Verification
}
