package devcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The host link is how the environment reaches the host's network from inside its private
// network namespace. A socket belongs to the network namespace it was created in, whoever
// holds it later, so the process RunInPrivateNetwork leaves behind in the host's namespace
// (the parent) makes the host-side sockets and hands them over: it binds host loopback
// listeners (the forwarded apiserver port, one per nodePort) and dials host addresses, and
// passes the file descriptors to the environment over a Unix socket pair (SCM_RIGHTS). The
// environment then accepts and forwards on them itself. This works unprivileged too: entering
// the host's network namespace would need CAP_SYS_ADMIN there, passing a descriptor needs
// nothing. For the tests it also runs a command (kubectl, kcat) in the host's network, as a
// person at the host terminal would.
//
// Protocol: the control socket is SOCK_SEQPACKET. Each request is one message, a JSON
// hostRequest, carrying the descriptor of a fresh socket-pair end for the reply (and, for
// "run", the file the command's output goes to). The parent answers each request on its own
// goroutine with one hostReply message on that reply socket, with the listener's or
// connection's descriptor attached. A "run" request is cancelled by closing the reply socket.
//
// The child's end is marked close-on-exec at once: no process the environment starts (pods,
// control plane) inherits it.

// hostLinkEnv names the descriptor of the child's end of the host link.
const hostLinkEnv = "PADDOCK_DEV_HOST_LINK"

// hostRequest is one request over the host link.
type hostRequest struct {
	Op   string   `json:"op"` // "listen", "dial" or "run"
	Addr string   `json:"addr,omitempty"`
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
}

// hostReply answers a hostRequest: Error is empty on success; ExitCode is a "run"'s.
type hostReply struct {
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exitCode"`
}

// newHostLink makes the socket pair: the parent keeps the first end and passes the second
// to the child (its ExtraFiles[0], descriptor 3).
func newHostLink() (parent *net.UnixConn, child *os.File, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("host link socket pair: %w", err)
	}
	pf := os.NewFile(uintptr(fds[0]), "host-link")
	defer func() { _ = pf.Close() }()
	c, err := net.FileConn(pf)
	if err != nil {
		_ = syscall.Close(fds[1])
		return nil, nil, fmt.Errorf("host link: %w", err)
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "host-link-child"), nil
}

// serveHostLink answers the child's requests until the child closes its end (it exited).
func serveHostLink(c *net.UnixConn) {
	defer func() { _ = c.Close() }()
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return // the child is gone
		}
		fds := receivedFDs(oob[:oobn])
		var req hostRequest
		if len(fds) == 0 || json.Unmarshal(buf[:n], &req) != nil {
			closeAll(fds)
			continue // not ours to answer: without a reply socket there is no one to tell
		}
		go answerHost(req, fds)
	}
}

// answerHost runs one request in the host's network and replies on fds[0].
func answerHost(req hostRequest, fds []int) {
	conn, err := fdConn(fds[0])
	extra := fds[1:]
	if err != nil {
		closeAll(extra)
		return
	}
	r := hostReplier{conn}
	defer func() { _ = conn.Close() }()
	switch req.Op {
	case "listen":
		closeAll(extra)
		r.sendFile(hostListenFile(req.Addr))
	case "dial":
		closeAll(extra)
		r.sendFile(hostDialFile(req.Addr))
	case "run":
		if len(extra) != 1 || len(req.Argv) == 0 {
			closeAll(extra)
			r.fail(errors.New("run needs a command and an output file"))
			return
		}
		r.run(req, os.NewFile(uintptr(extra[0]), "output"))
	default:
		closeAll(extra)
		r.fail(fmt.Errorf("unknown host link operation %q", req.Op))
	}
}

// hostReplier answers one host link request on its reply socket.
type hostReplier struct{ conn *net.UnixConn }

// send writes the reply, passing fd along (and closing it here) when it is not nil.
func (h hostReplier) send(r hostReply, fd *os.File) {
	b, _ := json.Marshal(r)
	var rights []byte
	if fd != nil {
		rights = syscall.UnixRights(int(fd.Fd()))
		defer func() { _ = fd.Close() }()
	}
	_, _, _ = h.conn.WriteMsgUnix(b, rights, nil) // the child may have given up; nothing to do then
}

func (h hostReplier) fail(err error) { h.send(hostReply{Error: err.Error()}, nil) }

// sendFile passes f on, or the error that kept it from being made.
func (h hostReplier) sendFile(f *os.File, err error) {
	if err != nil {
		h.fail(err)
		return
	}
	h.send(hostReply{}, f)
}

// hostListenFile binds a TCP listener on addr in this (the host's) network and returns its
// descriptor as a file.
func hostListenFile(addr string) (*os.File, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = l.Close() }() // the child's copy keeps the socket open
	return l.(*net.TCPListener).File()
}

// hostDialFile connects to addr from this (the host's) network and returns the connection's
// descriptor as a file.
func hostDialFile(addr string) (*os.File, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }() // the child's copy keeps it open
	return conn.(*net.TCPConn).File()
}

// run runs req's command here with its output to out, until it exits or the child closes the
// reply socket (cancelled), and replies with its exit code.
func (h hostReplier) run(req hostRequest, out *os.File) {
	defer func() { _ = out.Close() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the child closes the reply socket to cancel
		_, _ = h.conn.Read(make([]byte, 1))
		cancel()
	}()
	cmd := exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = req.Env, req.Dir, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		h.send(hostReply{ExitCode: exitErr.ExitCode()}, nil)
	case err != nil:
		h.fail(err)
	default:
		h.send(hostReply{}, nil)
	}
}

