// Package broker is paddock's embedded Kafka-wire-compatible broker (`paddock broker`): the
// wire server (one file per API key), the cluster view it answers from, its heartbeat Lease,
// the SIGTERM drain and the health endpoints.
//
// It reads cluster state from an informer cache and writes only its own heartbeat Lease. It
// must never import controllers/: the operator and the broker meet only through the API.
package broker
