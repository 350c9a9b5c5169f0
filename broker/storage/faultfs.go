package storage

import (
	"os"
)

// Op names a file-system operation for FaultFS.
type Op string

// The operations FaultFS can fail.
const (
	OpOpen     Op = "open"
	OpRead     Op = "read"
	OpWrite    Op = "write"
	OpSync     Op = "sync"
	OpTruncate Op = "truncate"
	OpReadDir  Op = "readdir"
	OpMkdir    Op = "mkdir"
	OpRename   Op = "rename"
	OpLink     Op = "link"
	OpRemove   Op = "remove"
	OpSyncDir  Op = "syncdir"
)

// FaultFS is the fault-injection seam: it wraps an FS and asks Fault before every operation.
// A non-nil error fails that operation. A failed write is torn: the first half of the buffer
// is written before the error is returned, as a disk that fills up mid-write does. It exists
// for tests (here and in packages built on this one); production uses OSFS.
type FaultFS struct {
	FS FS
	// Fault is called with the operation and the path it touches; it must be safe for
	// concurrent use. Nil injects nothing.
	Fault func(op Op, path string) error
}

func (f FaultFS) fault(op Op, path string) error {
	if f.Fault == nil {
		return nil
	}
	if err := f.Fault(op, path); err != nil {
		return &os.PathError{Op: string(op), Path: path, Err: err}
	}
	return nil
}

func (f FaultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := f.fault(OpOpen, name); err != nil {
		return nil, err
	}
	inner, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return faultFile{inner: inner, fs: f, name: name}, nil
}

func (f FaultFS) ReadDirNames(dir string) ([]string, error) {
	if err := f.fault(OpReadDir, dir); err != nil {
		return nil, err
	}
	return f.FS.ReadDirNames(dir)
}

func (f FaultFS) MkdirAll(dir string) error {
	if err := f.fault(OpMkdir, dir); err != nil {
		return err
	}
	return f.FS.MkdirAll(dir)
}

func (f FaultFS) Rename(oldpath, newpath string) error {
	if err := f.fault(OpRename, newpath); err != nil {
		return err
	}
	return f.FS.Rename(oldpath, newpath)
}

func (f FaultFS) Link(oldpath, newpath string) error {
	if err := f.fault(OpLink, newpath); err != nil {
		return err
	}
	return f.FS.Link(oldpath, newpath)
}

func (f FaultFS) Remove(name string) error {
	if err := f.fault(OpRemove, name); err != nil {
		return err
	}
	return f.FS.Remove(name)
}

func (f FaultFS) SyncDir(dir string) error {
	if err := f.fault(OpSyncDir, dir); err != nil {
		return err
	}
	return f.FS.SyncDir(dir)
}

type faultFile struct {
	inner File
	fs    FaultFS
	name  string
}

func (f faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.fault(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.inner.ReadAt(p, off)
}

func (f faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.fault(OpWrite, f.name); err != nil {
		n, _ := f.inner.WriteAt(p[:len(p)/2], off)
		return n, err
	}
	return f.inner.WriteAt(p, off)
}

func (f faultFile) Sync() error {
	if err := f.fs.fault(OpSync, f.name); err != nil {
		return err
	}
	return f.inner.Sync()
}

func (f faultFile) Truncate(size int64) error {
	if err := f.fs.fault(OpTruncate, f.name); err != nil {
		return err
	}
	return f.inner.Truncate(size)
}

func (f faultFile) Size() (int64, error) { return f.inner.Size() }
func (f faultFile) Close() error         { return f.inner.Close() }
