package storage

import (
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// NFSSim is an in-memory file system with a network file system's semantics, for tests: one
// server and any number of clients (Client), each an FS standing for one node's mount. It
// models what the storage rules must survive on NFS (docs/storage.md, "What the volume must
// provide"):
//
//   - directory listings are served from a per-client cache up to Staleness old (a client's
//     own changes to a directory refresh its cache, as a Linux client's do);
//   - "no such file" is cached too: an open that found nothing keeps finding nothing for up
//     to Staleness, though another client has created the name since (exclusive creates,
//     links and renames ask the server and refresh the cache);
//   - close-to-open data: a client sees another client's writes only when it opens the file
//     after they were flushed (the writer's close or fsync, or its background writeback);
//     until its next open of the file it reads its cache — the file as it was then, plus its
//     own writes — and an attribute (Size) is as stale;
//   - a write reaches the server unstable and is committed only by the fsync of the client
//     that wrote it: CrashServer loses every uncommitted write of a client that is gone
//     (Crash), while a live client resends its own, as NFS clients do;
//   - a file another client removed reads as ESTALE through a handle opened before;
//   - metadata operations (create, link, rename, remove, mkdir) are synchronous on the server,
//     and exclusive create and link are atomic there.
//
// NFSSim is safe for concurrent use.
type NFSSim struct {
	mu        sync.Mutex
	staleness time.Duration
	writeback float64
	nocto     bool
	now       func() time.Time
	rng       *rand.Rand // guarded by mu
	inodes    map[uint64]*simInode
	dirs      map[string]*simDir
	nextIno   uint64
	clients   []*NFSClient
	crashes   int // server crashes so far
}

// NFSSimOptions configure an NFSSim.
type NFSSimOptions struct {
	// Staleness is how old a cached listing or negative lookup may be. 0 means 30ms.
	Staleness time.Duration
	// Writeback is the chance that a write is flushed to the server (unstable) at once, as
	// a client's background writeback does; otherwise it waits for a close or fsync.
	Writeback float64
	// Seed makes the cache refresh and writeback choices reproducible.
	Seed uint64
	// Now is the clock (time.Now when nil; a synctest bubble's fake clock then too).
	Now func() time.Time
	// NoCloseToOpen makes an open trust the client's cached copy of a file instead of
	// revalidating it, as a mount with nocto does: a file stays as this client last saw it.
	NoCloseToOpen bool
}

type simInode struct {
	ino       uint64
	data      []byte     // what the server holds now, committed or not
	stable    []byte     // what survives a server crash
	pending   []simWrite // writes not yet committed, in order
	change    uint64     // the change attribute: bumps with every change of data
	nlink     int
	removedBy int // the client whose remove or rename took its last name (-1 while linked)
}

type simWrite struct {
	client int
	off    int64
	b      []byte
}

type simDir struct {
	entries map[string]uint64 // name → inode; 0 for a subdirectory
}

// NewNFSSim returns an empty simulated server.
func NewNFSSim(o NFSSimOptions) *NFSSim {
	if o.Staleness <= 0 {
		o.Staleness = 30 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &NFSSim{
		staleness: o.Staleness, writeback: o.Writeback, now: o.Now, nocto: o.NoCloseToOpen,
		rng:    rand.New(rand.NewPCG(o.Seed, 0x6e6673)),
		inodes: map[uint64]*simInode{}, dirs: map[string]*simDir{"/": {entries: map[string]uint64{}}}, nextIno: 1,
	}
}

// Client returns a new client: one more node mounting the server.
func (s *NFSSim) Client() *NFSClient {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &NFSClient{sim: s, id: len(s.clients), lists: map[string]simList{}, neg: map[string]time.Time{}, files: map[uint64]*clientFile{}}
	s.clients = append(s.clients, c)
	return c
}

// CrashServer is a server crash and restart: every write not committed is lost, except those a
// live client still holds and will send again.
func (s *NFSSim) CrashServer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.crashes++
	for _, in := range s.inodes {
		for _, w := range in.pending {
			if c := s.clients[w.client]; !c.dead {
				if cf := c.files[in.ino]; cf != nil {
					cf.dirty = append(cf.dirty, w) // resent at its next flush
				}
			}
		}
		in.pending = nil
		in.data = slices.Clone(in.stable)
		in.change++
	}
}

// ServerCrashes is how many times CrashServer ran.
func (s *NFSSim) ServerCrashes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.crashes
}

