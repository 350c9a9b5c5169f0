package brokertest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client is a franz-go client seeded with every broker of the cluster, closed when the test
// ends.
func (c *Cluster) Client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// Conn is a raw Kafka connection to one broker that sends requests at exactly the version
// they are set to (a client library would negotiate it): for the error cases and version
// rules a client never exercises.
type Conn struct {
	t    testing.TB
	nc   net.Conn
	fmt  *kmsg.RequestFormatter
	next int32
}

// Dial opens a raw connection to addr, closed when the test ends. Every read and write has a
// 30 s deadline.
func Dial(t testing.TB, addr string) *Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &Conn{t: t, nc: nc, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("brokertest"))}
}

// Request sends req and returns the answer, failing the test if there is none.
func (c *Conn) Request(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	resp, err := c.Try(req)
	if err != nil {
		c.t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// Try sends req and reads its answer; ErrNoAnswer when the broker closed the connection.
func (c *Conn) Try(req kmsg.Request) (kmsg.Response, error) {
	corr, err := c.Send(req)
	if err != nil {
		return nil, err
	}
	return c.Read(req, corr)
}

// Send writes req without reading an answer (Produce with acks=0 gets none) and returns its
// correlation id.
func (c *Conn) Send(req kmsg.Request) (int32, error) {
	c.next++
	corr := c.next
	if err := c.nc.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return 0, err
	}
	if _, err := c.nc.Write(c.fmt.AppendRequest(nil, req, corr)); err != nil {
		return 0, err
	}
	return corr, nil
}

// Read reads the answer to req sent with correlation id corr.
func (c *Conn) Read(req kmsg.Request, corr int32) (kmsg.Response, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
			return nil, ErrNoAnswer
		}
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.nc, buf); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(buf)); got != corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	body := buf[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() && resp.Key() != 18 { // response header v1 has a tag section (never ApiVersions)
		body = body[1:]
	}
	return resp, resp.ReadFrom(body)
}

// Closed reports whether the broker closed the connection within wait (a read returns end of
// file or a reset instead of timing out).
func (c *Conn) Closed(wait time.Duration) bool {
	if err := c.nc.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return true
	}
	var b [1]byte
	_, err := c.nc.Read(b[:])
	var ne net.Error
	return err != nil && (!errors.As(err, &ne) || !ne.Timeout())
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && ne.Op == "read"
}
