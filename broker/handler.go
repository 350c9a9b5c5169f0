package broker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"k8s.io/utils/clock"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/groups"
	"github.com/paddock-dev/paddock/broker/wire"
)

// Handler is the broker's Kafka semantics behind the connection server (wire.Handler): it
// decodes each request, runs its API key's handler against one view snapshot, and encodes
// the answer. It is also the one way a handler reaches what the broker owns — the view, the
// partition logs, the producer ids, the group coordinator, the admin writes — through the
// request's context (rc.h), for the one request it answers. Set the exported fields before
// the first request and do not change them afterwards.
type Handler struct {
	// View is the cluster state the handlers answer from. Required.
	View cluster.View
	// Self is this broker's id.
	Self int32
	// StaticConfig holds the values this broker was started with for the static broker keys
	// (Bounds.Values), which DescribeConfigs reports; nil reports spec.config's.
	StaticConfig map[string]string
	// Log receives what handlers report (an auto-creation, a refused InitProducerId).
	Log logr.Logger
	// Metrics, when not nil, counts requests and the connections closed for a bad request.
	Metrics *Metrics
	// Liveness, when not nil, is ticked by every completed request.
	Liveness *Liveness
	// Admin, when not nil, is the admin APIs' write access to the cluster's KafkaTopics
	// (CreateTopics, DeleteTopics, CreatePartitions, the AlterConfigs APIs, Metadata
	// auto-creation). Without it those requests are answered with an error.
	Admin *cluster.Admin
	// Partitions, when not nil, holds the partition logs this broker leads (partitions.go):
	// Produce, Fetch, ListOffsets and OffsetForLeaderEpoch reach their logs through it.
	// Without it every partition answers NOT_LEADER_OR_FOLLOWER.
	Partitions *Partitions
	// ProducerIDs, when not nil, allocates InitProducerId's producer ids on the shared volume.
	ProducerIDs *ProducerIDSource
	// SelfFenced, when set, reports that this broker has not renewed its heartbeat Lease for
	// a whole session timeout: it has probably been declared dead, so Produce stops
	// acknowledging appends (NOT_LEADER_OR_FOLLOWER). The storage fence stays the guarantee.
	SelfFenced func() bool
	// Cluster is the KafkaCluster's name: the brokers' own principal is derived from it.
	Cluster string
	// Security, when not nil, is what the broker knows of its cluster's certificates,
	// credentials and KafkaUsers (docs/security.md); listeners with authentication need it.
	Security cluster.Security
	// Clock judges session and certificate expiry and the authentication rate limit; nil
	// is the real clock.
	Clock clock.PassiveClock
	// Groups, when not nil, is the group coordinator (group_coordinator.go) the group APIs
	// reach; without it, or before it runs, they answer as broker/groups does before its
	// first view (COORDINATOR_NOT_AVAILABLE).
	Groups *Groups
	// Txns, when not nil, is the transaction coordinator (txn_coordinator.go) the
	// transactional APIs reach; without it, or before its first coordinator epoch, they
	// answer COORDINATOR_NOT_AVAILABLE.
	Txns *Transactions
	// AnswerBudget bounds, broker-wide, the bytes of Fetch records read into memory and held
	// until their answer is written (fetch_data.go); nil: unbounded. Records sent from their
	// segment file take none of it.
	AnswerBudget *wire.Budget
	// CopyFetchData reads every Fetch record set into memory (within AnswerBudget) and writes
	// it with the vectored write, instead of sending large ones from their segment files: the
	// comparison BenchmarkCompare makes.
	CopyFetchData bool

	initOnce sync.Once
	// base is the parent of the handlers' background work (Metadata auto-creations): Close
	// cancels it. Made by init.
	base       context.Context
	cancelBase context.CancelFunc
	// autoCreate deduplicates Metadata auto-creations in flight. Made by init.
	autoCreate *autoCreator
	// unavailable answers the group APIs while Groups runs no coordinator. Made by init.
	unavailable *groups.Coordinator
	// authLimit counts failed authentications per source (authn.go). Made by init.
	authLimit *authLimiter
	// quotas are the principals' rates against their KafkaUsers' quotas (quota.go).
	quotas quotas
	// authz caches the Authorizer of the current view and security snapshots (authz.go).
	authz authzState
}

func (h *Handler) init() {
	h.initOnce.Do(func() {
		h.base, h.cancelBase = context.WithCancel(context.Background())
		h.autoCreate = newAutoCreator()
		h.unavailable = groups.Unavailable(viewTopics{h.View})
		h.authLimit = newAuthLimiter()
	})
}

