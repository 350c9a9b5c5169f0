package groups

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/paddock-dev/paddock/broker/storage"
)

// store is one group's durable offsets at one claimed coordinator epoch: the group's fence
// and the append-only file named by that epoch (docs/groups.md "Takeover", "Commit").
//
// The rules that make it safe on a shared volume where a deposed coordinator may keep
// writing for a while:
//   - a coordinator claims the fence at epoch K before it reads anything, and writes only its
//     own file K, created exclusively; it never rewrites, renames over or truncates a file
//     another coordinator may own;
//   - file K starts with a complete snapshot of the state K inherited (read from the
//     highest-epoch file whose snapshot is complete), fsynced before K serves;
//   - a change is acknowledged only after its frame is durable AND the fence still holds K.
//
// So every change acknowledged at epoch E < K was durable before K's claim, and is in the file
// K reads (E's own, or a later one whose snapshot includes it). Writes E makes after K's
// snapshot land in file E, which no loader reads again. Writes E makes between K's claim and
// K's reading of file E may be included: they were never acknowledged, like a write whose
// coordinator died between fsync and answer, so an OffsetCommit that failed is "unknown",
// as in Kafka.
//
// A store is owned by its group's goroutine; it is not safe for concurrent use.
type store struct {
	fs    storage.FS
	dir   string
	id    string
	fence *storage.Fence
	epoch int32
	f     storage.File // file `epoch`, open for appending; nil until loaded
	end   int64        // where the next frame goes
	// failed is sticky: after a storage error or a lost fence nothing more is appended.
	failed error
}

// errNoGroup: the group has no directory, so no coordinator ever created it.
var errNoGroup = errors.New("group has no files")

// groupExists reports whether dir holds a group's files.
func groupExists(fsys storage.FS, dir string) (bool, error) {
	if _, err := fsys.ReadDirNames(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, storageErr("list group", err)
	}
	return true, nil
}

// openStore opens group id's directory under root, creating it (durably) when create is set;
// without create a missing directory is errNoGroup.
func openStore(fsys storage.FS, root, id string, create bool) (*store, error) {
	dir := filepath.Join(root, dirName(id))
	ok, err := groupExists(fsys, dir)
	if err != nil {
		return nil, err
	}
	if !ok {
		if !create {
			return nil, errNoGroup
		}
		if err := fsys.MkdirAll(filepath.Join(dir, fenceDirName)); err != nil {
			return nil, storageErr("create group", err)
		}
		// Make the new directories' entries durable: a claim that survives a crash must be
		// reachable from the root.
		for _, d := range []string{root, dir} {
			if err := fsys.SyncDir(d); err != nil {
				return nil, storageErr("create group", err)
			}
		}
	}
	fence, err := storage.OpenFence(fsys, filepath.Join(dir, fenceDirName))
	if err != nil {
		return nil, err
	}
	return &store{fs: fsys, dir: dir, id: id, fence: fence}, nil
}

// claim claims the fence at epoch. It fails with storage.ErrFenced when the fence already
// holds epoch or more.
func (s *store) claim(epoch int32) error {
	if err := s.fence.Claim(epoch); err != nil {
		return err
	}
	s.epoch = epoch
	return nil
}

// load makes the store serve at epoch, which the caller holds: it reads the durable state,
// makes sure file `epoch` exists with a complete snapshot (writing it when needed) and checks
// the fence. acked is -1 for a claim made just now; for a claim this process made earlier it
// is how much of its own file `epoch` it acknowledged, and the file is cut there.
func (s *store) load(epoch int32, acked int64) (*durable, error) {
	own := acked >= 0
	s.epoch = epoch
	files, err := s.listFiles()
	if err != nil {
		return nil, err
	}
	for _, e := range files {
		if e > epoch {
			// Only a claimer of e writes file e, so the fence is past us.
			return nil, &storage.FencedError{Epoch: epoch, Fence: e}
		}
	}
	if slices.Contains(files, epoch) {
		if !own {
			return nil, storageErr("load", fmt.Errorf("file %s exists before this coordinator created it", logName(epoch)))
		}
		st, err := s.resumeOwn(acked)
		if err != nil || st != nil {
			return st, err
		}
		// Our own earlier attempt died before its snapshot was complete: write it again.
	}
	st, src, err := s.best(files, epoch)
	if err != nil {
		return nil, err
	}
	if err := s.writeSnapshot(st, slices.Contains(files, epoch)); err != nil {
		return nil, err
	}
	if err := s.fence.Check(epoch); err != nil {
		return nil, err
	}
	s.prune(files, src)
	return st, nil
}

