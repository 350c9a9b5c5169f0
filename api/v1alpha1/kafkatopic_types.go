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
	// Kubernetes object cannot have (upper case, underscores). Topics created through the
	// Kafka admin API always set it, and their object name is derived from it (the name
	// itself when it is a valid object name, else a sanitized prefix and a short hash).
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

	// config holds Kafka topic settings (for example "retention.ms"). Unknown keys and
	// malformed values are reported by the Degraded condition (reason InvalidConfig) and
	// not applied; docs/topics.md lists the keys.
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
	// leaderEpoch grows with every leader change and never goes down. The first leader of a
	// partition has epoch 1.
	// +optional
	LeaderEpoch int32 `json:"leaderEpoch,omitempty"`
	// leaderIncarnation is the leader's incarnation (its registry row's epoch) when it got
	// or last confirmed leaderEpoch. A leader seen alive under another incarnation has
	// restarted and keeps the partition at the next epoch, so two incarnations of one
	// broker never write at one epoch.
	// +optional
	LeaderIncarnation int64 `json:"leaderIncarnation,omitempty"`
}

// UncleanablePartitionStatus is one partition of a KafkaTopic its leader cannot clean.
type UncleanablePartitionStatus struct {
	// partition is the partition index.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9999
	Partition int32 `json:"partition"`
	// broker is the broker whose cleaner announced it.
	Broker int32 `json:"broker"`
	// cause is why the pass failed.
	Cause UncleanableCause `json:"cause"`
}

// KafkaTopicStatus is what the operator observed and assigned.
type KafkaTopicStatus struct {
	// observedGeneration is the spec generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// topicName is the Kafka name the topic is served under: spec.topicName, or the
	// object's name.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Kafka Topic Name",xDescriptors={"urn:alm:descriptor:text"}
	TopicName string `json:"topicName,omitempty"`

	// topicID is the Kafka topic id (base64url of 16 random bytes), minted once.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Topic ID",xDescriptors={"urn:alm:descriptor:text"}
	TopicID string `json:"topicID,omitempty"`

	// partitions lists each partition's leader, sorted by partition. The assignment
	// reconciler is its only writer.
	// +optional
	// +listType=map
	// +listMapKey=partition
	// +kubebuilder:validation:MaxItems=10000
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Partition Leaders"
	Partitions []PartitionStatus `json:"partitions,omitempty"`

	// uncleanable lists the partitions of a compacted topic whose leader's cleaner cannot
	// clean them, as the brokers' heartbeats announce (docs/compaction.md, "When a partition
	// cannot be cleaned"). They still serve, but their dirty section only grows until the
	// cause is fixed. The assignment reconciler is its only writer.
	// +optional
	// +listType=map
	// +listMapKey=partition
	// +kubebuilder:validation:MaxItems=10000
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Uncleanable Partitions"
	Uncleanable []UncleanablePartitionStatus `json:"uncleanable,omitempty"`

	// conditions are Ready (every partition has an alive leader) and Degraded (the topic
	// cannot be served as asked: invalid config, a conflicting name, no alive broker, no
	// such cluster).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// KafkaTopic is a Kafka topic of a KafkaCluster. Users create it with kubectl, or Kafka
// clients through the brokers' admin API (CreateTopics, Metadata auto-creation); deleting it
// deletes the topic and its data (docs/topics.md).
// +kubebuilder:validation:XValidation:rule="!has(self.status) || !has(self.status.partitions) || self.status.partitions.all(p, p.partition < self.spec.partitions)",message="status.partitions may only name partitions below spec.partitions"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pkt,categories={paddock,kafka}
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Topic",type=string,JSONPath=`.status.topicName`
// +kubebuilder:printcolumn:name="Partitions",type=integer,JSONPath=`.spec.partitions`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Topic-ID",type=string,JSONPath=`.status.topicID`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
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
	register(&KafkaTopic{}, &KafkaTopicList{})
}