func (s *NFSSim) parent(path string) (*simDir, string) {
	return s.dirs[filepath.Dir(path)], filepath.Base(path)
}

func (s *NFSSim) lookup(path string) (uint64, bool) {
	d, name := s.parent(path)
	if d == nil {
		return 0, false
	}
	ino, ok := d.entries[name]
	return ino, ok && ino != 0
}

func (s *NFSSim) unlinkLocked(d *simDir, name string, by int) {
	if ino := d.entries[name]; ino != 0 {
		in := s.inodes[ino]
		in.nlink--
		if in.nlink == 0 {
			in.removedBy = by
		}
	}
	delete(d.entries, name)
}

// NFSClient is one node's mount of an NFSSim: an FS.
type NFSClient struct {
	sim   *NFSSim
	id    int
	dead  bool                   // guarded by sim.mu
	lists map[string]simList     // cached listings by directory; guarded by sim.mu
	neg   map[string]time.Time   // cached "no such file" by path; guarded by sim.mu
	files map[uint64]*clientFile // cached file data by inode; guarded by sim.mu
}

type simList struct {
	names []string
	until time.Time // served until then
}

// clientFile is a client's cache of one file: the data as it last saw it plus its own
// writes, the writes not yet flushed to the server, and the change attribute it saw.
type clientFile struct {
	data   []byte
	dirty  []simWrite
	seen   uint64
	loaded bool // data has been read from the server at least once
}

// Crash is the client's node dying: its unflushed writes are gone, and every later call fails
// with EIO (whatever still runs on it is cut off from the volume).
func (c *NFSClient) Crash() {
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	c.dead = true
	c.files = map[uint64]*clientFile{}
}

func pathErr(op, path string, err error) error { return &fs.PathError{Op: op, Path: path, Err: err} }

func (c *NFSClient) check(op, path string) error {
	if c.dead {
		return pathErr(op, path, syscall.EIO)
	}
	return nil
}

// refresh invalidates the client's caches of path's directory and of path itself, after a
// change it made there.
func (c *NFSClient) refresh(path string) {
	delete(c.lists, filepath.Dir(filepath.Clean(path)))
	delete(c.neg, filepath.Clean(path))
}

func (c *NFSClient) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	s := c.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.check("open", name); err != nil {
		return nil, err
	}
	name = filepath.Clean(name)
	d, base := s.parent(name)
	if d == nil {
		return nil, pathErr("open", name, syscall.ENOENT)
	}
	ino, exists := d.entries[base]
	if exists && ino == 0 {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	switch {
	case flag&os.O_CREATE != 0: // asks the server whatever the cache says
		c.refresh(name)
		if exists && flag&os.O_EXCL != 0 {
			return nil, pathErr("open", name, syscall.EEXIST)
		}
		if !exists {
			ino = s.nextIno
			s.nextIno++
			s.inodes[ino] = &simInode{ino: ino, nlink: 1, removedBy: -1}
			d.entries[base] = ino
		}
	default:
		if until, ok := c.neg[name]; ok && s.now().Before(until) {
			return nil, pathErr("open", name, syscall.ENOENT)
		}
		if !exists {
			c.neg[name] = s.now().Add(time.Duration(s.rng.Int64N(int64(s.staleness))))
			return nil, pathErr("open", name, syscall.ENOENT)
		}
	}
	in := s.inodes[ino]
	if flag&os.O_TRUNC != 0 {
		c.truncateLocked(in, 0)
	}
	cf := c.files[ino]
	if cf == nil {
		cf = &clientFile{seen: in.change - 1}
		c.files[ino] = cf
	}
	if cf.seen != in.change && (!s.nocto || !cf.loaded) { // close-to-open: the open revalidates
		cf.data = slices.Clone(in.data)
		for _, w := range cf.dirty {
			cf.data = writeAt(cf.data, w.off, w.b)
		}
		cf.seen, cf.loaded = in.change, true
	}
	return &simFile{c: c, in: in, name: name}, nil
}

