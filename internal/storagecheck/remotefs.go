package storagecheck

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/rpc"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/paddock-dev/paddock/broker/storage"
)

// checkDirPrefix is how CheckVolume names its work directory; the peer serves nothing else.
const checkDirPrefix = "paddock-storage-check-"

// wireErr is an error as it crosses the connection: the errno when there is one, so the
// checker's errors.Is(err, fs.ErrExist) and syscall.ESTALE tests see what the peer's file
// system said, io.EOF as itself, and the text otherwise.
type wireErr struct {
	Op, Path string
	Errno    int
	EOF      bool
	Msg      string
}

func toWire(err error) *wireErr {
	if err == nil {
		return nil
	}
	w := &wireErr{Msg: err.Error(), EOF: errors.Is(err, io.EOF)}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		w.Op, w.Path = pe.Op, pe.Path
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		w.Op, w.Path = le.Op, le.New
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		w.Errno = int(errno)
	}
	return w
}

func (w *wireErr) err() error {
	switch {
	case w == nil:
		return nil
	case w.EOF:
		return io.EOF
	case w.Errno != 0:
		return &fs.PathError{Op: "peer " + w.Op, Path: w.Path, Err: syscall.Errno(w.Errno)}
	}
	return errors.New("peer: " + w.Msg)
}

// Calls and answers of the FS service. Every answer carries Err; a Go error from the rpc
// package means the connection failed.
type (
	PathArgs struct{ Path string }
	TwoPaths struct{ Old, New string }
	OpenArgs struct {
		Path string
		Flag int
		Perm os.FileMode
	}
	FileArgs struct {
		Handle int64
		Off    int64
		N      int
		Data   []byte
	}
	Answer struct {
		Err    *wireErr
		Handle int64
		N      int
		Size   int64
		Data   []byte
		Names  []string
		Root   string
	}
	DoneArgs struct{ Summary string }
)

// peerFS is the service the peer registers: the storage.FS calls on its local file system,
// restricted to CheckVolume's work directories under root.
type peerFS struct {
	root string
	fsys storage.FS
	done chan string // receives the checker's summary once; the peer then exits

	mu    sync.Mutex
	next  int64
	files map[int64]storage.File // guarded by mu
}

func newPeerFS(root string, fsys storage.FS) *peerFS {
	return &peerFS{root: filepath.Clean(root), fsys: fsys, done: make(chan string, 1), files: map[int64]storage.File{}}
}

// allowed refuses a path outside a check work directory of root.
func (p *peerFS) allowed(path string) error {
	rel, err := filepath.Rel(p.root, filepath.Clean(path))
	if err != nil || !strings.HasPrefix(rel, checkDirPrefix) || strings.Contains(rel, "..") {
		return fmt.Errorf("%s is not in a storage check directory of %s: refused", path, p.root)
	}
	return nil
}

func (p *peerFS) file(h int64) (storage.File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.files[h]
	if !ok {
		return nil, fmt.Errorf("no open file %d", h)
	}
	return f, nil
}

func (p *peerFS) Root(_ struct{}, a *Answer) error { a.Root = p.root; return nil }

func (p *peerFS) OpenFile(args OpenArgs, a *Answer) error {
	if err := p.allowed(args.Path); err != nil {
		a.Err = toWire(err)
		return nil
	}
	f, err := p.fsys.OpenFile(args.Path, args.Flag, args.Perm)
	if err != nil {
		a.Err = toWire(err)
		return nil
	}
	p.mu.Lock()
	p.next++
	a.Handle = p.next
	p.files[a.Handle] = f
	p.mu.Unlock()
	return nil
}

func (p *peerFS) ReadAt(args FileArgs, a *Answer) error {
	f, err := p.file(args.Handle)
	if err == nil {
		buf := make([]byte, args.N)
		a.N, err = f.ReadAt(buf, args.Off)
		a.Data = buf[:a.N]
	}
	a.Err = toWire(err)
	return nil
}

func (p *peerFS) WriteAt(args FileArgs, a *Answer) error {
	f, err := p.file(args.Handle)
	if err == nil {
		a.N, err = f.WriteAt(args.Data, args.Off)
	}
	a.Err = toWire(err)
	return nil
}

func (p *peerFS) Sync(args FileArgs, a *Answer) error {
	f, err := p.file(args.Handle)
	if err == nil {
		err = f.Sync()
	}
	a.Err = toWire(err)
	return nil
}

func (p *peerFS) Truncate(args FileArgs, a *Answer) error {
	f, err := p.file(args.Handle)
	if err == nil {
		err = f.Truncate(args.Off)
	}
	a.Err = toWire(err)
	return nil
}

func (p *peerFS) Size(args FileArgs, a *Answer) error {
	f, err := p.file(args.Handle)
	if err == nil {
		a.Size, err = f.Size()
	}
	a.Err = toWire(err)
	return nil
}

