// Package certificates is the certificates reconciler: for every KafkaCluster with a TLS
// listener it keeps the cluster CA and the clients CA (made and renewed by the operator, or
// the user's), publishes their trust bundles in Secrets clients mount, and issues each
// broker a certificate covering every name and address it advertises, re-issued when those
// change and renewed before expiry (docs/security.md, "Certificates").
//
// It writes only Secrets and Events; it never touches the KafkaCluster or its other
// children. The rules (what a certificate must name, when a CA is renewed) are pure
// functions here and in internal/pki.
package certificates
