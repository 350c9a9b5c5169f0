package broker

import (
	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// endpoint is one broker as a client sees it.
type endpoint struct {
	id     int32
	host   string
	port   int32
	rack   *string
	fenced bool
}

// brokers is the broker list of an answer, sorted by id. With includeFenced=false it is every
// registered broker whose state is Serving (what Metadata and DescribeCluster v0/v1 show);
// with includeFenced=true every registered broker, fenced ones marked. Each is listed at its
// address on the listener the request came in on; a broker without one is left out, since a
// client could not reach it there. The answering broker is always listed, never fenced, with
// the endpoint of the listener the request came in on: it is serving — it just answered —
// whatever a possibly stale view says; only while it has no address on that listener yet is
// it left out, like any broker without one.
func (rc *requestContext) brokers(includeFenced bool) []endpoint {
	out := make([]endpoint, 0, len(rc.view.Brokers)+1)
	selfListed := false
	for _, row := range rc.view.Brokers {
		if row.ID == rc.self {
			if rc.selfReachable {
				out = append(out, rc.selfEndpoint(row))
			}
			selfListed = true
			continue
		}
		fenced := row.State != v1alpha1.BrokerServing
		addr, reachable := rc.address(row)
		if fenced && !includeFenced || !reachable {
			continue
		}
		out = append(out, endpoint{id: row.ID, host: addr.Host, port: addr.Port, rack: rack(row), fenced: fenced})
	}
	if !selfListed && rc.selfReachable {
		self := rc.selfEndpoint(v1alpha1.BrokerRow{ID: rc.self})
		// Rows are sorted by id; insert self in order.
		i := 0
		for i < len(out) && out[i].id < rc.self {
			i++
		}
		out = append(out, endpoint{})
		copy(out[i+1:], out[i:])
		out[i] = self
	}
	return out
}

// address is where clients reach the broker of row on the request's listener; false when the
// registry knows no address for it there.
func (rc *requestContext) address(row v1alpha1.BrokerRow) (v1alpha1.ListenerAddress, bool) {
	if row.ID == rc.self {
		return rc.listener, rc.selfReachable
	}
	return row.Address(rc.listener.Name)
}

func (rc *requestContext) selfEndpoint(row v1alpha1.BrokerRow) endpoint {
	return endpoint{id: rc.self, host: rc.listener.Host, port: rc.listener.Port, rack: rack(row)}
}

func rack(row v1alpha1.BrokerRow) *string {
	if row.Rack == "" {
		return nil
	}
	r := row.Rack
	return &r
}

// controllerID is the id reported as the controller: the lowest-id broker whose registry row
// is Serving and Alive and that has an address on the request's listener (so the answer
// names a broker the client is told about), or -1 when none is. The answering broker counts
// only when its own row qualifies — never because it is answering — so every broker gives
// the same answer. KRaft brokers likewise report a live broker, since clients cannot reach
// the real controller.
func (rc *requestContext) controllerID() int32 {
	for _, row := range rc.view.Brokers {
		if _, reachable := rc.address(row); reachable &&
			row.State == v1alpha1.BrokerServing && row.Health == v1alpha1.BrokerAlive {
			return row.ID
		}
	}
	return -1
}