// writeAt writes b at off into data, growing it (with zeros) as needed.
func writeAt(data []byte, off int64, b []byte) []byte {
	if end := off + int64(len(b)); end > int64(len(data)) {
		data = append(data, make([]byte, end-int64(len(data)))...)
	}
	copy(data[off:], b)
	return data
}

func (c *NFSClient) flushLocked(in *simInode) {
	cf := c.files[in.ino]
	if cf == nil || len(cf.dirty) == 0 {
		return
	}
	for _, w := range cf.dirty {
		in.data = writeAt(in.data, w.off, w.b)
		in.pending = append(in.pending, w)
	}
	cf.dirty = nil
	in.change++
	cf.seen = in.change
}

func (c *NFSClient) commitLocked(in *simInode) {
	c.flushLocked(in)
	keep := in.pending[:0]
	for _, w := range in.pending {
		if w.client == c.id {
			in.stable = writeAt(in.stable, w.off, w.b)
		} else {
			keep = append(keep, w)
		}
	}
	in.pending = keep
}

func (c *NFSClient) truncateLocked(in *simInode, size int64) {
	c.flushLocked(in)
	resize := func(b []byte) []byte {
		if int64(len(b)) >= size {
			return b[:size]
		}
		return append(b, make([]byte, size-int64(len(b)))...)
	}
	in.data, in.stable = resize(in.data), resize(in.stable)
	in.change++
	if cf := c.files[in.ino]; cf != nil {
		cf.data, cf.seen = slices.Clone(in.data), in.change
	}
}

func (c *NFSClient) ReadDirNames(dir string) ([]string, error) {
	s := c.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.check("readdir", dir); err != nil {
		return nil, err
	}
	dir = filepath.Clean(dir)
	if l, ok := c.lists[dir]; ok && s.now().Before(l.until) {
		return slices.Clone(l.names), nil
	}
	d := s.dirs[dir]
	if d == nil {
		if _, isFile := s.lookup(dir); isFile {
			return nil, pathErr("readdir", dir, syscall.ENOTDIR)
		}
		return nil, pathErr("readdir", dir, syscall.ENOENT)
	}
	var names []string
	for n := range d.entries {
		names = append(names, n)
	}
	slices.Sort(names)
	c.lists[dir] = simList{names: names, until: s.now().Add(time.Duration(s.rng.Int64N(int64(s.staleness))))}
	return slices.Clone(names), nil
}

func (c *NFSClient) MkdirAll(dir string) error {
	s := c.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.check("mkdir", dir); err != nil {
		return err
	}
	dir = filepath.Clean(dir)
	var missing []string
	for p := dir; s.dirs[p] == nil; p = filepath.Dir(p) {
		if _, isFile := s.lookup(p); isFile {
			return pathErr("mkdir", p, syscall.ENOTDIR)
		}
		missing = append(missing, p)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		p := missing[i]
		s.dirs[p] = &simDir{entries: map[string]uint64{}}
		parent, base := s.parent(p)
		parent.entries[base] = 0
		c.refresh(p)
	}
	return nil
}

func (c *NFSClient) Rename(oldpath, newpath string) error {
	s := c.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.check("rename", newpath); err != nil {
		return err
	}
	oldpath, newpath = filepath.Clean(oldpath), filepath.Clean(newpath)
	od, ob := s.parent(oldpath)
	nd, nb := s.parent(newpath)
	if od == nil || nd == nil {
		return pathErr("rename", oldpath, syscall.ENOENT)
	}
	ino, ok := od.entries[ob]
	if !ok || ino == 0 {
		return pathErr("rename", oldpath, syscall.ENOENT)
	}
	if cur, ok := nd.entries[nb]; ok && cur == 0 {
		return pathErr("rename", newpath, syscall.EISDIR)
	}
	s.unlinkLocked(nd, nb, c.id)
	delete(od.entries, ob)
	nd.entries[nb] = ino
	c.refresh(oldpath)
	c.refresh(newpath)
	return nil
}