func (p *peerFS) Close(args FileArgs, a *Answer) error {
	p.mu.Lock()
	f, ok := p.files[args.Handle]
	delete(p.files, args.Handle)
	p.mu.Unlock()
	if !ok {
		a.Err = toWire(fmt.Errorf("no open file %d", args.Handle))
		return nil
	}
	a.Err = toWire(f.Close())
	return nil
}

// pathCall runs op on a path the peer may touch.
func (p *peerFS) pathCall(a *Answer, op func() error, paths ...string) error {
	for _, path := range paths {
		if err := p.allowed(path); err != nil {
			a.Err = toWire(err)
			return nil
		}
	}
	a.Err = toWire(op())
	return nil
}

func (p *peerFS) ReadDirNames(args PathArgs, a *Answer) error {
	return p.pathCall(a, func() (err error) { a.Names, err = p.fsys.ReadDirNames(args.Path); return err }, args.Path)
}

func (p *peerFS) MkdirAll(args PathArgs, a *Answer) error {
	return p.pathCall(a, func() error { return p.fsys.MkdirAll(args.Path) }, args.Path)
}

func (p *peerFS) Remove(args PathArgs, a *Answer) error {
	return p.pathCall(a, func() error { return p.fsys.Remove(args.Path) }, args.Path)
}

func (p *peerFS) SyncDir(args PathArgs, a *Answer) error {
	return p.pathCall(a, func() error { return p.fsys.SyncDir(args.Path) }, args.Path)
}

func (p *peerFS) Rename(args TwoPaths, a *Answer) error {
	return p.pathCall(a, func() error { return p.fsys.Rename(args.Old, args.New) }, args.Old, args.New)
}

func (p *peerFS) Link(args TwoPaths, a *Answer) error {
	return p.pathCall(a, func() error { return p.fsys.Link(args.Old, args.New) }, args.Old, args.New)
}

// Done is the checker's last call: its summary, after which the peer exits.
func (p *peerFS) Done(args DoneArgs, a *Answer) error {
	select {
	case p.done <- args.Summary:
	default:
	}
	return nil
}

// servePeer serves fsys's check directories under root on l until the checker calls Done
// (its summary is sent on the returned channel) or l is closed.
func servePeer(l net.Listener, root string, fsys storage.FS) (*peerFS, error) {
	p := newPeerFS(root, fsys)
	srv := rpc.NewServer()
	if err := srv.RegisterName("FS", p); err != nil {
		return nil, err
	}
	go srv.Accept(l)
	return p, nil
}

// remoteFS is storage.FS on the peer's file system, through the connection.
type remoteFS struct{ c *rpc.Client }

type remoteFile struct {
	c *rpc.Client
	h int64
}

func (r remoteFS) call(method string, args any) (Answer, error) {
	var a Answer
	if err := r.c.Call("FS."+method, args, &a); err != nil {
		return a, fmt.Errorf("peer %s: %w", method, err)
	}
	return a, a.Err.err()
}

func (r remoteFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	a, err := r.call("OpenFile", OpenArgs{Path: name, Flag: flag, Perm: perm})
	if err != nil {
		return nil, err
	}
	return remoteFile{c: r.c, h: a.Handle}, nil
}

func (r remoteFS) ReadDirNames(dir string) ([]string, error) {
	a, err := r.call("ReadDirNames", PathArgs{dir})
	return a.Names, err
}

func (r remoteFS) MkdirAll(dir string) error { _, err := r.call("MkdirAll", PathArgs{dir}); return err }
func (r remoteFS) Remove(name string) error  { _, err := r.call("Remove", PathArgs{name}); return err }
func (r remoteFS) SyncDir(dir string) error  { _, err := r.call("SyncDir", PathArgs{dir}); return err }
func (r remoteFS) Rename(o, n string) error  { _, err := r.call("Rename", TwoPaths{o, n}); return err }
func (r remoteFS) Link(o, n string) error    { _, err := r.call("Link", TwoPaths{o, n}); return err }

func (f remoteFile) call(method string, args FileArgs) (Answer, error) {
	args.Handle = f.h
	return remoteFS{f.c}.call(method, args)
}

func (f remoteFile) ReadAt(p []byte, off int64) (int, error) {
	a, err := f.call("ReadAt", FileArgs{Off: off, N: len(p)})
	return copy(p, a.Data), err
}

func (f remoteFile) WriteAt(p []byte, off int64) (int, error) {
	a, err := f.call("WriteAt", FileArgs{Off: off, Data: p})
	return a.N, err
}

func (f remoteFile) Sync() error { _, err := f.call("Sync", FileArgs{}); return err }
func (f remoteFile) Truncate(size int64) error {
	_, err := f.call("Truncate", FileArgs{Off: size})
	return err
}
func (f remoteFile) Close() error { _, err := f.call("Close", FileArgs{}); return err }

func (f remoteFile) Size() (int64, error) {
	a, err := f.call("Size", FileArgs{})
	return a.Size, err
}
