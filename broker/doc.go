// Package broker is paddock's embedded Kafka-wire-compatible broker (`paddock broker`): the
// wire server (one file per API key), the cluster view it answers from, its heartbeat Lease,
// the SIGTERM drain and the health endpoints.
//
// Layout: server.go (connections: one reader and one writer goroutine each, answers in request
// order) and frame.go (size-capped frames, request headers v1/v2) carry the protocol;
// api_NN_name.go each serve one API key and register its version range, which is what
// ApiVersions advertises; view.go and view_informer.go hold the cluster state; heartbeat.go,
// liveness.go, drain.go, health.go and run.go make up the process around them.
//
// It reads cluster state from an informer cache and writes only its own heartbeat Lease. It
// must never call the API server on the request path, and never import controllers/: the
// operator and the broker meet only through the API.
package broker
