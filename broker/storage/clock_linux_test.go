package storage

import (
	"syscall"
	"unsafe"
)

// monotonicNow reads CLOCK_MONOTONIC, which all processes on the machine share, so events
// recorded by different child processes can be ordered.
func monotonicNow() int64 {
	var ts syscall.Timespec
	const clockMonotonic = 1
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic(errno)
	}
	return ts.Nano()
}
