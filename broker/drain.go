package broker

import (
	"context"
	"os"
	"time"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
)

// drain is what a broker does between SIGTERM and closing its listeners (docs/dataplane.md,
// "Drain with data"): it marks itself draining and writes a draining beat at once, then keeps serving
// until the view gives it no partition and no group (drained), every partition log it held
// has been relinquished (Leading() == 0: its last appends acknowledged, its checkpoint
// written, its files closed) and it holds no group any more (Groups.Owned() == 0: waiting
// joins answered NOT_COORDINATOR, in-flight commits finished), and for one more heartbeat interval — so clients still connected here get their next FindCoordinator/Metadata answer
// from a live broker, pointing at the new owners, instead of a refused connection — or until
// DrainTimeout passes. It returns only once the draining beat was written: the registry must
// learn about the drain before the listeners go, even when the view had nothing to move.
//
// A second signal returns errInterrupted at once; ctx ending returns ctx's error.
func (b *Broker) drain(ctx context.Context, signals <-chan os.Signal) error {
	b.draining.Store(true)
	beatWritten := make(chan struct{})
	go func() {
		defer close(beatWritten)
		b.writeDrainingBeat()
	}()

	deadline := time.Now().Add(b.Config.DrainTimeout)
	timeout := time.NewTimer(b.Config.DrainTimeout)
	defer timeout.Stop()
	var lingered <-chan time.Time // fires one heartbeat interval after the handover; nil until then
wait:
	for {
		// The signals are taken before the checks, so no change slips between.
		updated, released, unloaded := b.View.Updated(), b.partitionsChanged(), b.groups.Changed()
		snap := b.View.Snapshot()
		if lingered == nil && drained(snap, b.Config.Identity.ID) && b.Leading() == 0 && b.groups.Owned() == 0 {
			b.Log.Info("Drained: the cluster view gives this broker no partition and no group, and it leads and coordinates none")
			lingered = time.After(min(b.Config.HeartbeatInterval, max(time.Until(deadline), 0)))
		}
		select {
		case <-updated:
		case <-released:
		case <-unloaded:
		case <-lingered:
			break wait
		case <-timeout.C:
			if lingered == nil {
				partitions, groups := workHere(snap, b.Config.Identity.ID)
				b.metrics.drainTimedOut()
				b.Log.Info("Drain timeout; closing with work still assigned", "partitions", partitions, "coordinatesGroups", groups,
					"partitionLogsOpen", b.Leading(), "groupsHeld", b.groups.Owned())
			}
			break wait
		case sig := <-signals:
			b.Log.Info("Second signal; exiting at once", "signal", sig.String())
			return errInterrupted
		case <-ctx.Done():
			return ctx.Err()
		}
	}

	select {
	case <-beatWritten:
		return nil
	case sig := <-signals:
		b.Log.Info("Second signal; exiting at once", "signal", sig.String())
		return errInterrupted
	}
}

// writeDrainingBeat writes a beat carrying draining=true right away, on a context of its own:
// it must be delivered even though the drain may end soon after (the seed's failure was a
// draining flag cancelled together with the heartbeat and never written). It retries with
// backoff for up to one session timeout.
func (b *Broker) writeDrainingBeat() {
	if b.Heartbeat == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.Heartbeat.SessionTimeout)
	defer cancel()
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		err := b.Heartbeat.Beat(ctx)
		if err == nil {
			b.Log.Info("Draining beat written")
			return
		}
		b.Log.Error(err, "Draining beat failed; retrying", "retryIn", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// workHere says what the view still gives this broker: partitions it leads, and whether it
// can still be picked as a group coordinator.
//
// Groups follow coordinator.Pick, which only ever picks an Alive broker; so "no group
// coordinated here" is exactly "the registry no longer lists this broker Alive" — the
// registry has seen the draining beat — and "the coordinator epoch was bumped for an alive
// set without it" (status.coordinatorBrokers), so every group has a new coordinator at an
// epoch that fences this one.
func workHere(s *cluster.Snapshot, self int32) (partitions int, groups bool) {
	for _, t := range s.Topics {
		for _, p := range t.Partitions {
			if p.Leader == self {
				partitions++
			}
		}
	}
	row, ok := s.Row(self)
	return partitions, ok && row.Health == v1alpha1.BrokerAlive || coordinatesGroups(s, self)
}

// drained is true once the view gives this broker no partition and no group: the broker may
// then close its listeners (after the linger).
func drained(s *cluster.Snapshot, self int32) bool {
	partitions, groups := workHere(s, self)
	return partitions == 0 && !groups
}

// partitionsChanged is closed at the next change of the partitions held here (never, without
// a partition manager).
func (b *Broker) partitionsChanged() <-chan struct{} {
	if p := b.partitions.Load(); p != nil {
		return p.Changed()
	}
	return nil
}
