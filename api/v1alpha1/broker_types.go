package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// BrokerStatus is one registry row, as the operator last computed it.
type BrokerStatus struct {
	// cluster is the KafkaCluster this broker belongs to.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Kafka Cluster",xDescriptors={"urn:alm:descriptor:io.kubernetes:kafka.paddock.dev:v1alpha1:KafkaCluster"}
	Cluster string `json:"cluster,omitempty"`

	BrokerRow `json:",inline"`

	// ready is true when the broker's endpoint is serving (state Serving).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ready"
	Ready bool `json:"ready"`

	// conditions of the broker.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Broker is one registered broker of a KafkaCluster: Serving or Fenced, and Alive, Draining or
// Dead. The operator creates it when the broker registers and deletes it when the broker is
// deregistered (a scale-down); users read it and never write it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pbr,categories={paddock,kafka}
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.status.cluster`
// +kubebuilder:printcolumn:name="ID",type=integer,JSONPath=`.status.id`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Health",type=string,JSONPath=`.status.health`
// +kubebuilder:printcolumn:name="Rack",type=string,JSONPath=`.status.rack`
// +kubebuilder:printcolumn:name="Last-Seen",type=date,JSONPath=`.status.lastSeen`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,priority=1
// +kubebuilder:printcolumn:name="Epoch",type=integer,JSONPath=`.status.epoch`,priority=1
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.status.pod`,priority=1
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`,priority=1
// +kubebuilder:printcolumn:name="Recovery",type=string,JSONPath=`.status.conditions[?(@.type=="BrokerRecovery")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Broker",resources={{Pod,v1,<cluster>-broker-<id>},{Lease,v1,<cluster>-broker-<id>}}
type Broker struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// status is the broker's registry row.
	// +optional
	Status BrokerStatus `json:"status,omitempty"`
}

// BrokerList is a list of Brokers.
// +kubebuilder:object:root=true
type BrokerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Broker `json:"items"`
}

func init() {
	register(&Broker{}, &BrokerList{})
}
