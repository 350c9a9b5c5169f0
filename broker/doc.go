// Package broker is paddock's embedded Kafka-wire-compatible broker (`paddock broker`): the
// wire server (one file per API key), the cluster view it answers from, its heartbeat Lease,
// the SIGTERM drain and the health endpoints.
//
// Layout: server.go (connections: one reader and one writer goroutine each, answers in request
// order) and frame.go (size-capped frames, request headers v1/v2) carry the protocol;
// apis.go holds the handler table and the request context; api_NN_name.go each serve one API
// key and register its version range, which is what ApiVersions advertises (admin.go,
// autocreate.go and topic_config.go hold what the admin keys share); view.go and
// view_informer.go hold the cluster state; addresses.go where this broker is reachable on each
// listener (its own Service's nodePort or ingress and its Node, from informers); run.go (start
// and shutdown), drain.go (SIGTERM), heartbeat.go, liveness.go, health.go and metrics.go make
// up the process around them. The data plane (docs/dataplane.md): partitions.go owns the
// partition logs the view gives this broker (takeover, relinquish), dataplane.go is what the
// Produce/Fetch/ListOffsets/OffsetForLeaderEpoch handlers share, pipeline.go lets an answer
// that only waits (an acks=-1 Produce) be computed while the connection reads on,
// run_dataplane.go wires them into the broker, metrics_dataplane.go has their series.
// brokertest runs brokers in-process for tests.
//
// # State and its owners
//
// Every piece of mutable state has exactly one owner, and handlers reach it only through the
// broker, never by sharing it any other way (DESIGN.md "Layout"):
//
//   - the cluster view: one writer (the informer view's rebuild goroutine, or a MemoryView's
//     owner) replaces an immutable *Snapshot whole; a handler reads one snapshot per request
//     (requestContext.view);
//   - the liveness tick, the draining flag and the metrics: atomics owned by the Broker;
//   - the advertised addresses: an immutable set published by Addresses (writers hold its
//     lock), read by every request, beat and probe through an atomic pointer;
//   - partition logs (segments, fence, high watermark, producer state) are owned by
//     broker/storage, each partition by its own lock and flusher goroutine; which logs this
//     broker holds is owned by Partitions' one Run goroutine (the request path reads its
//     table under a documented lock and never keeps a log past its request);
//   - consumer groups (membership, generations, committed offsets) will be owned by
//     broker/groups, each group by its own goroutine.
//
// broker/storage and broker/groups hold no wire and no Kubernetes code. They plug in as
// fields of Server, set by Broker.start before the first Serve like View (Server.Partitions,
// Server.ProducerIDs); a handler reaches them as rc.h.<Field> for the one request it is
// answering, and the drain and /readyz read them through the Broker. Nothing else holds a
// reference to a partition or a group.
//
// It reads cluster state from an informer cache. It writes its own heartbeat Lease and,
// through Admin (admin.go), KafkaTopics: the admin APIs (CreateTopics, DeleteTopics,
// CreatePartitions, AlterConfigs, IncrementalAlterConfigs, Metadata auto-creation) create,
// update and delete them, and the lowest-id alive broker removes a deleted topic's data and
// its finalizer (topic_removal.go; docs/topics.md). It must never call the API server on the
// request path except for such an admin write, never wait on it or on the view without a
// bound, and never import controllers/: the operator and the broker meet only through the
// API.
package broker
