package broker

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/wire"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// testCluster is n in-process brokers, each a Server on its own loopback listeners, sharing
// one in-memory view whose rows point at those listeners — so a real client can follow any
// address an answer gives it.
type testCluster struct {
	view *cluster.MemoryView
	// addrs[i] is broker i's first listener; listenerAddrs[l][i] its listener l.
	addrs         []string
	listenerAddrs [][]string
	rows          []v1alpha1.BrokerRow
}

const testClusterID = "cZ4mKx7zQd2cWq0b3nT9fA"

// testListener is one listener every broker of a testCluster serves: its name, and the host
// broker i advertises on it (empty: the loopback address it listens on).
type testListener struct {
	name string
	host func(i int) string
}

// newTestCluster is n brokers with one listener, "kafka", advertising its loopback address.
func newTestCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	return newTestClusterWith(t, n, testListener{name: "kafka"})
}

func newTestClusterWith(t *testing.T, n int, listeners ...testListener) *testCluster {
	t.Helper()
	tc := &testCluster{view: cluster.NewMemoryView(cluster.Snapshot{}), listenerAddrs: make([][]string, len(listeners))}
	for i := range n {
		srv := newTestServer(t, &Handler{View: tc.view, Self: int32(i), Log: testr.New(t).WithValues("broker", i)})
		row := v1alpha1.BrokerRow{
			ID: int32(i), Rack: "zone-" + strconv.Itoa(i%2), State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive,
		}
		for l, spec := range listeners {
			ln := testkit.Listen(t)
			host, portStr, _ := net.SplitHostPort(ln.Addr().String())
			port, _ := strconv.Atoi(portStr)
			if spec.host != nil {
				host = spec.host(i)
			}
			done := make(chan error, 1)
			go func() { done <- srv.Serve(Advertise(ln, spec.name, host, int32(port))) }()
			t.Cleanup(func() {
				_ = srv.Close()
				if err := <-done; !errors.Is(err, wire.ErrServerClosed) {
					t.Errorf("Serve returned %v, want ErrServerClosed", err)
				}
			})
			tc.listenerAddrs[l] = append(tc.listenerAddrs[l], ln.Addr().String())
			row.Listeners = append(row.Listeners, v1alpha1.ListenerAddress{Name: spec.name, Host: host, Port: int32(port)})
		}
		row.Host, row.Port = row.Listeners[0].Host, row.Listeners[0].Port
		tc.addrs = append(tc.addrs, tc.listenerAddrs[0][i])
		tc.rows = append(tc.rows, row)
	}
	tc.publish(nil)
	return tc
}

// newTestServer is a wire server for h, closed (and h with it) when the test ends.
func newTestServer(t testing.TB, h *Handler) *wire.Server {
	t.Helper()
	srv := newWireServer(h, DefaultBounds(), 0, h.Log)
	t.Cleanup(func() {
		_ = srv.Close() // always nil
		h.Close()
	})
	return srv
}

// publish puts the current rows and topics in the view.
func (tc *testCluster) publish(topics []cluster.Topic) {
	tc.view.Set(cluster.Snapshot{ClusterID: testClusterID, Brokers: tc.rows, Topics: topics})
}

// dialKafka opens a raw Kafka connection; the test speaks kmsg over it directly.
func dialKafka(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// roundTrip sends req on c and decodes the response of the same version.
func roundTrip(t *testing.T, c net.Conn, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := tryRoundTrip(c, req, 7)
	if err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

func tryRoundTrip(c net.Conn, req kmsg.Request, correlationID int32) (kmsg.Response, error) {
	if _, err := c.Write(appendRequestFrame(nil, req, correlationID)); err != nil {
		return nil, err
	}
	body, err := readResponseFrame(c, correlationID)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	if responseHeaderTagged(resp) {
		body = body[1:] // response header v1: one empty tag section
	}
	return resp, resp.ReadFrom(body)
}

// readResponseFrame reads one response and checks its correlation id; it returns what follows
// the correlation id.
func readResponseFrame(c net.Conn, correlationID int32) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, buf); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(buf)); got != correlationID {
		return nil, errors.New("correlation id " + strconv.Itoa(int(got)) + ", want " + strconv.Itoa(int(correlationID)))
	}
	return buf[4:], nil
}

// expectClosed asserts that the server closed c (a read sees EOF or a reset, not a timeout).
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(testkit.Deadline))
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open (read err %v), want it closed by the broker", err)
	}
}