// childLink is this process's end of the host link, opened on first use.
var childLink struct {
	once sync.Once
	conn *net.UnixConn
	err  error
}

func hostLinkConn() (*net.UnixConn, error) {
	childLink.once.Do(func() {
		v := os.Getenv(hostLinkEnv)
		fd, err := strconv.Atoi(v)
		if v == "" || err != nil {
			childLink.err = errors.New("no host link: reaching the host's network needs a process started by RunInPrivateNetwork")
			return
		}
		syscall.CloseOnExec(fd)
		c, err := fdConn(fd)
		if err != nil {
			childLink.err = fmt.Errorf("host link: %w", err)
			return
		}
		childLink.conn = c
	})
	return childLink.conn, childLink.err
}

// hostCall sends req with extra descriptors and waits for the reply, or for ctx.
func hostCall(ctx context.Context, req hostRequest, extra ...*os.File) (hostReply, *os.File, error) {
	link, err := hostLinkConn()
	if err != nil {
		return hostReply{}, nil, err
	}
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return hostReply{}, nil, fmt.Errorf("host link reply socket: %w", err)
	}
	reply, err := fdConn(pair[0])
	if err != nil {
		_ = syscall.Close(pair[1])
		return hostReply{}, nil, err
	}
	defer func() { _ = reply.Close() }()
	b, err := json.Marshal(req)
	if err != nil {
		_ = syscall.Close(pair[1])
		return hostReply{}, nil, err
	}
	fds := []int{pair[1]}
	for _, f := range extra {
		fds = append(fds, int(f.Fd()))
	}
	_, _, err = link.WriteMsgUnix(b, syscall.UnixRights(fds...), nil)
	_ = syscall.Close(pair[1]) // the parent has its own copy now
	if err != nil {
		return hostReply{}, nil, fmt.Errorf("host link %s: %w", req.Op, err)
	}
	// A deadline in the past wakes the read below; it cannot fail on an open socket.
	stop := context.AfterFunc(ctx, func() { _ = reply.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 4096)
	oob := make([]byte, syscall.CmsgSpace(4))
	n, oobn, _, _, err := reply.ReadMsgUnix(buf, oob)
	if err != nil {
		if ctx.Err() != nil {
			return hostReply{}, nil, fmt.Errorf("host link %s: %w", req.Op, ctx.Err())
		}
		return hostReply{}, nil, fmt.Errorf("host link %s: no reply (the host side exited?): %w", req.Op, err)
	}
	var r hostReply
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		closeAll(receivedFDs(oob[:oobn]))
		return hostReply{}, nil, fmt.Errorf("host link %s: bad reply: %w", req.Op, err)
	}
	var file *os.File
	if got := receivedFDs(oob[:oobn]); len(got) > 0 {
		file = os.NewFile(uintptr(got[0]), req.Op)
		closeAll(got[1:])
	}
	return r, file, nil
}

// HostListen binds a TCP listener on addr in the host's network namespace (outside the
// environment's private network), for the environment to accept on.
func HostListen(addr string) (net.Listener, error) {
	r, f, err := hostCall(context.Background(), hostRequest{Op: "listen", Addr: addr})
	if err != nil {
		return nil, err
	}
	if r.Error != "" || f == nil {
		return nil, fmt.Errorf("listen on %s in the host's network: %s", addr, r.Error)
	}
	defer func() { _ = f.Close() }()
	return net.FileListener(f)
}

// HostDial connects to addr from the host's network namespace: what a client at the host
// terminal reaches there. Its signature fits kgo.Dialer and net.Dialer.DialContext users.
func HostDial(ctx context.Context, network, addr string) (net.Conn, error) {
	if network != "tcp" && network != "tcp4" && network != "tcp6" {
		return nil, fmt.Errorf("host dial: network %q is not tcp", network)
	}
	r, f, err := hostCall(ctx, hostRequest{Op: "dial", Addr: addr})
	if err != nil {
		return nil, err
	}
	if r.Error != "" || f == nil {
		return nil, fmt.Errorf("dial %s from the host's network: %s", addr, r.Error)
	}
	defer func() { _ = f.Close() }()
	return net.FileConn(f)
}

// HostCommand runs name with args in the host's network namespace, with env as its whole
// environment, and returns its combined output; a non-zero exit is an error, as with
// exec.Cmd.CombinedOutput. Cancelling ctx kills the command.
func HostCommand(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	out, err := os.CreateTemp("", "paddock-host-command-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.Remove(out.Name()) }()
	defer func() { _ = out.Close() }()
	dir, _ := os.Getwd()
	r, _, err := hostCall(ctx, hostRequest{Op: "run", Argv: append([]string{name}, args...), Env: env, Dir: dir}, out)
	if err != nil {
		return nil, err
	}
	output, readErr := os.ReadFile(out.Name())
	switch {
	case r.Error != "":
		return output, fmt.Errorf("run %s in the host's network: %s", name, r.Error)
	case r.ExitCode != 0:
		return output, fmt.Errorf("%s (in the host's network): exit status %d", name, r.ExitCode)
	}
	return output, readErr
}

// receivedFDs are the descriptors passed in a control message (close-on-exec).
func receivedFDs(oob []byte) []int {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := syscall.ParseUnixRights(&m); err == nil {
			for _, fd := range got {
				syscall.CloseOnExec(fd)
			}
			fds = append(fds, got...)
		}
	}
	return fds
}

// fdConn wraps a socket descriptor as a *net.UnixConn, taking it over.
func fdConn(fd int) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), "unix")
	defer func() { _ = f.Close() }()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		_ = c.Close()
		return nil, errors.New("not a unix socket")
	}
	return uc, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		_ = syscall.Close(fd)
	}
}
