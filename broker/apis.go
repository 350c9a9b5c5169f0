package broker

import (
	"context"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
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
// and the server, through which a handler reaches the state the broker owns (doc.go).
type requestContext struct {
	// ctx ends when the server is closed. Handlers that wait (for the API server or for the
	// view) derive a deadline from it and the request's own timeout, so none blocks its
	// connection forever.
	ctx context.Context
	// srv is the server that accepted the request. Handlers reach broker-owned state (the
	// partition logs of broker/storage, the group coordinator of broker/groups) through its
	// fields and never keep a reference past the request.
	srv *Server
	// view is read once per request, so one answer never mixes two states.
	view *Snapshot
	self int32
	// listener is the listener the request arrived on, with this broker's advertised host and
	// port on it: answers give every broker its address on this listener.
	listener v1alpha1.ListenerAddress
	// selfReachable is false while this broker has no address on listener yet (an external
	// listener whose node or load-balancer address is not known): answers leave it out.
	selfReachable bool
	// later, set by answerLater or answerLaterAlone, computes the answer after the handler
	// returned (pipeline.go); alone, set by answerLaterAlone, holds the connection's next
	// request until that answer is computed.
	later func() (kmsg.Response, error)
	alone bool
	// connCtx ends when ctx does or when the connection's reader stops (the client went
	// away): what a request that waits for other clients (a JoinGroup waiting for its
	// rebalance) waits on.
	connCtx context.Context
	// clientID is the request header's client id ("" when null); remote the client's
	// address.
	clientID string
	remote   net.Addr
}