// Close ends the background work the handlers started (Metadata auto-creations) and waits
// for it. Call it once the wire server that calls the Handler is shut down or closed; it is
// safe to call more than once.
func (h *Handler) Close() {
	h.init()
	h.cancelBase()
	h.autoCreate.wait()
}

// ServeKafka answers one request (wire.Handler): decode, dispatch, encode. A request that
// cannot be decoded — an unknown key, a version outside the advertised range, a malformed
// body — closes its connection, except an ApiVersions newer than ours, which gets the v0
// answer clients retry from.
func (h *Handler) ServeKafka(r *wire.Request) wire.Answer {
	start := time.Now()
	ls := listenerOf(r.Conn.Listener())
	sess, refused := h.gate(r, ls)
	if refused != nil {
		return *refused
	}
	if r.Raw {
		return h.serveRawToken(r, sess)
	}
	kreq, err := decodeRequest(r.Header, r.Body)
	if err != nil {
		if resp, ok := apiVersionsFallback(r.Header, err); ok {
			h.Metrics.request(r.Key, r.Version)
			return wire.Answer{Frame: appendResponse(nil, r.CorrelationID, resp)}
		}
		h.Metrics.connError(errorReason(err))
		return wire.Answer{Err: fmt.Errorf("request key %d v%d correlation %d: %w", r.Key, r.Version, r.CorrelationID, err)}
	}
	rc := h.newRequestContext(r, ls)
	rc.session = sess
	rq := h.quotaOf(sess.principal, r.Key)
	if rq != nil && r.Key == fetchKey {
		if throttled := h.throttledFetch(rq, kreq); throttled != nil {
			rq.apply(throttled, r.Conn)
			h.Metrics.request(r.Key, r.Version)
			return encodeAnswer(r.CorrelationID, throttled, nil)
		}
	}
	if rq != nil && r.Key == produceKey {
		rq.produced(len(r.Body))
	}
	handling := time.Now()
	resp, err := h.dispatch(rc, r.Header, kreq)
	if rq != nil {
		rq.handled(time.Since(handling))
	}
	if err != nil {
		rc.held.release()
		h.Metrics.connError("handler")
		return wire.Answer{Err: err}
	}
	probe := r.ClientID != nil && *r.ClientID == probeClientID
	if !probe {
		h.Metrics.request(r.Key, r.Version)
	}
	if rq != nil {
		rq.wrap(rc, resp, r.Conn)
	}
	if rc.later != nil {
		later := h.encodeLater(r.Header, rc.later, start, probe)
		if rc.closeAfter {
			inner := later
			later = func() wire.Answer { a := inner(); a.Close = true; return a }
		}
		return wire.Answer{Later: later, Alone: rc.alone}
	}
	if !probe {
		h.Metrics.answered(r.Key, r.Version, start, resp)
	}
	if resp == nil {
		return wire.Answer{} // the request gets no answer (Produce with acks=0)
	}
	a := encodeAnswer(r.CorrelationID, resp, &rc.held)
	a.Close = rc.closeAfter
	return a
}

// newRequestContext is the context of request r: a snapshot of the view taken now, which the
// whole answer is computed from, and what r tells of its connection and listener.
func (h *Handler) newRequestContext(r *wire.Request, listener listenerSource) *requestContext {
	h.init()
	addr, reachable := listener.current()
	addr.Name = listener.name
	rc := &requestContext{
		ctx: r.Context(), connCtx: r.Conn.Context(), stopping: r.Stopping(), h: h,
		view: h.View.Snapshot(), self: h.Self, listener: addr, selfReachable: reachable,
		remote: r.Conn.RemoteAddr(), conn: r.Conn,
	}
	if r.ClientID != nil {
		rc.clientID = *r.ClientID
	}
	return rc
}

// dispatch is the one path every request takes, a client's or the liveness probe's: it runs
// the key's handler and ticks the liveness clock, since a completed request proves the
// request path works.
func (h *Handler) dispatch(rc *requestContext, hdr wire.Header, req kmsg.Request) (kmsg.Response, error) {
	resp, err := apis[hdr.Key].handle(rc, req)
	if err != nil {
		return nil, fmt.Errorf("%s v%d: %w", kmsg.NameForKey(hdr.Key), hdr.Version, err)
	}
	h.Liveness.Tick()
	return resp, nil
}

