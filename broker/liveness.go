package broker

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// WedgedAfter is how old the liveness tick may get before the broker calls itself unhealthy.
const WedgedAfter = 5 * time.Second

// Liveness is the request loop's heartbeat: the time of the last completed request or idle
// self-check. A nil *Liveness ignores ticks.
type Liveness struct {
	last atomic.Int64 // unix nanoseconds of the last tick
	now  func() time.Time
}

// NewLiveness returns a Liveness ticked now, reading time from now (time.Now when nil).
func NewLiveness(now func() time.Time) *Liveness {
	if now == nil {
		now = time.Now
	}
	l := &Liveness{now: now}
	l.Tick()
	return l
}

// Tick records that the request path just completed work.
func (l *Liveness) Tick() {
	if l != nil {
		l.last.Store(l.now().UnixNano())
	}
}

// Age is the time since the last tick.
func (l *Liveness) Age() time.Duration { return l.now().Sub(time.Unix(0, l.last.Load())) }

// Healthy is false once the last tick is WedgedAfter old.
func (l *Liveness) Healthy() bool { return l.Age() < WedgedAfter }

// RunIdleTicks keeps an idle broker healthy: every period it pushes a canned ApiVersions
// request through the same decode and dispatch path client requests take (view snapshot,
// handler table), which ticks the liveness clock. A busy broker is kept healthy by its
// requests anyway; a broker whose runtime or request path is wedged stops ticking either way.
// It returns when ctx ends.
func (s *Server) RunIdleTicks(ctx context.Context, period time.Duration) {
	probe := appendRequestFrame(nil, kmsg.NewPtrApiVersionsRequest(), 0)[4:]
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h, req, err := decodeRequest(probe)
			if err == nil {
				// Not counted in the request metrics: it is not a client's request.
				_, err = s.dispatch(s.newRequestContext(v1alpha1.ListenerAddress{}), h, req)
			}
			if err != nil {
				s.Log.Error(err, "Idle liveness self-check failed")
			}
		}
	}
}
