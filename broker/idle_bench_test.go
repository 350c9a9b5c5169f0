package broker_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// idleClientEnv makes the test binary an idle-connection client (TestMain-free: the helper
// test below) holding connections to the address it names.
const idleClientEnv = "PADDOCK_IDLE_CLIENT"

// BenchmarkIdleConnections measures what an idle connection costs a broker: 15,000
// connections, each having sent one ApiVersions request and read its answer, held open by a
// child process (so the client's own sockets are not in the broker's memory). Reported: RSS
// per connection (the aim is ≤ 8 KB), after a GC has returned freed memory to the system; and,
// in the same run, the same for the floor a Go server pays per connection (a goroutine
// parked in a read and its socket: bareServer), the baseline hack/benchreport divides by.
func BenchmarkIdleConnections(b *testing.B) {
	const conns = 15_000
	raiseFileLimit(b, conns+1000)
	discard := logr.Discard()
	c := brokertest.Start(b, brokertest.Options{Log: &discard})
	bare := bareServer(b)
	var perConn, floor float64
	for range b.N {
		perConn = idleRSSPerConn(b, c.Addrs()[0], conns)
		floor = idleRSSPerConn(b, bare, conns)
	}
	b.ReportMetric(perConn, "B_rss/idle_conn")
	b.ReportMetric(floor, "B_rss/idle_conn_go_floor")
}

// idleRSSPerConn is the growth of this process's RSS per connection while a child process
// holds conns idle connections to addr.
func idleRSSPerConn(b *testing.B, addr string, conns int) float64 {
	before := settledRSS()
	child := exec.Command(os.Args[0], "-test.run=^TestIdleClientHelper$")
	child.Env = append(os.Environ(), idleClientEnv+"="+addr+","+strconv.Itoa(conns))
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = child.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready") {
		b.Fatalf("idle client: %q %v", line, err)
	}
	return float64(settledRSS()-before) / float64(conns)
}

// bareServer is the least a Go server can hold per connection: it answers each request with
// an empty frame (its correlation id only) from a goroutine that reads into a 4-byte array
// between requests. It runs until the benchmark ends and returns its address.
func bareServer(b *testing.B) string {
	ln := testkit.Listen(b)
	b.Cleanup(func() { _ = ln.Close() })
	serveConn := func(c net.Conn) {
		defer func() { _ = c.Close() }()
		var head [4]byte
		for {
			if _, err := io.ReadFull(c, head[:]); err != nil {
				return
			}
			body := make([]byte, binary.BigEndian.Uint32(head[:]))
			if _, err := io.ReadFull(c, body); err != nil || len(body) < 8 {
				return
			}
			answer := binary.BigEndian.AppendUint32(nil, 4)
			if _, err := c.Write(append(answer, body[4:8]...)); err != nil {
				return
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveConn(c)
		}
	}()
	return ln.Addr().String()
}

// settledRSS is the process's resident set once the heap is collected and freed memory
// returned, and idle connection stacks have had GCs to shrink.
func settledRSS() int64 {
	for range 3 {
		runtime.GC()
	}
	debug.FreeOSMemory()
	time.Sleep(200 * time.Millisecond)
	return rss()
}

func raiseFileLimit(b *testing.B, n uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Cur < n {
		lim.Cur = min(n, lim.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < n {
			b.Skipf("RLIMIT_NOFILE %d (hard %d) is below the %d files needed: %v", lim.Cur, lim.Max, n, err)
		}
	}
}

// TestIdleClientHelper is BenchmarkIdleConnections' client: run with idleClientEnv set, it
// opens the connections, sends each one ApiVersions, reads the answers, prints "ready" and
// holds them until its standard input closes. Without it, it does nothing.
func TestIdleClientHelper(t *testing.T) {
	spec := os.Getenv(idleClientEnv)
	if spec == "" {
		return
	}
	addr, nStr, _ := strings.Cut(spec, ",")
	n, _ := strconv.Atoi(nStr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	frame := binary.BigEndian.AppendUint32(nil, 0)
	frame = binary.BigEndian.AppendUint16(frame, 18)
	frame = binary.BigEndian.AppendUint16(frame, 3)
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = binary.BigEndian.AppendUint16(frame, 4)
	frame = append(frame, "idle"...)
	frame = append(frame, 0) // header tags
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	held := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("after %d connections: %v", len(held), err)
		}
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range held {
		_ = c.Close()
	}
}
