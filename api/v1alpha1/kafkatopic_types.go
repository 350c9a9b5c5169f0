package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// MaxPartitions is the most partitions a KafkaTopic can have (spec.partitions' maximum).
const MaxPartitions = 10000

// KafkaTopicSpec is a topic a user asks for.
type KafkaTopicSpec struct {
	// cluster is the name of the KafkaCluster, in the same namespace, that serves the topic.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cluster is immutable"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Kafka Cluster",xDescriptors={"urn:alm:descriptor:io.kubernetes:kafka.paddock.dev:v1alpha1:KafkaCluster"}
	Cluster string `json:"cluster"`

	// topicName is the Kafka topic name; empty uses the object's name. Set it for names a
	// Kubernetes object cannot have (upper case, underscores).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=249
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9._-]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="topicName may not be '.' or '..'"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Topic Name",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	TopicName string `json:"topicName,omitempty"`

	// partitions is the number of partitions. It can grow and never shrinks (as in Kafka).
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="partitions cannot be decreased"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Partitions",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number"}
	Partitions int32 `json:"partitions,omitempty"`

	// config holds Kafka topic settings (for example "retention.ms").
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Topic Configuration",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Config map[string]string `json:"config,omitempty"`
}

// PartitionStatus is where one partition is served.
type PartitionStatus struct {
	// partition is the partition index, below spec.partitions.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9999
	Partition int32 `json:"partition"`
	// leader is the broker id that leads the partition; -1 when none does.
	Leader int32 `json:"leader"`
	// leaderEpoch grows with every leader change and never goes down.
	// +optional
	LeaderEpoch int32 `json:"leaderEpoch,omitempty"`
}

// KafkaTopicStatus is what the operator observed and assigned.
type KafkaTopicStatus struct {
	// observedGeneration is the spec generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// topicID is the Kafka topic id (base64url of 16 random bytes), minted once.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Topic ID",xDescriptors={"urn:alm:descriptor:text"}
	TopicID string `json:"topicID,omitempty"`

	// partitions lists each partition's leader, sorted by partition.
	// +optional
	// +listType=map
	// +listMapKey=partition
	// +kubebuilder:validation:MaxItems=10000
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Partition Leaders"
	Partitions []PartitionStatus `json:"partitions,omitempty"`

	// conditions are Ready and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// KafkaTopic is a Kafka topic of a KafkaCluster.
// +kubebuilder:validation:XValidation:rule="!has(self.status) || !has(self.status.partitions) || self.status.partitions.all(p, p.partition < self.spec.partitions)",message="status.partitions may only name partitions below spec.partitions"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pkt,categories={paddock,kafka}
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Partitions",type=integer,JSONPath=`.spec.partitions`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Topic",type=string,JSONPath=`.spec.topicName`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Kafka Topic",resources={{KafkaCluster,v1alpha1,<spec.cluster>}}
type KafkaTopic struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired topic.
	// +required
	Spec KafkaTopicSpec `json:"spec"`

	// status is what the operator observed.
	// +optional
	Status KafkaTopicStatus `json:"status,omitempty"`
}

// KafkaTopicList is a list of KafkaTopics.
// +kubebuilder:object:root=true
type KafkaTopicList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KafkaTopic `json:"items"`
}

func init() {
	SchemeBuilder.Register(&KafkaTopic{}, &KafkaTopicList{})
}
