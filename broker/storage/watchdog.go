package storage

import (
	"errors"
	"os"
	"sync"
	"time"
)

// DefaultIOTimeout is how long a file-system call may take before it counts as failed.
const DefaultIOTimeout = 10 * time.Second

// ErrIOTimeout: a file-system call (an fsync, a fence check, a listing, a read or a write)
// did not return within the bound (Options.IOTimeout). On a network file system mounted
// `hard` a call to an unreachable server blocks forever instead of failing; the log treats it
// as the failure it is: the partition stops with a *StorageError wrapping ErrIOTimeout
// (KAFKA_STORAGE_ERROR), and the call goes on in the background until the system returns it.
var ErrIOTimeout = errors.New("file-system call did not return in time")

// WatchdogFS bounds every call of fsys (and of the files it opens) to limit: a call that has
// not returned by then fails with ErrIOTimeout, wrapped in an *os.PathError naming the
// operation, while it goes on in the background (a file it opens then is closed). Logs wrap
// their FS with it (Options.IOTimeout); other users of the volume (producer ids, the group
// store) can too. limit ≤ 0 returns fsys unchanged.
func WatchdogFS(fsys FS, limit time.Duration) FS {
	if limit <= 0 {
		return fsys
	}
	if w, ok := fsys.(watchdogFS); ok && w.limit == limit {
		return w
	}
	return watchdogFS{fs: fsys, limit: limit}
}

type watchdogFS struct {
	fs    FS
	limit time.Duration
}

// watch runs call with the bound. The call runs on its own goroutine so that the caller gets
// its answer when the bound passes even if the call never returns; abandon disposes of a
// result that arrives after the caller gave up.
func watch[T any](limit time.Duration, op Op, path string, call func() (T, error), abandon func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	var (
		mu     sync.Mutex
		gaveUp bool
	)
	done := make(chan result, 1)
	go func() {
		v, err := call()
		mu.Lock()
		defer mu.Unlock()
		if gaveUp {
			if err == nil && abandon != nil {
				abandon(v)
			}
			return
		}
		done <- result{v, err}
	}()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-t.C:
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case r := <-done: // it returned just as the bound passed
		return r.v, r.err
	default:
	}
	gaveUp = true
	var zero T
	return zero, &os.PathError{Op: string(op), Path: path, Err: ErrIOTimeout}
}

func watchErr(limit time.Duration, op Op, path string, call func() error) error {
	_, err := watch(limit, op, path, func() (struct{}, error) { return struct{}{}, call() }, nil)
	return err
}

func (w watchdogFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := watch(w.limit, OpOpen, name, func() (File, error) { return w.fs.OpenFile(name, flag, perm) }, func(f File) { _ = f.Close() })
	if err != nil {
		return nil, err
	}
	return watchdogFile{f: f, limit: w.limit, name: name}, nil
}

func (w watchdogFS) ReadDirNames(dir string) ([]string, error) {
	return watch(w.limit, OpReadDir, dir, func() ([]string, error) { return w.fs.ReadDirNames(dir) }, nil)
}

func (w watchdogFS) MkdirAll(dir string) error {
	return watchErr(w.limit, OpMkdir, dir, func() error { return w.fs.MkdirAll(dir) })
}

func (w watchdogFS) Rename(oldpath, newpath string) error {
	return watchErr(w.limit, OpRename, newpath, func() error { return w.fs.Rename(oldpath, newpath) })
}

func (w watchdogFS) Link(oldpath, newpath string) error {
	return watchErr(w.limit, OpLink, newpath, func() error { return w.fs.Link(oldpath, newpath) })
}

func (w watchdogFS) Remove(name string) error {
	return watchErr(w.limit, OpRemove, name, func() error { return w.fs.Remove(name) })
}

func (w watchdogFS) SyncDir(dir string) error {
	return watchErr(w.limit, OpSyncDir, dir, func() error { return w.fs.SyncDir(dir) })
}

type watchdogFile struct {
	f     File
	limit time.Duration
	name  string
}

// OSFile passes on the operating system's file behind w (OSFileOf), so a Fetch still sends
// its records with sendfile; that send is bounded by the connection's write deadline, not by
// the watchdog (docs/bounds.md, "Answers").
func (w watchdogFile) OSFile() *os.File { return OSFileOf(w.f) }

func (w watchdogFile) ReadAt(p []byte, off int64) (int, error) {
	return watch(w.limit, OpRead, w.name, func() (int, error) { return w.f.ReadAt(p, off) }, nil)
}

func (w watchdogFile) WriteAt(p []byte, off int64) (int, error) {
	return watch(w.limit, OpWrite, w.name, func() (int, error) { return w.f.WriteAt(p, off) }, nil)
}

func (w watchdogFile) Sync() error {
	return watchErr(w.limit, OpSync, w.name, w.f.Sync)
}

func (w watchdogFile) Truncate(size int64) error {
	return watchErr(w.limit, OpTruncate, w.name, func() error { return w.f.Truncate(size) })
}

func (w watchdogFile) Size() (int64, error) {
	return watch(w.limit, "stat", w.name, w.f.Size, nil)
}

func (w watchdogFile) Close() error {
	return watchErr(w.limit, "close", w.name, w.f.Close)
}
