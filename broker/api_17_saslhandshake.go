package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake (key 17): versions 0-1 (docs/security.md, "Authentication").
//
// Behaviour:
//   - A SASL listener offers its one mechanism; asking for it starts an exchange, asking for
//     another answers UNSUPPORTED_SASL_MECHANISM with the offered list and closes the
//     connection.
//   - A listener without SASL answers ILLEGAL_SASL_STATE, as Apache's does.
//   - On an authenticated connection it starts a re-authentication (KIP-368), which must
//     use the mechanism the connection authenticated with.
//
// Version notes:
//   - v0: the exchange's tokens follow as raw size-prefixed frames, not SaslAuthenticate
//     requests (wire.Conn.ExpectRawFrame).
func init() { register(saslHandshakeKey, 0, 1, handleSaslHandshake) }

func handleSaslHandshake(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	sess := rc.session
	offered := mechanisms(sess.listener.auth)
	resp.SupportedMechanisms = offered
	switch {
	case len(offered) == 0:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	case !slices.Contains(offered, req.Mechanism),
		sess.authenticated() && req.Mechanism != sess.mechanism:
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		rc.closeAfter = true
		return resp, nil
	}
	sess.handshake = &handshake{mechanism: req.Mechanism, version: req.Version, reauth: sess.authenticated()}
	if req.Version == 0 {
		rc.conn.ExpectRawFrame()
	}
	return resp, nil
}
