package storage

import (
	"os"
	"syscall"
)

// datasync is fdatasync(2): it flushes the data and the metadata needed to read it back (the
// size), which is all an append-only segment needs, and skips the timestamp-only journal work
// of a full fsync.
func datasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
