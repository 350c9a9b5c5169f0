package registry

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddock-dev/paddock/api/v1alpha1"
)

func row(state v1alpha1.BrokerState, health v1alpha1.BrokerHealth, seen time.Time) v1alpha1.BrokerRow {
	return v1alpha1.BrokerRow{ID: 0, Pod: "c-broker-0", State: state, Health: health, LastSeen: &metav1.Time{Time: seen}}
}

func TestSettleWritesLastSeen(t *testing.T) {
	written := row(S, A, t0)
	unhealthy := row(F, D, t0)
	unhealthy.Reason = v1alpha1.ReasonUnhealthy
	unhealthyLater := unhealthy
	unhealthyLater.LastSeen = &metav1.Time{Time: t0.Add(30 * time.Second)}
	expired := row(F, D, t0)
	expired.Reason = v1alpha1.ReasonHeartbeatExpired
	expiredLater := expired
	expiredLater.LastSeen = &metav1.Time{Time: t0.Add(2 * time.Second)}
	for _, tc := range []struct {
		rule         string
		written      *v1alpha1.BrokerRow
		next         v1alpha1.BrokerRow
		heartbeating bool
		wantSeen     time.Time
	}{
		{"a heartbeat that changes nothing else keeps the written lastSeen",
			&written, row(S, A, t0.Add(30*time.Second)), true, t0},
		{"a live broker's lastSeen is refreshed once it is LastSeenRefresh old",
			&written, row(S, A, t0.Add(LastSeenRefresh)), true, t0.Add(LastSeenRefresh)},
		{"a row that changes for another reason carries the current lastSeen",
			&written, row(F, A, t0.Add(30*time.Second)), true, t0.Add(30 * time.Second)},
		{"an unhealthy broker that keeps beating keeps the written lastSeen: no write per beat",
			&unhealthy, unhealthyLater, true, t0},
		{"a broker whose heartbeat expired carries the time its last renewal was observed, exactly",
			&expired, expiredLater, false, t0.Add(2 * time.Second)},
		{"a new row carries its lastSeen",
			nil, row(S, A, t0.Add(time.Second)), true, t0.Add(time.Second)},
		{"a lastSeen that went backwards is written",
			&written, row(S, A, t0.Add(-time.Minute)), true, t0.Add(-time.Minute)},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got := Settle(tc.written, tc.next, tc.heartbeating)
			if !got.LastSeen.Time.Equal(tc.wantSeen) {
				t.Fatalf("lastSeen = %v, want %v", got.LastSeen.Time, tc.wantSeen)
			}
			if !EqualExceptLastSeen(got, tc.next) {
				t.Fatalf("settle changed more than lastSeen: %+v -> %+v", tc.next, got)
			}
		})
	}
}

func TestSettleAllMatchesRowsByID(t *testing.T) {
	written := []v1alpha1.BrokerRow{row(S, A, t0), row(S, A, t0)}
	written[1].ID = 1
	next := []v1alpha1.BrokerRow{row(S, A, t0.Add(time.Second)), row(S, A, t0.Add(time.Second)), row(S, A, t0.Add(time.Second))}
	next[1].ID, next[2].ID = 1, 2
	got := SettleAll(written, Result{Rows: next, Reasons: make([]Reasons, 3)})
	for i, want := range []time.Time{t0, t0, t0.Add(time.Second)} {
		if !got[i].LastSeen.Time.Equal(want) {
			t.Fatalf("row %d: lastSeen %v, want %v", i, got[i].LastSeen.Time, want)
		}
	}
}

func TestEqualComparesLastSeenAsAnInstant(t *testing.T) {
	a := row(S, A, t0)
	b := row(S, A, t0.In(time.FixedZone("x", 3600)))
	if !Equal(a, b) {
		t.Fatal("the same instant in two locations compares unequal")
	}
	b.LastSeen = nil
	if Equal(a, b) {
		t.Fatal("a row without lastSeen equals one with it")
	}
}

func TestTransitionsNameWhatChanged(t *testing.T) {
	for _, tc := range []struct {
		rule    string
		written *v1alpha1.BrokerRow
		next    v1alpha1.BrokerRow
		want    []string
	}{
		{"nothing changed: no event", rowPtr(row(S, A, t0)), row(S, A, t0.Add(time.Second)), nil},
		{"serving to fenced", rowPtr(row(S, A, t0)), row(F, A, t0), []string{v1alpha1.EventFenced}},
		{"fenced to serving", rowPtr(row(F, A, t0)), row(S, A, t0), []string{v1alpha1.EventServing}},
		{"alive to dead", rowPtr(row(S, A, t0)), row(S, D, t0), []string{v1alpha1.EventDead}},
		{"alive to draining", rowPtr(row(S, A, t0)), row(S, Dr, t0), []string{v1alpha1.EventDraining}},
		{"dead to alive", rowPtr(row(S, D, t0)), row(S, A, t0), []string{v1alpha1.EventAlive}},
		{"both at once", rowPtr(row(S, A, t0)), row(F, D, t0), []string{v1alpha1.EventFenced, v1alpha1.EventDead}},
		{"first sight of a healthy broker: nothing to warn about", nil, row(S, A, t0), nil},
		{"first sight of a fenced, dead broker", nil, row(F, D, t0), []string{v1alpha1.EventFenced, v1alpha1.EventDead}},
		{"first sight of a starting broker: fenced, but not dead", nil, startingRow(), []string{v1alpha1.EventFenced}},
		{"a starting broker whose grace ends without a heartbeat is Dead", rowPtr(startingRow()), withReason(row(F, D, t0), v1alpha1.ReasonPodMissing), []string{v1alpha1.EventDead}},
		{"a starting broker that heartbeats is Alive", rowPtr(startingRow()), row(F, A, t0), []string{v1alpha1.EventAlive}},
		{"a starting broker still starting: no event", rowPtr(startingRow()), startingRow(), nil},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			if got := Transitions(tc.written, tc.next); !slices.Equal(got, tc.want) {
				t.Fatalf("transitions = %v, want %v", got, tc.want)
			}
		})
	}
}

func rowPtr(r v1alpha1.BrokerRow) *v1alpha1.BrokerRow { return &r }

func withReason(r v1alpha1.BrokerRow, reason string) v1alpha1.BrokerRow {
	r.Reason = reason
	return r
}

func startingRow() v1alpha1.BrokerRow { return withReason(row(F, D, t0), v1alpha1.ReasonStarting) }
