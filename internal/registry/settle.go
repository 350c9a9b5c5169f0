package registry

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/paddock-dev/paddock/api/v1alpha1"
)

// LastSeenRefresh is how far a live broker's written lastSeen may lag its Lease's renewTime.
//
// A broker renews its Lease every second, and lastSeen is when that renewal was observed, so
// writing lastSeen as it is would make every heartbeat a status write — the very load the
// Lease exists to keep off the objects people watch (the kubelet solved the same problem for
// Node status the same way: Lease for liveness, status refreshed on change or every few
// minutes). So for a broker that is heartbeating — Alive, Draining, or Dead only because it
// says it is unhealthy — lastSeen is written with the row's other changes, and otherwise at
// most every LastSeenRefresh. A broker whose heartbeat expired has no new beat: its lastSeen
// is always the time its last renewal was observed, exactly, and cannot change without one.
const LastSeenRefresh = 5 * time.Minute

// Settle returns the row to write for next, given the row as last written (nil when there is
// none) and whether next's broker is heartbeating (Reasons.Heartbeating). It is next itself,
// except that a heartbeating broker whose row is otherwise unchanged keeps the written lastSeen
// until it is LastSeenRefresh old (see LastSeenRefresh).
func Settle(written *v1alpha1.BrokerRow, next v1alpha1.BrokerRow, heartbeating bool) v1alpha1.BrokerRow {
	if written == nil || !heartbeating ||
		written.LastSeen == nil || next.LastSeen == nil || !EqualExceptLastSeen(*written, next) {
		return next
	}
	lag := next.LastSeen.Sub(written.LastSeen.Time)
	if lag < 0 || lag >= LastSeenRefresh {
		return next
	}
	next.LastSeen = written.LastSeen.DeepCopy()
	return next
}

// SettleAll applies Settle to each row of res, matching written rows by id.
func SettleAll(written []v1alpha1.BrokerRow, res Result) []v1alpha1.BrokerRow {
	byID := make(map[int32]*v1alpha1.BrokerRow, len(written))
	for i := range written {
		byID[written[i].ID] = &written[i]
	}
	out := make([]v1alpha1.BrokerRow, len(res.Rows))
	for i, row := range res.Rows {
		out[i] = Settle(byID[row.ID], row, res.Reasons[i].Heartbeating())
	}
	return out
}

// EqualExceptLastSeen reports whether two rows say the same thing apart from lastSeen.
// An empty and an absent listener list are the same (a row read back from the apiserver
// has no empty lists).
func EqualExceptLastSeen(a, b v1alpha1.BrokerRow) bool {
	a.LastSeen, b.LastSeen = nil, nil
	return equality.Semantic.DeepEqual(a, b)
}

// Equal reports whether two rows are the same, comparing lastSeen as an instant (a row read
// back from the apiserver carries another time.Location than a computed one).
func Equal(a, b v1alpha1.BrokerRow) bool {
	if !EqualExceptLastSeen(a, b) {
		return false
	}
	if a.LastSeen == nil || b.LastSeen == nil {
		return a.LastSeen == nil && b.LastSeen == nil
	}
	return a.LastSeen.Equal(b.LastSeen)
}

// Transitions names what changed between the written row and the next one, as event reasons:
// EventServing or EventFenced for a state change, EventAlive, EventDraining or EventDead for
// a health change. A broker seen for the first time (written nil) reports its fenced and
// non-alive facts, since "registered and already dead" is news too — but a Starting broker is
// not dead: it is Dead only once its start-up grace ends without a heartbeat.
func Transitions(written *v1alpha1.BrokerRow, next v1alpha1.BrokerRow) []string {
	var out []string
	if written == nil || written.State != next.State {
		switch {
		case next.State == v1alpha1.BrokerFenced:
			out = append(out, v1alpha1.EventFenced)
		case written != nil:
			out = append(out, v1alpha1.EventServing)
		}
	}
	wasStarting := written != nil && starting(*written)
	if written == nil || written.Health != next.Health || wasStarting && !starting(next) {
		switch {
		case starting(next):
		case next.Health == v1alpha1.BrokerDead:
			out = append(out, v1alpha1.EventDead)
		case next.Health == v1alpha1.BrokerDraining:
			out = append(out, v1alpha1.EventDraining)
		case written != nil:
			out = append(out, v1alpha1.EventAlive)
		}
	}
	return out
}

// starting reports whether row is a broker in its start-up grace: not alive, but not dead yet.
func starting(row v1alpha1.BrokerRow) bool {
	return row.Health == v1alpha1.BrokerDead && row.Reason == v1alpha1.ReasonStarting
}
