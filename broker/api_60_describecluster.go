package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster (key 60): versions 0-2 (docs/wire.md, "DescribeCluster"). Apache 3.7 serves
// 0-1; v2 (KIP-1073, Kafka 4.0) is a deliberate exception to our parity target, because it is
// the only way a client can see the fenced state the registry reports.
//
// Behaviour:
//   - The serving brokers only (as Metadata lists them), unless v2 asks for the fenced ones.
//     The answering broker is always listed and never fenced (see brokers).
//   - An error answer is, as Apache's, the response's defaults plus the error: no brokers, an
//     empty cluster id, endpoint type 1 and controller -1.
//   - ControllerID follows Metadata's (controllerID).
//   - ClusterAuthorizedOperations stays at the INT32_MIN sentinel unless requested.
//   - Authorization (Apache's handleDescribeCluster): none is needed to describe the cluster;
//     requested authorized operations are the principal's on the cluster, 0 without
//     DESCRIBE on it (without spec.authorization: all).
//
// Version notes:
//   - v1: EndpointType: 1 (brokers) is served; 2 (controllers) → MISMATCHED_ENDPOINT_TYPE,
//     since clients reach brokers only; any other type → UNSUPPORTED_ENDPOINT_TYPE.
//   - v2: IncludeFencedBrokers lists every registered broker with IsFenced.
func init() { register(60, 0, 2, handleDescribeCluster) }

const (
	endpointTypeBroker     = 1
	endpointTypeController = 2
)

func handleDescribeCluster(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 {
		switch req.EndpointType {
		case endpointTypeBroker:
		case endpointTypeController:
			resp.ErrorCode = kerr.MismatchedEndpointType.Code
			msg := "this is a broker endpoint; controllers are not reachable by clients"
			resp.ErrorMessage = &msg
			return resp, nil
		default:
			resp.ErrorCode = kerr.UnsupportedEndpointType.Code
			msg := "unsupported endpoint type"
			resp.ErrorMessage = &msg
			return resp, nil
		}
	}

	resp.ClusterID = rc.view.ClusterID
	includeFenced := req.Version >= 2 && req.IncludeFencedBrokers
	for _, b := range rc.brokers(includeFenced) {
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port, db.Rack, db.IsFenced = b.id, b.host, b.port, b.rack, b.fenced
		resp.Brokers = append(resp.Brokers, db)
	}
	resp.ControllerID = rc.controllerID()
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = rc.clusterOps()
	}
	return resp, nil
}
