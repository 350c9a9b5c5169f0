package broker

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/wire"
)

// SaslAuthenticate (key 36): versions 0-2 (docs/security.md, "Authentication").
//
// Behaviour:
//   - Carries the tokens of the exchange a v1 SaslHandshake started: SCRAM-SHA-256/512
//     (internal/scram) or PLAIN, checked against the salted credentials of the cluster's
//     KafkaUsers.
//   - A failure (wrong password, unknown user, malformed token, too many failures from the
//     source) answers SASL_AUTHENTICATION_FAILED with one generic message after
//     connection.failed.authentication.delay.ms (100 ms), then closes the connection.
//   - Without a SaslHandshake before it: ILLEGAL_SASL_STATE, and the connection closes.
//
// Version notes:
//   - v1: session_lifetime_ms is the time left before the client must re-authenticate
//     (connections.max.reauth.ms; 0 when off).
//   - v2: flexible.
func init() { register(saslAuthenticateKey, 0, 2, handleSaslAuthenticate) }

func handleSaslAuthenticate(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	sess := rc.session
	if sess.handshake == nil || sess.handshake.version == 0 {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate must follow a SaslHandshake v1"
		resp.ErrorMessage = &msg
		rc.closeAfter = true
		return resp, nil
	}
	reply, done, err := rc.h.saslStep(sess, rc.remote, req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := authFailedMessage
		resp.ErrorMessage = &msg
		rc.closeAfter = true
		rc.answerLaterAlone(func() (kmsg.Response, error) { delayFailure(rc.connCtx.Done()); return resp, nil })
		return nil, nil
	}
	resp.SASLAuthBytes = reply
	if done {
		resp.SessionLifetimeMillis = rc.h.sessionLifetime(sess)
	}
	return resp, nil
}

// serveRawToken answers a raw token frame after a v0 SaslHandshake: the reply as a raw frame,
// another raw frame expected while the exchange goes on; a failure closes the connection
// after the delay, without an answer (v0 has no error frame).
func (h *Handler) serveRawToken(r *wire.Request, sess *session) wire.Answer {
	if sess.handshake == nil || sess.handshake.version != 0 {
		h.Metrics.connError("authentication")
		return wire.Answer{Err: fmt.Errorf("a raw frame without a SaslHandshake v0")}
	}
	reply, done, err := h.saslStep(sess, r.Conn.RemoteAddr(), r.Body)
	if err != nil {
		stop := r.Context().Done()
		return wire.Answer{Later: func() wire.Answer {
			delayFailure(stop)
			return wire.Answer{Err: err}
		}, Alone: true}
	}
	if !done {
		r.Conn.ExpectRawFrame()
	}
	return wire.Answer{Frame: append(binary.BigEndian.AppendUint32(nil, uint32(len(reply))), reply...)}
}

// delayFailure waits failedAuthDelay, or until stop is closed.
func delayFailure(stop <-chan struct{}) {
	t := time.NewTimer(failedAuthDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
	}
}
