package broker

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/wire"
)

// handler answers one decoded request. A protocol error belongs in the response (an error
// code); a returned Go error means the request cannot be answered and the connection is
// closed. A nil response with a nil error means the request gets no answer (Produce with
// acks=0).
type handler func(rc *requestContext, req kmsg.Request) (kmsg.Response, error)

// api is one served API key and the version range it is implemented for.
type api struct {
	key      int16
	min, max int16
	handle   handler
}

// apis holds every served key. It is filled by the init functions of the api_NN_*.go files and
// read-only afterwards; ApiVersions advertises exactly this table, so what is advertised cannot
// drift from what is implemented.
var apis = map[int16]api{}

// register adds key's handler for versions min..max. Called only from init.
func register(key, min, max int16, h handler) {
	if _, dup := apis[key]; dup {
		panic(fmt.Sprintf("broker: api key %d registered twice", key))
	}
	if kmsg.RequestForKey(key) == nil || max > kmsg.RequestForKey(key).MaxVersion() || min < 0 || min > max {
		panic(fmt.Sprintf("broker: api key %d range %d-%d not known to kmsg", key, min, max))
	}
	apis[key] = api{key: key, min: min, max: max, handle: h}
}

// requestContext is what a handler may use: the cluster state snapshot taken for this request,
// the identity and endpoint of the broker as seen on the connection the request came in on,
// and the Handler, through which a handler reaches the state the broker owns (doc.go).
type requestContext struct {
	// ctx ends when the wire server is closed. Handlers that wait (for the API server or for
	// the view) derive a deadline from it and the request's own timeout, so none blocks its
	// connection forever.
	ctx context.Context
	// h is the Handler answering the request. Handlers reach broker-owned state (the
	// partition logs of broker/storage, the group coordinator of broker/groups) through its
	// fields and never keep a reference past the request.
	h *Handler
	// view is read once per request, so one answer never mixes two states.
	view *cluster.Snapshot
	self int32
	// listener is the listener the request arrived on, with this broker's advertised host and
	// port on it: answers give every broker its address on this listener.
	listener v1alpha1.ListenerAddress
	// selfReachable is false while this broker has no address on listener yet (an external
	// listener whose node or load-balancer address is not known): answers leave it out.
	selfReachable bool
	// later, set by answerLater or answerLaterAlone, computes the answer after the handler
	// returned (wire.Answer.Later); alone, set by answerLaterAlone, holds the connection's
	// next request until that answer is computed.
	later func() (kmsg.Response, error)
	alone bool
	// takeoverDeadline ends the request's waits for partitions still taking over
	// (awaitTakeover); zero until its first.
	takeoverDeadline time.Time
	// closeAfter closes the connection once the answer is written (a failed
	// authentication: wire.Answer.Close).
	closeAfter bool
	// session is the connection's authentication (authn.go); never nil.
	session *session
	// connCtx ends when ctx does or when the connection's reader stops (the client went
	// away): what a request that waits for other clients (a JoinGroup waiting for its
	// rebalance) waits on.
	connCtx context.Context
	// stopping is closed once the wire server begins to shut down: a handler that waits
	// for data (a long-polling Fetch) answers at once with what it has.
	stopping <-chan struct{}
	// clientID is the request header's client id ("" when null); remote the client's
	// address.
	clientID string
	remote   net.Addr
	// held is what a Fetch answer holds until it is written (fetch_data.go): segment
	// sections sent from the file, and answer-budget bytes of records read into memory.
	held heldRecords
	// conn is the connection the request arrived on (its authentication state is session).
	conn *wire.Conn
}

// answerLater makes fn compute the request's answer after the handler returns, while the
// connection goes on to its next requests (answers still go out in request order:
// docs/dataplane.md, "Pipelining"). The handler returns (nil, nil) after calling it. fn must
// not touch the request's bytes (kmsg request fields of type []byte alias the connection's
// frame buffer, which the next request reuses) and must end when rc.ctx does.
func (rc *requestContext) answerLater(fn func() (kmsg.Response, error)) {
	rc.later = fn
}

// answerLaterAlone is answerLater for a request whose answer waits on other clients (a
// JoinGroup waiting for its rebalance, a SyncGroup waiting for the leader's assignment): the
// connection still reads its next request — so a client that goes away is noticed and
// rc.connCtx ends — but handles it only once this answer is computed, as an Apache broker
// does (docs/wire.md, "Connections"). fn must end when rc.connCtx does.
func (rc *requestContext) answerLaterAlone(fn func() (kmsg.Response, error)) {
	rc.later, rc.alone = fn, true
}
