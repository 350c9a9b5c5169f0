package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// errInterrupted is Run's answer to a second signal during the drain: exit at once.
var errInterrupted = errors.New("second signal during drain; exiting without waiting")

// idleTickPeriod is how often an idle broker proves its request path works (see RunIdleTicks).
const idleTickPeriod = time.Second

// shutdownGrace bounds flushing in-flight answers once the drain is over.
const shutdownGrace = 5 * time.Second

// Broker is one running `paddock broker`: the wire server on every configured listener, the
// health server, the heartbeat and the SIGTERM drain.
type Broker struct {
	Config Config
	// View is the cluster state the broker answers from and drains against.
	View View
	// Heartbeat renews the Lease; nil runs without one (an in-memory view in tests).
	Heartbeat *Heartbeat
	Log       logr.Logger
	// OnListening, when set, is called once every listener is bound, with the Kafka listener
	// addresses in configuration order and the health server's address.
	OnListening func(kafka []net.Addr, health net.Addr)

	liveness       *Liveness
	metrics        *Metrics
	draining       atomic.Bool
	listenersBound atomic.Bool
}

// NewBroker returns a broker for cfg answering from view. Set Heartbeat before Run to renew
// the Lease.
func NewBroker(cfg Config, view View, log logr.Logger) *Broker {
	b := &Broker{Config: cfg, View: view, Log: log, liveness: NewLiveness(nil)}
	b.metrics = NewMetrics(func() float64 {
		if age := b.Heartbeat.Age(); age >= 0 {
			return age.Seconds()
		}
		return -1
	}, b.draining.Load)
	return b
}

// Healthy is the heartbeat's healthy bit: the request path ticked within WedgedAfter.
func (b *Broker) Healthy() bool { return b.liveness.Healthy() }

// Draining is the heartbeat's draining bit: true from the first SIGTERM on.
func (b *Broker) Draining() bool { return b.draining.Load() }

// Run serves until the first signal on signals, then drains (DESIGN.md "Draining"): it writes
// a draining beat at once, keeps serving until the view gives it no partition and no group
// and then for one more heartbeat interval (or until DrainTimeout passes), makes sure the draining beat was written, closes the listeners and
// returns nil. A second signal during the drain returns errInterrupted at once. ctx ending
// closes everything without draining.
func (b *Broker) Run(ctx context.Context, signals <-chan os.Signal) error {
	var kafkaLns []net.Listener
	closeAll := func() {
		for _, ln := range kafkaLns {
			ln.Close()
		}
	}
	for _, l := range b.Config.Listeners {
		ln, err := net.Listen("tcp", net.JoinHostPort(b.Config.BindAddress, strconv.Itoa(int(l.Port))))
		if err != nil {
			closeAll()
			return fmt.Errorf("listener %s: %w", l.Name, err)
		}
		kafkaLns = append(kafkaLns, ln)
	}
	healthLn, err := net.Listen("tcp", net.JoinHostPort(b.Config.BindAddress, strconv.Itoa(b.Config.HealthPort)))
	if err != nil {
		closeAll()
		return fmt.Errorf("health listener: %w", err)
	}

	srv := &Server{
		View:          b.View,
		Self:          b.Config.Identity.ID,
		MaxFrameBytes: b.Config.MaxFrameBytes,
		Log:           b.Log.WithName("wire"),
		Metrics:       b.metrics,
		Liveness:      b.liveness,
	}
	serveErr := make(chan error, len(kafkaLns))
	addrs := make([]net.Addr, len(kafkaLns))
	for i, ln := range kafkaLns {
		l := b.Config.Listeners[i]
		port := l.Port
		if port == 0 { // an ephemeral port (tests): advertise what was bound
			port = int32(ln.Addr().(*net.TCPAddr).Port)
		}
		addrs[i] = ln.Addr()
		go func() { serveErr <- srv.Serve(Advertise(ln, l.Host, port)) }()
		b.Log.Info("Listening", "listener", l.Name, "addr", ln.Addr().String(), "advertised", net.JoinHostPort(l.Host, strconv.Itoa(int(port))))
	}
	hs := &http.Server{Handler: b.healthHandler(), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(healthLn)
	b.listenersBound.Store(true)

	// The heartbeat loop and idle ticks live until Run returns — through the drain, so the
	// draining flag keeps being renewed until the listeners close.
	bgCtx, stopBackground := context.WithCancel(context.Background())
	defer stopBackground()
	go srv.RunIdleTicks(bgCtx, idleTickPeriod)
	if b.Heartbeat != nil {
		go b.Heartbeat.Run(bgCtx)
	}
	if b.OnListening != nil {
		b.OnListening(addrs, healthLn.Addr())
	}
	hardStop := func() {
		b.listenersBound.Store(false)
		srv.Close()
		hs.Close()
	}

	select {
	case sig := <-signals:
		b.Log.Info("Draining", "signal", sig.String(), "drainTimeout", b.Config.DrainTimeout)
	case err := <-serveErr:
		hardStop()
		return err
	case <-ctx.Done():
		hardStop()
		return ctx.Err()
	}

	b.draining.Store(true)
	beatWritten := make(chan struct{})
	go func() {
		defer close(beatWritten)
		b.writeDrainingBeat()
	}()

	timeout := time.NewTimer(b.Config.DrainTimeout)
	defer timeout.Stop()
	drainDeadline := time.Now().Add(b.Config.DrainTimeout)
	// lingered fires one heartbeat interval after the handover (bounded by what is left of
	// drainTimeout); nil until then. Lingering lets clients still connected here get their
	// next FindCoordinator/Metadata answer from this broker, pointing at the new owners,
	// instead of a refused connection.
	var lingered <-chan time.Time
wait:
	for {
		updated := b.View.Updated() // taken before the check, so no change slips between
		partitions, groups := workHere(b.View.Snapshot(), b.Config.Identity.ID)
		if lingered == nil && partitions == 0 && !groups {
			b.Log.Info("Drained: the cluster view gives this broker no partition and no group")
			lingered = time.After(min(b.Config.HeartbeatInterval, max(time.Until(drainDeadline), 0)))
		}
		select {
		case <-updated:
		case <-lingered:
			break wait
		case <-timeout.C:
			if lingered == nil {
				b.Log.Info("Drain timeout; closing with work still assigned", "partitions", partitions, "coordinatesGroups", groups)
			}
			break wait
		case sig := <-signals:
			b.Log.Info("Second signal; exiting at once", "signal", sig.String())
			hardStop()
			return errInterrupted
		case <-ctx.Done():
			hardStop()
			return ctx.Err()
		}
	}

	// The registry must learn about the drain before the listeners go, even when the view
	// had nothing to move.
	select {
	case <-beatWritten:
	case sig := <-signals:
		b.Log.Info("Second signal; exiting at once", "signal", sig.String())
		hardStop()
		return errInterrupted
	}

	b.listenersBound.Store(false)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		b.Log.Info("Connections closed hard after the shutdown grace", "reason", err.Error())
	}
	hs.Shutdown(shutdownCtx)
	b.Log.Info("Listeners closed; exiting")
	return nil
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