// resumeOwn reopens file s.epoch written by this process: replays it up to what was
// acknowledged (acked bytes) — cutting any tail: torn, or written but never acknowledged —
// and continues there. It returns nil state (no error) when the snapshot is incomplete.
func (s *store) resumeOwn(acked int64) (*durable, error) {
	f, err := s.fs.OpenFile(s.path(s.epoch), os.O_RDWR, 0)
	if err != nil {
		return nil, storageErr("open", err)
	}
	b, err := readAll(f)
	if err != nil {
		_ = f.Close()
		return nil, storageErr("read", err)
	}
	if int64(len(b)) > acked {
		b = b[:acked]
	}
	pf, err := parseFile(b)
	if errors.Is(err, errIncomplete) {
		_ = f.Close()
		return nil, nil
	}
	if err == nil && (pf.groupID != s.id || pf.epoch != s.epoch) {
		err = fmt.Errorf("file %s belongs to group %q epoch %d", logName(s.epoch), pf.groupID, pf.epoch)
	}
	if err != nil {
		_ = f.Close()
		return nil, storageErr("load", err)
	}
	if size, err := f.Size(); err != nil || pf.valid < size {
		if err := f.Truncate(pf.valid); err != nil {
			_ = f.Close()
			return nil, storageErr("cut torn tail", err)
		}
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return nil, storageErr("cut torn tail", err)
		}
	}
	if err := s.fence.Check(s.epoch); err != nil {
		_ = f.Close()
		return nil, err
	}
	s.f, s.end = f, pf.valid
	return pf.state, nil
}

// best reads the state inherited at epoch: the highest-epoch file below it whose snapshot is
// complete, replayed up to its first frame that does not check. src is that file's epoch, or
// -1 when there is none (a new group, or only incomplete files).
func (s *store) best(files []int32, epoch int32) (*durable, int32, error) {
	for i := len(files) - 1; i >= 0; i-- {
		e := files[i]
		if e >= epoch {
			continue
		}
		pf, err := s.readFile(e)
		if errors.Is(err, errIncomplete) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		return pf.state, e, nil
	}
	return newDurable(), -1, nil
}

// readFile parses file e (read-only: it may belong to a coordinator that is still writing).
func (s *store) readFile(e int32) (*parsedFile, error) {
	f, err := s.fs.OpenFile(s.path(e), os.O_RDONLY, 0)
	if err != nil {
		return nil, storageErr("open", err)
	}
	defer func() { _ = f.Close() }() // read only
	b, err := readAll(f)
	if err != nil {
		return nil, storageErr("read", err)
	}
	pf, err := parseFile(b)
	if errors.Is(err, errIncomplete) {
		return nil, err
	}
	if err == nil && (pf.groupID != s.id || pf.epoch != e) {
		err = fmt.Errorf("file %s belongs to group %q epoch %d", logName(e), pf.groupID, pf.epoch)
	}
	if err != nil {
		return nil, storageErr("load "+logName(e), err)
	}
	return pf, nil
}

