//go:build !linux

package wire

import (
	"os"
	"syscall"
)

// sendFileSyscall: sendfile with an explicit offset is used on Linux only; elsewhere file
// data is copied through a buffer.
func sendFileSyscall(syscall.Conn, *os.File, int64, int64) (int64, error, bool) { return 0, nil, false }
