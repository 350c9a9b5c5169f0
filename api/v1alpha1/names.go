package v1alpha1

import (
	"fmt"
	"strconv"
)

// Label keys and values every paddock-managed object carries (DESIGN.md "Names").
const (
	// LabelName is app.kubernetes.io/name; its value is always LabelNameValue.
	LabelName = "app.kubernetes.io/name"
	// LabelNameValue is the value of LabelName on every object paddock creates.
	LabelNameValue = "paddock"
	// LabelInstance is app.kubernetes.io/instance: the KafkaCluster's name.
	LabelInstance = "app.kubernetes.io/instance"
	// LabelCluster names the KafkaCluster an object belongs to.
	LabelCluster = "kafka.paddock.dev/cluster"
	// LabelBrokerID is the numeric broker id of a per-broker object (Lease, Service, Broker).
	LabelBrokerID = "kafka.paddock.dev/broker-id"
)

// Annotations a broker writes on its heartbeat Lease (DESIGN.md "Heartbeat Lease").
const (
	// AnnotationDraining is "true" once the broker has received SIGTERM and is handing its
	// work over.
	AnnotationDraining = "kafka.paddock.dev/draining"
	// AnnotationHealthy is "false" when the broker's request loop is wedged or its storage
	// is failing; "true" otherwise.
	AnnotationHealthy = "kafka.paddock.dev/healthy"
)

// ClusterLabels are the labels of every object paddock makes for cluster: its name, instance
// and cluster labels. The StatefulSet selector is a smaller, fixed subset (it can never change).
func ClusterLabels(cluster string) map[string]string {
	return map[string]string{
		LabelName:     LabelNameValue,
		LabelInstance: cluster,
		LabelCluster:  cluster,
	}
}

// BrokerLabels are the labels of a per-broker object of cluster (its Service, heartbeat Lease
// and Broker object): ClusterLabels plus the broker id.
func BrokerLabels(cluster string, id int32) map[string]string {
	l := ClusterLabels(cluster)
	l[LabelBrokerID] = strconv.Itoa(int(id))
	return l
}

// FieldOwner is the server-side-apply field manager of every write the operator makes.
const FieldOwner = "paddock-manager"

// StatefulSetName is the name of cluster's broker StatefulSet; also the PDB, ServiceAccount,
// Role and RoleBinding name.
func StatefulSetName(cluster string) string { return cluster + "-broker" }

// HeadlessServiceName is the governing headless Service whose EndpointSlices are the
// registration source.
func HeadlessServiceName(cluster string) string { return cluster + "-brokers" }

// BootstrapServiceName is the Service clients use for their first connection.
func BootstrapServiceName(cluster string) string { return cluster + "-bootstrap" }

// BrokerPodName is the StatefulSet pod that runs broker id.
func BrokerPodName(cluster string, id int32) string { return fmt.Sprintf("%s-broker-%d", cluster, id) }

// BrokerServiceName is the per-broker Service that follows broker id's pod.
func BrokerServiceName(cluster string, id int32) string { return BrokerPodName(cluster, id) }

// LeaseName is broker id's heartbeat Lease.
func LeaseName(cluster string, id int32) string { return BrokerPodName(cluster, id) }

// BrokerObjectName is the Broker object that reports broker id's registry row.
func BrokerObjectName(cluster string, id int32) string { return fmt.Sprintf("%s-%d", cluster, id) }

// DataClaimName is the shared ReadWriteMany claim all of cluster's brokers mount.
func DataClaimName(cluster string) string { return cluster + "-data" }
