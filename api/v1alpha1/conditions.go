package v1alpha1

// Condition types used on KafkaCluster, Broker and KafkaTopic.
const (
	// ConditionReady is True when the object does what it was asked to: every desired broker
	// is ready (KafkaCluster), the broker is serving (Broker), every partition has a live
	// leader (KafkaTopic).
	ConditionReady = "Ready"
	// ConditionProgressing is True while the operator is moving the object towards its spec,
	// such as during a StatefulSet rollout.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when something needs a human: an invalid spec, a child that
	// cannot be applied, no alive broker to assign work to.
	ConditionDegraded = "Degraded"
)

// Condition reasons. Each is a CamelCase word or phrase a user can search for.
const (
	// ReasonInvalidSpec: the spec passed schema validation but cannot be acted on.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonStorageImmutable: the storage of an existing cluster was changed, which paddock
	// refuses rather than silently ignores.
	ReasonStorageImmutable = "StorageImmutable"
	// ReasonApplyFailed: a child object could not be created or updated.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonRollingOut: the broker StatefulSet is rolling out a new revision or scaling.
	ReasonRollingOut = "RollingOut"
	// ReasonUpToDate: the broker StatefulSet matches the spec.
	ReasonUpToDate = "UpToDate"
	// ReasonAllBrokersReady: every desired broker is ready.
	ReasonAllBrokersReady = "AllBrokersReady"
	// ReasonBrokersNotReady: some desired brokers are not ready yet.
	ReasonBrokersNotReady = "BrokersNotReady"
	// ReasonNoAliveBrokers: brokers are registered but none is alive; partition leaders and
	// group coordinators are kept as they were.
	ReasonNoAliveBrokers = "NoAliveBrokers"
	// ReasonInvalidConfig: spec.config has unknown keys or values paddock cannot honour
	// (KafkaCluster, KafkaTopic); those keys are not applied, their defaults are used instead.
	ReasonInvalidConfig = "InvalidConfig"
	// ReasonAsExpected: nothing is wrong.
	ReasonAsExpected = "AsExpected"
)

// Registry row reasons: why a broker is Fenced or not Alive. Empty on a Serving, Alive row.
const (
	// ReasonNotServing: the broker's endpoint is listed but its pod is not ready.
	ReasonNotServing = "NotServing"
	// ReasonTerminating: the broker's pod is being deleted.
	ReasonTerminating = "Terminating"
	// ReasonPodMissing: the StatefulSet still wants this broker but no endpoint lists it
	// (its pod is being recreated).
	ReasonPodMissing = "PodMissing"
	// ReasonStarting: the broker has never heartbeated and is within its start-up grace
	// period: it is being scheduled or starting, not dead.
	ReasonStarting = "Starting"
	// ReasonNoHeartbeat: the broker has no heartbeat Lease, and its start-up grace is over.
	ReasonNoHeartbeat = "NoHeartbeat"
	// ReasonHeartbeatExpired: the broker's Lease was not renewed within the session timeout
	// (on the operator's clock). The broker is fenced for it even while its endpoint serves.
	ReasonHeartbeatExpired = "HeartbeatExpired"
	// ReasonPodGone: the pod the broker's Lease holder ran in is observed deleted or replaced
	// by a pod of another uid, while the Lease is still fresh: the process that beat is gone
	// (or, on a lost node, cut off: the fence keeps it from acknowledging anything).
	ReasonPodGone = "PodGone"
	// ReasonProcessExited: the broker container is observed terminated, or running a process
	// started after the one that holds the Lease acquired it, while the Lease is still fresh:
	// the process that beat has exited.
	ReasonProcessExited = "ProcessExited"
	// ReasonUnhealthy: the broker's fresh Lease says healthy=false.
	ReasonUnhealthy = "Unhealthy"
	// ReasonDraining: the broker announced a shutdown and is handing its work over.
	ReasonDraining = "Draining"
)
