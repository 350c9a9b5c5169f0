// Package broker is paddock's Kafka-wire-compatible broker (`paddock broker`): the Kafka
// semantics, one file per API key, over the cluster view, the partition logs and the group
// coordinator, and the process around them — start, SIGTERM drain, health endpoints, metrics.
// The connections are broker/wire's, what it knows of the cluster is broker/cluster's, the
// data is broker/storage's and the groups broker/groups' (docs/architecture.md, "The broker's
// rooms").
//
// Layout: handler.go is the Handler broker/wire calls: it decodes a request (codec.go), runs
// its key's handler from the table in apis.go against one view snapshot, and encodes the
// answer; api_NN_name.go each serve one API key and register its version range, which is
// exactly what ApiVersions advertises and `paddock broker --help` lists (admin.go,
// autocreate.go and topic_config.go hold what the admin keys share; dataplane.go what the
// data-plane keys share; brokers.go the broker list of an answer). partitions.go owns the
// partition logs the view gives this broker (takeover, relinquish), group_coordinator.go runs
// broker/groups' coordinator over the view, topic_removal.go removes deleted topics' data.
// run.go and run_dataplane.go start and stop it all, drain.go is the SIGTERM drain,
// liveness.go, health.go and metrics*.go what the probes and Prometheus read, config.go and
// main.go the command line. brokertest runs brokers in-process for tests.
//
// # State and its owners
//
// Every piece of mutable state has exactly one owner, and handlers reach it only through the
// Handler, never by sharing it any other way (docs/architecture.md, "Broker state"):
//
//   - the cluster view: one writer (the informer view's rebuild goroutine, or a MemoryView's
//     owner) replaces an immutable cluster.Snapshot whole; a handler reads one snapshot per
//     request (requestContext.view);
//   - the liveness tick, the draining flag and the metrics: atomics owned by the Broker;
//   - the advertised addresses: an immutable set published by cluster.Addresses (writers
//     hold its lock), read by every request, beat and probe through an atomic pointer;
//   - partition logs (segments, fence, high watermark, producer state) are owned by
//     broker/storage, each partition by its own lock and flusher goroutine; which logs this
//     broker holds is owned by Partitions' one Run goroutine (the request path reads its
//     table under a documented lock and never keeps a log past its request);
//   - consumer groups (membership, generations, committed offsets) are owned by
//     broker/groups, each group by its own goroutine; Groups owns which coordinator runs.
//
// The subsystems plug in as fields of the Handler, set by Broker.start before the first
// Serve (Handler.Partitions, Handler.ProducerIDs, Handler.Groups); a handler reaches them as
// rc.h.<Field> for the one request it is answering, and the drain and /readyz read them
// through the Broker. Nothing else holds a reference to a partition or a group.
//
// It must never call the API server on the request path except for an admin write
// (cluster.Admin), never wait on it or on the view without a bound, never speak the wire
// itself (framing and connections are broker/wire's), never import client-go or
// controller-runtime (broker/cluster does) and never import controllers/: the operator and
// the broker meet only through the API.
package broker
