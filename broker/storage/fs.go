package storage

import (
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FS is the file-system seam every byte of this package goes through. The default is OSFS;
// tests wrap it with FaultFS to fail chosen operations (fsync errors, EIO, ENOSPC, short
// writes) without mocking any of this package's own types, and run the package on NFSSim, a
// file system with a network file system's caching (docs/storage.md, "What the volume must
// provide").
type FS interface {
	// OpenFile opens name with the os.OpenFile flags (os.O_CREATE|os.O_EXCL is the atomic
	// exclusive create the producer-id allocator relies on).
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// ReadDirNames lists the names in dir, unsorted. On a network file system the answer may
	// be served from a cache: nothing that protects data rests on it.
	ReadDirNames(dir string) ([]string, error)
	MkdirAll(dir string) error
	Rename(oldpath, newpath string) error
	// Link gives the file oldpath the second name newpath, failing with fs.ErrExist if
	// newpath exists: an atomic, exclusive publication of a file whose content is complete
	// (the fence's claims rely on it).
	Link(oldpath, newpath string) error
	Remove(name string) error
	// SyncDir makes the directory's entries (creates, renames, removes) durable.
	SyncDir(dir string) error
}

// File is an open file. Reads and writes are positional, so a reader never moves a writer.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Sync makes every byte written so far, and the file's size, durable.
	Sync() error
	Truncate(size int64) error
	Size() (int64, error)
	Close() error
}

// OSFS is the real file system. Sync is fdatasync on Linux (data and size, not timestamps).
type OSFS struct{}

type osFile struct{ f *os.File }

func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (OSFS) ReadDirNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return names, err
}

func (OSFS) MkdirAll(dir string) error            { return os.MkdirAll(dir, 0o755) }
func (OSFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (OSFS) Link(oldpath, newpath string) error   { return os.Link(oldpath, newpath) }
func (OSFS) Remove(name string) error             { return os.Remove(name) }

func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (o osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o osFile) Sync() error                              { return datasync(o.f) }
func (o osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o osFile) Close() error                             { return o.f.Close() }

func (o osFile) Size() (int64, error) {
	st, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// writeFileAtomic replaces path with data durably: write a temporary file, fsync it, rename
// it over path, fsync the directory. A reader sees the old content or the new, never a mix.
// The temporary is named after the writer's epoch (tmpName), so a takeover can tell a newer
// writer's temporaries (it is stale itself) from a deposed or crashed one's (it removes them).
func writeFileAtomic(fsys FS, path string, data []byte, epoch int32) error {
	tmp := tmpName(path, epoch)
	if err := writeSynced(fsys, tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, data); err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}

// writeSynced opens path with flag and writes data into it durably (writeAndClose).
func writeSynced(fsys FS, path string, flag int, data []byte) error {
	f, err := fsys.OpenFile(path, flag, 0o644)
	if err != nil {
		return err
	}
	return writeAndClose(f, data)
}

// writeAndClose writes data at the start of f, fsyncs and closes it, and returns the first
// error.
func writeAndClose(f File, data []byte) error {
	var err error
	if len(data) > 0 {
		_, err = f.WriteAt(data, 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// largestClaimedEntry is the largest entry of names that is a canonical decimal no larger than
// limit and holds the note its claimer wrote ("<n> claimed by ..."), -1 if none: the fence's
// earlier format and the producer-id allocator both write such entries. Others are junk,
// reported to junk and skipped.
func largestClaimedEntry(fsys FS, dir string, names []string, limit int64, junk func(name, why string), skip func(content []byte) bool) (int64, error) {
	top := int64(-1)
	for _, name := range names {
		n, ok := parseDecimal(name)
		if !ok || n <= top {
			continue
		}
		if n > limit {
			junk(name, "a number beyond what any claim writes")
			continue
		}
		b, err := readPrefix(fsys, filepath.Join(dir, name), 256)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if !strings.HasPrefix(string(b), name+" claimed by ") {
			junk(name, "an entry no claim wrote")
			continue
		}
		if skip != nil && skip(b) {
			continue
		}
		top = n
	}
	return top, nil
}

// tmpName is the temporary writeFileAtomic uses for path: "<path>.<epoch>.tmp".
func tmpName(path string, epoch int32) string {
	return path + "." + strconv.FormatInt(int64(epoch), 10) + tmpSuffix
}

// parseTmpEpoch returns the writer epoch of a temporary's name.
func parseTmpEpoch(name string) (int32, bool) {
	s, ok := strings.CutSuffix(name, tmpSuffix)
	if !ok {
		return 0, false
	}
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return 0, false
	}
	n, ok := parseDecimal(s[i+1:])
	if !ok || n > math.MaxInt32 {
		return 0, false
	}
	return int32(n), true
}

// readFile reads a whole (small) file.
func readFile(fsys FS, path string) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: a close error loses nothing
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && (!errors.Is(err, io.EOF) || int64(n) != size) {
		return nil, err
	}
	return buf[:n], nil
}
