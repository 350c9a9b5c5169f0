package v1alpha1

// Conditions and reasons the registry reconciler sets on Broker objects, beyond the shared ones
// in conditions.go.
const (
	// ConditionAlive is True when the broker's heartbeat Lease is fresh and healthy and it is
	// not draining: the broker is in the alive set and may be given work.
	ConditionAlive = "Alive"
)

const (
	// ReasonServing: the broker's endpoint is serving; it is listed in Metadata.
	ReasonServing = "Serving"
	// ReasonHeartbeating: the broker's Lease is fresh, healthy and not draining.
	ReasonHeartbeating = "Heartbeating"
	// ReasonNotListed: the broker heartbeats but no endpoint lists it (its endpoint has not
	// landed yet, or its pod is gone while its Lease is still fresh).
	ReasonNotListed = "NotListed"
)

// Event reasons the registry reconciler records: on a Broker object when its row changes, and
// on the KafkaCluster when a Broker object is deleted.
const (
	// EventRegistered: a Broker object was created for a newly registered broker.
	EventRegistered = "Registered"
	// EventServing: the broker's endpoint became serving.
	EventServing = "Serving"
	// EventFenced: the broker is registered but its endpoint stopped serving (or vanished).
	EventFenced = "Fenced"
	// EventAlive: the broker's heartbeat became fresh and healthy.
	EventAlive = "Alive"
	// EventDraining: the broker announced a shutdown.
	EventDraining = "Draining"
	// EventDead: the broker's heartbeat expired or reported unhealthy.
	EventDead = "Dead"
	// EventDeregistered: the StatefulSet no longer wants the broker and it stopped
	// heartbeating; its Broker object was deleted.
	EventDeregistered = "Deregistered"
	// EventInvalidHeartbeat (a Warning): the broker's Lease says something the operator does
	// not believe — an announcement that does not parse, a lease duration above the session
	// timeout, a flag that is neither "true" nor "false" — and what is used instead. Recorded
	// once per Lease and problem, by the registry and by the recovery reconciler (for the
	// claims digest).
	EventInvalidHeartbeat = "InvalidHeartbeat"
)
