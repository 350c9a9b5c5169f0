package v1alpha1

// The condition of listener security (docs/security.md, "Unsecured clusters").
const (
	// ConditionSecured is True on a KafkaCluster when every listener authenticates its
	// clients over TLS or with SCRAM; False names the open listeners.
	ConditionSecured = "Secured"
	// ReasonAllListenersSecured: every listener authenticates its clients (TLS, or SCRAM).
	ReasonAllListenersSecured = "AllListenersSecured"
	// ReasonOpenListener: a listener lets anyone in unauthenticated, or authenticates with
	// a password over plaintext.
	ReasonOpenListener = "OpenListener"
)
