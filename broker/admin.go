package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/paddock-dev/paddock/broker/cluster"
)

// What the admin APIs share (docs/topics.md, "Admin APIs"): their bounded waits, the Kafka
// error of a failed KafkaTopic write (cluster.Admin writes them), and the duplicate check.

// Bounds of an admin request's waiting, whatever timeout the client sent.
const (
	// maxAdminWait is the longest an admin request waits for the view to show its effect.
	maxAdminWait = 30 * time.Second
	// minWriteTimeout is the least time an API write is given, so a client timeout of 0
	// (answer at once, Apache's "do not wait") still gets its write attempted.
	minWriteTimeout = 5 * time.Second
)

// adminDeadlines splits a request's timeout into the context its API writes run under and
// the context its wait for the view runs under. Both end when the server closes. The wait ends
// timeoutMs after now (capped at maxAdminWait; at once for timeoutMs ≤ 0), the writes get at
// least minWriteTimeout.
func (rc *requestContext) adminDeadlines(timeoutMs int32) (write, wait context.Context, cancel func()) {
	budget := min(time.Duration(max(timeoutMs, 0))*time.Millisecond, maxAdminWait)
	write, cancelWrite := context.WithTimeout(rc.ctx, max(budget, minWriteTimeout))
	wait, cancelWait := context.WithTimeout(rc.ctx, budget)
	return write, wait, func() { cancelWrite(); cancelWait() }
}

// waitView waits until cond holds for the view's snapshot or ctx ends, and returns the last
// snapshot it read and whether cond held.
func waitView(ctx context.Context, v cluster.View, cond func(*cluster.Snapshot) bool) (*cluster.Snapshot, bool) {
	for {
		updated := v.Updated() // taken before the check, so no change slips between
		s := v.Snapshot()
		if cond(s) {
			return s, true
		}
		select {
		case <-updated:
		case <-ctx.Done():
			return v.Snapshot(), cond(v.Snapshot())
		}
	}
}

// leadersListed is true when every partition of t has a leader that Metadata, answering this
// request from s, would name (brokers): the answering broker, or a registered broker that is
// Serving and has an address on the request's listener. A client producing right after the
// topic was created then finds a leader.
func (rc *requestContext) leadersListed(s *cluster.Snapshot, t *cluster.Topic) bool {
	at := *rc
	at.view = s
	listed := map[int32]bool{}
	for _, b := range at.brokers(false) {
		listed[b.id] = true
	}
	for _, p := range t.Partitions {
		if !listed[p.Leader] {
			return false
		}
	}
	return true
}

// apiErrorCode is the Kafka error a failed KafkaTopic write answers with, and its message.
func apiErrorCode(err error) (int16, string) {
	switch {
	case apierrors.IsAlreadyExists(err):
		return kerr.TopicAlreadyExists.Code, err.Error()
	case apierrors.IsNotFound(err):
		return kerr.UnknownTopicOrPartition.Code, err.Error()
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return kerr.TopicAuthorizationFailed.Code, "the broker may not write KafkaTopics: " + err.Error()
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return kerr.InvalidRequest.Code, err.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return kerr.RequestTimedOut.Code, "the API server did not answer in time: " + err.Error()
	}
	return kerr.UnknownServerError.Code, err.Error()
}

// errNoAdmin is the message of every admin request to a broker that has no Admin.
const errNoAdmin = "this broker runs without API access (no Admin); topics cannot be changed through it"

// countBy counts items by key: the duplicate check of every admin request (a name twice in
// one request is refused, every occurrence).
func countBy[T any](items []T, key func(T) string) map[string]int {
	n := make(map[string]int, len(items))
	for _, it := range items {
		n[key(it)]++
	}
	return n
}

// strptr returns a pointer to a copy of s.
func strptr(s string) *string { return &s }

// errorf is a formatted error message pointer, for the ErrorMessage fields.
func errorf(format string, args ...any) *string { return strptr(fmt.Sprintf(format, args...)) }