// writeSnapshot creates file s.epoch holding st's snapshot, durably. exists says the file is
// there already (our own earlier, incomplete attempt), so it is rewritten in place.
func (s *store) writeSnapshot(st *durable, exists bool) error {
	flag := os.O_CREATE | os.O_EXCL | os.O_RDWR
	if exists {
		flag = os.O_RDWR
	}
	f, err := s.fs.OpenFile(s.path(s.epoch), flag, 0o644)
	if err != nil {
		return storageErr("create", err)
	}
	fr := frame(snapshotPayload(s.id, s.epoch, st))
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(fr, 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = s.fs.SyncDir(s.dir)
	}
	if err != nil {
		_ = f.Close()
		return storageErr("write snapshot", err)
	}
	s.f, s.end = f, int64(len(fr))
	return nil
}

// prune removes files superseded by our snapshot: every file below src (src's snapshot
// already covered them) and incomplete files between src and us. src itself is kept, for
// whoever reads the directory. Failures cost only disk space.
func (s *store) prune(files []int32, src int32) {
	for _, e := range files {
		if e < s.epoch && e != src {
			_ = s.fs.Remove(s.path(e))
		}
	}
}

// append writes one change frame and acknowledges it: it returns nil only when the frame is
// durable and the fence still holds the store's epoch. Any failure is sticky.
func (s *store) append(payload []byte) error {
	if s.failed != nil {
		return s.failed
	}
	if s.f == nil {
		return errors.New("store not loaded")
	}
	fr := frame(payload)
	if _, err := s.f.WriteAt(fr, s.end); err != nil {
		s.failed = storageErr("append", err)
		return s.failed
	}
	if err := s.f.Sync(); err != nil {
		s.failed = storageErr("fsync", err)
		return s.failed
	}
	if err := s.fence.Check(s.epoch); err != nil {
		s.failed = err
		return err
	}
	s.end += int64(len(fr))
	return nil
}

// check returns nil while the fence still holds the store's epoch.
func (s *store) check() error {
	if s.failed != nil {
		return s.failed
	}
	if err := s.fence.Check(s.epoch); err != nil {
		s.failed = err
		return err
	}
	return nil
}

func (s *store) close() {
	if s.f != nil {
		_ = s.f.Close()
		s.f = nil
	}
}

func (s *store) path(epoch int32) string { return filepath.Join(s.dir, logName(epoch)) }

// listFiles lists the offsets files' epochs, ascending.
func (s *store) listFiles() ([]int32, error) {
	names, err := s.fs.ReadDirNames(s.dir)
	if err != nil {
		return nil, storageErr("list", err)
	}
	var out []int32
	for _, n := range names {
		if e, ok := parseLogName(n); ok {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out, nil
}

// peek reads the group's current durable state without claiming anything (for the scan that
// decides which groups to take over). id is empty for a hashed directory name and is then
// taken from the file.
func peek(fsys storage.FS, dir string) (id string, st *durable, err error) {
	s := &store{fs: fsys, dir: dir}
	files, err := s.listFiles()
	if err != nil {
		return "", nil, err
	}
	for i := len(files) - 1; i >= 0; i-- {
		f, err := fsys.OpenFile(s.path(files[i]), os.O_RDONLY, 0)
		if err != nil {
			return "", nil, storageErr("open", err)
		}
		b, err := readAll(f)
		_ = f.Close()
		if err != nil {
			return "", nil, storageErr("read", err)
		}
		pf, err := parseFile(b)
		if errors.Is(err, errIncomplete) {
			continue
		}
		if err != nil {
			return "", nil, storageErr("peek", err)
		}
		return pf.groupID, pf.state, nil
	}
	return "", newDurable(), nil
}

func readAll(f storage.File) ([]byte, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// storageErr wraps an I/O failure as a *storage.StorageError, leaving fence errors and errors
// that already are storage errors alone.
func storageErr(op string, err error) error {
	if err == nil || errors.Is(err, storage.ErrFenced) || errors.Is(err, storage.ErrStorage) {
		return err
	}
	return &storage.StorageError{Op: "groups: " + op, Err: err}
}
