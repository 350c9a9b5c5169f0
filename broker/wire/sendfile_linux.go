package wire

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// sendFileSyscall sends n bytes of f from off to the socket sc with sendfile(2), waiting for
// the socket to take more through the runtime's poller (the write deadline applies). handled
// is false, with what was sent so far, when the kernel will not sendfile from this file (the
// caller copies the rest).
func sendFileSyscall(sc syscall.Conn, f *os.File, off, n int64) (sent int64, err error, handled bool) {
	out, err := sc.SyscallConn()
	if err != nil {
		return 0, nil, false
	}
	in, err := f.SyscallConn()
	if err != nil {
		return 0, nil, false
	}
	handled = true
	var werr, serr error
	cerr := in.Control(func(infd uintptr) {
		werr = out.Write(func(outfd uintptr) bool {
			for sent < n {
				pos := off + sent
				w, err := syscall.Sendfile(int(outfd), int(infd), &pos, int(min(n-sent, 1<<30)))
				if w > 0 {
					sent += int64(w)
				}
				switch {
				case errors.Is(err, syscall.EAGAIN):
					return false // the socket is full: wait until it is writable
				case errors.Is(err, syscall.EINTR):
				case sent == 0 && (errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS)):
					handled = false // no sendfile from this file: copy it
					return true
				case err != nil:
					serr = err
					return true
				case w == 0:
					serr = io.ErrUnexpectedEOF // the file is shorter than the answer says
					return true
				}
			}
			return true
		})
	})
	// out.Write's own error (a deadline, a closed connection) wins over sendfile's.
	for _, e := range []error{serr, cerr} {
		if werr == nil {
			werr = e
		}
	}
	return sent, werr, handled
}
