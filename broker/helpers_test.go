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
)

// testCluster is n in-process brokers, each a Server on its own loopback listener, sharing
// one in-memory view whose rows point at those listeners — so a real client can follow any
// address an answer gives it.
type testCluster struct {
	view  *MemoryView
	addrs []string
	rows  []v1alpha1.BrokerRow
}

const testClusterID = "cZ4mKx7zQd2cWq0b3nT9fA"

func newTestCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	tc := &testCluster{view: NewMemoryView(Snapshot{})}
	for i := range n {
		ln := listenLoopback(t)
		host, portStr, _ := net.SplitHostPort(ln.Addr().String())
		port, _ := strconv.Atoi(portStr)
		srv := &Server{View: tc.view, Self: int32(i), Log: testr.New(t).WithValues("broker", i)}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		t.Cleanup(func() {
			srv.Close()
			if err := <-done; !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve returned %v, want ErrServerClosed", err)
			}
		})
		tc.addrs = append(tc.addrs, ln.Addr().String())
		tc.rows = append(tc.rows, v1alpha1.BrokerRow{
			ID: int32(i), Host: host, Port: int32(port), Rack: "zone-" + strconv.Itoa(i%2),
			State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive,
		})
	}
	tc.publish(nil)
	return tc
}

// publish puts the current rows and topics in the view.
func (tc *testCluster) publish(topics []Topic) {
	tc.view.Set(Snapshot{ClusterID: testClusterID, Brokers: tc.rows, Topics: topics})
}

// dialKafka opens a raw Kafka connection; the test speaks kmsg over it directly.
func dialKafka(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
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
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open (read err %v), want it closed by the broker", err)
	}
}