// encodeLater wraps a handler's answerLater function into the wire's: the same encoding and
// error reporting as an answer given at once.
func (h *Handler) encodeLater(hdr wire.Header, fn func() (kmsg.Response, error), start time.Time, probe bool) func() wire.Answer {
	return func() wire.Answer {
		resp, err := fn()
		if err == nil && !probe {
			h.Metrics.answered(hdr.Key, hdr.Version, start, resp)
		}
		switch {
		case err != nil:
			h.Metrics.connError("handler")
			return wire.Answer{Err: fmt.Errorf("%s v%d: %w", kmsg.NameForKey(hdr.Key), hdr.Version, err)}
		case resp == nil:
			return wire.Answer{}
		}
		return encodeAnswer(hdr.CorrelationID, resp, nil)
	}
}

// newWireServer is the connection server that serves h: the broker's bounds (bounds.go),
// pipelining depth and logger, and its metrics for connections.
func newWireServer(h *Handler, b Bounds, pipelineDepth int, log logr.Logger) *wire.Server {
	perConn := int(b.QueuedMaxResponseBytesPerConnection)
	if perConn == 0 {
		perConn = -1 // 0 would mean the wire default; the key says "no byte bound" with -1
	}
	return &wire.Server{
		Handler:                      h,
		MaxFrameBytes:                b.SocketRequestMaxBytes,
		RequestBudget:                wire.NewBudget(orUnbounded(b.QueuedMaxRequestBytes)),
		RequestCost:                  requestCost,
		MaxQueuedAnswerBytes:         perConn,
		MaxConnections:               b.MaxConnections,
		MaxConnectionsPerIP:          b.MaxConnectionsPerIP,
		MaxConnectionsPerIPOverrides: b.MaxConnectionsPerIPOverrides,
		IdleTimeout:                  b.ConnectionsMaxIdle,
		PipelineDepth:                pipelineDepth,
		Log:                          log,
		ConnState:                    h.Metrics.connState,
		ConnError:                    h.Metrics.connError,
	}
}

// advertisedListener is a net.Listener that carries the listener's name and where clients
// are told to reach this broker on it; the wire server hands it back with every connection
// accepted on it (wire.Conn.Listener).
type advertisedListener struct {
	net.Listener
	source listenerSource
}

// listenerSource names a listener and reads this broker's current address on it; ok=false
// while the broker has none yet (an external listener whose node or load balancer address is
// not known): answers on that listener then leave this broker out.
type listenerSource struct {
	name    string
	current func() (v1alpha1.ListenerAddress, bool)
	// auth is the listener's client authentication (docs/security.md); empty for none.
	auth v1alpha1.ListenerAuthenticationType
}

// Advertise wraps ln, the listener called name, so that answers to requests accepted on it
// name this broker at host:port and every other broker at the address its registry row gives
// for name. Without it, a listener advertises its local address under the empty name.
func Advertise(ln net.Listener, name, host string, port int32) net.Listener {
	addr := v1alpha1.ListenerAddress{Name: name, Host: host, Port: port}
	return &advertisedListener{Listener: ln, source: listenerSource{name: name, current: func() (v1alpha1.ListenerAddress, bool) { return addr, true }}}
}

// AdvertiseFrom is Advertise for an address that changes: addrs is read at every request,
// so an answer always carries this broker's address as it is now, and none while it has
// none.
func AdvertiseFrom(ln net.Listener, name string, addrs *cluster.Addresses) net.Listener {
	return &advertisedListener{Listener: ln, source: listenerSource{name: name, current: func() (v1alpha1.ListenerAddress, bool) { return addrs.Get(name) }}}
}

// advertiseListener is AdvertiseFrom for the configured listener l, with its
// authentication: what the broker serves each listener with.
func advertiseListener(ln net.Listener, l cluster.ListenerSpec, addrs *cluster.Addresses) net.Listener {
	al := AdvertiseFrom(ln, l.Name, addrs).(*advertisedListener)
	al.source.auth = l.Authentication
	return al
}

// listenerOf is what ln advertises: its Advertise source, or its local address under the
// empty name.
func listenerOf(ln net.Listener) listenerSource {
	if a, ok := ln.(*advertisedListener); ok {
		return a.source
	}
	addr := v1alpha1.ListenerAddress{Host: ln.Addr().String(), Port: -1}
	if host, portStr, err := net.SplitHostPort(ln.Addr().String()); err == nil {
		port, _ := strconv.Atoi(portStr)
		addr = v1alpha1.ListenerAddress{Host: host, Port: int32(port)}
	}
	return listenerSource{current: func() (v1alpha1.ListenerAddress, bool) { return addr, true }}
}