func (c *NFSClient) Link(oldpath, newpath string) error {
	s := c.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.check("link", newpath); err != nil {
		return err
	}
	oldpath, newpath = filepath.Clean(oldpath), filepath.Clean(newpath)
	ino, ok := s.lookup(oldpath)
	if !ok {
		return pathErr("link", oldpath, syscall.ENOENT)
	}
	nd, nb := s.parent(newpath)
	if nd == nil {
		return pathErr("link", newpath, syscall.ENOENT)
	}
	c.refresh(newpath)
	if _, exists := nd.entries[nb]; exists {
		return pathErr("link", newpath, syscall.EEXIST)
	}
	nd.entries[nb] = ino
	s.inodes[ino].nlink++
	return nil
}

func (c *NFSClient) Remove(name string) error {
	s := c.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.check("remove", name); err != nil {
		return err
	}
	name = filepath.Clean(name)
	d, base := s.parent(name)
	if d == nil {
		return pathErr("remove", name, syscall.ENOENT)
	}
	ino, ok := d.entries[base]
	if !ok {
		return pathErr("remove", name, syscall.ENOENT)
	}
	if ino == 0 {
		if len(s.dirs[name].entries) > 0 {
			return pathErr("remove", name, syscall.ENOTEMPTY)
		}
		delete(s.dirs, name)
		delete(d.entries, base)
	} else {
		s.unlinkLocked(d, base, c.id)
	}
	c.refresh(name)
	return nil
}

// SyncDir does nothing: metadata operations are synchronous on the server.
func (c *NFSClient) SyncDir(dir string) error {
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	return c.check("syncdir", dir)
}

// simFile is an open file of a client: reads come from the client's cache of the file.
type simFile struct {
	c      *NFSClient
	in     *simInode
	name   string
	closed bool
}

// cache is the client's cache of the file (the client keeps it while any handle is open).
func (f *simFile) cache() *clientFile {
	cf := f.c.files[f.in.ino]
	if cf == nil {
		cf = &clientFile{data: slices.Clone(f.in.data), seen: f.in.change, loaded: true}
		f.c.files[f.in.ino] = cf
	}
	return cf
}

func (f *simFile) stale(op string) error {
	if err := f.c.check(op, f.name); err != nil {
		return err
	}
	if f.closed {
		return pathErr(op, f.name, os.ErrClosed)
	}
	if f.in.nlink == 0 && f.in.removedBy != f.c.id {
		return pathErr(op, f.name, syscall.ESTALE)
	}
	return nil
}

func (f *simFile) ReadAt(p []byte, off int64) (int, error) {
	s := f.c.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := f.stale("read"); err != nil {
		return 0, err
	}
	data := f.cache().data
	if off >= int64(len(data)) {
		return 0, io.EOF
	}
	n := copy(p, data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *simFile) WriteAt(p []byte, off int64) (int, error) {
	s := f.c.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := f.stale("write"); err != nil {
		return 0, err
	}
	w := simWrite{client: f.c.id, off: off, b: slices.Clone(p)}
	cf := f.cache()
	cf.data = writeAt(cf.data, off, p)
	cf.dirty = append(cf.dirty, w)
	if s.writeback > 0 && s.rng.Float64() < s.writeback {
		f.c.flushLocked(f.in)
	}
	return len(p), nil
}

func (f *simFile) Sync() error {
	s := f.c.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := f.stale("sync"); err != nil {
		return err
	}
	f.c.commitLocked(f.in)
	return nil
}

func (f *simFile) Truncate(size int64) error {
	s := f.c.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := f.stale("truncate"); err != nil {
		return err
	}
	f.c.truncateLocked(f.in, size)
	return nil
}

func (f *simFile) Size() (int64, error) {
	s := f.c.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := f.stale("stat"); err != nil {
		return 0, err
	}
	return int64(len(f.cache().data)), nil
}

// Close flushes the client's writes to the server (unstable: not committed).
func (f *simFile) Close() error {
	s := f.c.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, os.ErrClosed)
	}
	f.closed = true
	if f.c.dead {
		return pathErr("close", f.name, syscall.EIO)
	}
	f.c.flushLocked(f.in)
	return nil
}
