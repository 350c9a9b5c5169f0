package groups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/paddock-dev/paddock/broker/storage"
)

// store is one group's durable offsets at one claimed coordinator epoch: the group's fence
// and the file named by that epoch (docs/groups.md "Files", "Takeover, commit, deposition",
// "Compaction").
//
// The rules that make it safe on a shared volume where a deposed coordinator may keep
// writing for a while:
//   - a coordinator claims the fence at epoch K before it reads anything, and writes only its
//     own file K, created exclusively; the only file it ever replaces is its own file K (a
//     compaction renames a complete, fsynced snapshot over it), and it never rewrites,
//     renames over or truncates a file another coordinator may own;
//   - file K starts with a complete snapshot of the state K inherited (read from the
//     highest-epoch file whose snapshot is complete), fsynced before K serves;
//   - a change is acknowledged only after its frame is durable AND the fence still holds K.
//
// So every change acknowledged at epoch E < K was durable before K's claim, and is in the file
// K reads (E's own, or a later one whose snapshot includes it). Writes E makes after K's
// snapshot land in file E, which no loader reads again. Writes E makes between K's claim and
// K's reading of file E may be included: they were never acknowledged, like a write whose
// coordinator died between fsync and answer, so an OffsetCommit that failed is "unknown",
// as in Kafka. A compaction by E, however late, replaces file E with a snapshot of what E
// acknowledged — the same state — so whichever version K reads, it has every acknowledged
// change.
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
	// snapEnd is the size of the file's snapshot: the file is compacted once it has grown
	// to twice that (and at least compactMin).
	snapEnd    int64
	compactMin int64
	// failed is sticky: after a storage error or a lost fence nothing more is appended.
	failed error
}

// defaultCompactMin is the smallest offsets file that is compacted: below it a load costs
// milliseconds whatever the file holds.
const defaultCompactMin = 1 << 20

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
// without create a missing directory, or one without an offsets file, is errNoGroup.
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
	s := &store{fs: fsys, dir: dir, id: id, fence: fence, compactMin: defaultCompactMin}
	if !create {
		// A removed group keeps its fence but no file: it is no group until a request
		// creates it again.
		has, err := s.hasFiles()
		if err != nil {
			return nil, err
		}
		if !has {
			return nil, errNoGroup
		}
	}
	return s, nil
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
// is how much of its own file `epoch` it acknowledged, and the file is cut there. nowMs is the
// clock: a state inherited from a coordinator whose group had members is recorded as Empty
// since then (membership does not move); a new group's records no time.
func (s *store) load(epoch int32, acked, nowMs int64) (*durable, error) {
	s.epoch = epoch
	listed, err := s.listFiles()
	if err != nil {
		return nil, err
	}
	if n := len(listed); n > 0 && listed[n-1] > epoch {
		// Only a claimer of that epoch writes its file, so the fence is past us.
		return nil, &storage.FencedError{Epoch: epoch, Fence: listed[n-1]}
	}
	exists := false
	if acked >= 0 {
		st, found, err := s.resumeOwn(acked)
		if err != nil || st != nil {
			return st, err
		}
		// Our own earlier attempt died before its snapshot was complete (or before it
		// created the file): write it again.
		exists = found
	}
	st, src, err := s.best(listed, epoch)
	if err != nil {
		return nil, err
	}
	if st.emptySinceMs == 0 && src >= 0 {
		// Inherited from a coordinator whose group had members: Empty from now on.
		st.emptySinceMs = max(nowMs, 1)
	}
	if err := s.writeSnapshot(st, exists); err != nil {
		return nil, err
	}
	if err := s.fence.Check(epoch); err != nil {
		return nil, err
	}
	s.prune(src)
	return st, nil
}

// resumeOwn reopens file s.epoch written by this process: replays it up to what was
// acknowledged (acked bytes) — cutting any tail: torn, or written but never acknowledged —
// and continues there. It returns nil state (no error) when the snapshot is incomplete
// (found) or the file was never created (not found).
func (s *store) resumeOwn(acked int64) (st *durable, found bool, err error) {
	f, err := s.fs.OpenFile(s.path(s.epoch), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, storageErr("open", err)
	}
	fail := func(err error) (*durable, bool, error) {
		_ = f.Close()
		return nil, true, err
	}
	pf, size, err := s.parse(f, s.epoch, acked)
	if errors.Is(err, errIncomplete) {
		return fail(nil)
	}
	if err != nil {
		return fail(err)
	}
	if pf.valid < size {
		if err := f.Truncate(pf.valid); err != nil {
			return fail(storageErr("cut torn tail", err))
		}
		if err := f.Sync(); err != nil {
			return fail(storageErr("cut torn tail", err))
		}
	}
	if err := s.fence.Check(s.epoch); err != nil {
		return fail(err)
	}
	s.f, s.end, s.snapEnd = f, pf.valid, pf.snapEnd
	return pf.state, true, nil
}

// parse streams the first limit bytes (all when limit is -1) of f, which must be file e of
// this group. It also returns f's size.
func (s *store) parse(f storage.File, e int32, limit int64) (*parsedFile, int64, error) {
	size, err := f.Size()
	if err != nil {
		return nil, 0, storageErr("read", err)
	}
	n := size
	if limit >= 0 {
		n = min(n, limit)
	}
	pf, err := readOffsets(f, n)
	switch {
	case errors.Is(err, errIncomplete):
		return nil, size, err
	case err == nil && (pf.groupID != s.id || pf.epoch != e):
		err = fmt.Errorf("%w: file %s belongs to group %q epoch %d", errCorrupt, logName(e), pf.groupID, pf.epoch)
	}
	if err != nil {
		return nil, size, storageErr("load "+filepath.Join(s.dir, logName(e)), err)
	}
	return pf, size, nil
}

// best reads the state inherited at epoch: the highest-epoch file below it whose snapshot is
// complete, replayed up to its first frame that does not check. The candidates are the epochs
// the listing shows (listed, ascending) and those claimed on the fence, newest first, each
// file opened by name: the fence's claims are reached by name (storage.Fence.Claims), so a
// listing served from a cache cannot hide the newest claimer's file. src is the file's epoch,
// or -1 when there is none (a new group, a removed one, or only incomplete files).
func (s *store) best(listed []int32, epoch int32) (*durable, int32, error) {
	var (
		found   *parsedFile
		src     = int32(-1)
		readErr error
		tried   = map[int32]bool{}
	)
	// try reads file e unless it was tried already; true ends the search.
	try := func(e int32) bool {
		if e >= epoch || tried[e] {
			return false
		}
		tried[e] = true
		pf, err := s.readFile(e)
		if errors.Is(err, errIncomplete) || errors.Is(err, fs.ErrNotExist) {
			// Its claimer died before its snapshot was complete, or before creating it; or
			// it was removed, which happens only once a newer file or the group's removal
			// supersedes it.
			return false
		}
		found, src, readErr = pf, e, err
		return true
	}
	i := len(listed) - 1
	err := s.fence.Claims(func(claimed int32) bool {
		for ; i >= 0 && listed[i] > claimed; i-- {
			if try(listed[i]) {
				return false
			}
		}
		return !try(claimed)
	})
	if err != nil {
		return nil, 0, err
	}
	for ; src < 0 && i >= 0; i-- {
		try(listed[i])
	}
	switch {
	case readErr != nil:
		return nil, 0, readErr
	case found == nil:
		return newDurable(), -1, nil
	}
	return found.state, src, nil
}

// hasFiles reports whether the group has an offsets file: one the listing shows, or the file
// of an epoch claimed on its fence, opened by name (a cached listing may not show the newest
// yet). A group whose files were all removed (docs/groups.md "Group removal") has none.
func (s *store) hasFiles() (bool, error) {
	listed, err := s.listFiles()
	if err != nil || len(listed) > 0 {
		return len(listed) > 0, err
	}
	found := false
	var openErr error
	err = s.fence.Claims(func(e int32) bool {
		f, err := s.fs.OpenFile(s.path(e), os.O_RDONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return true
		}
		if err != nil {
			openErr = storageErr("open", err)
			return false
		}
		_ = f.Close() // read only
		found = true
		return false
	})
	return found, errors.Join(err, openErr)
}

// readFile parses file e (read-only: it may belong to a coordinator that is still writing).
// A missing file is fs.ErrNotExist.
func (s *store) readFile(e int32) (*parsedFile, error) {
	f, err := s.fs.OpenFile(s.path(e), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, storageErr("open", err)
	}
	defer func() { _ = f.Close() }() // read only
	pf, _, err := s.parse(f, e, -1)
	return pf, err
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
	err = f.Truncate(0)
	var n int64
	if err == nil {
		n, err = writeSnapshot(f, s.id, s.epoch, st)
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
	s.f, s.end, s.snapEnd = f, n, n
	return nil
}

// needsCompaction: the file has grown to twice its snapshot, and past compactMin.
func (s *store) needsCompaction() bool {
	return s.failed == nil && s.f != nil && s.end >= s.compactMin && s.end >= 2*s.snapEnd
}

// compact replaces file s.epoch by a snapshot of st, which must be exactly what the store has
// acknowledged: the snapshot goes to a temporary file (s.epoch's own, "<epoch>.log.tmp"),
// fsynced, and — if the fence still holds s.epoch — renamed over file s.epoch; appends go to
// the new file from then on. A crash at any step leaves file s.epoch whole: the old version or
// the new, both holding every acknowledged change. A deposed coordinator that compacts after a
// newer one has read its file only replaces it by the same state (or brings back a file the
// newer one pruned, below the newer one's own, which no loader prefers). Any failure is
// sticky, as for append.
func (s *store) compact(st *durable) error {
	if s.failed != nil {
		return s.failed
	}
	tmp := s.tmpPath(s.epoch)
	f, err := s.fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		s.failed = storageErr("compact", err)
		return s.failed
	}
	abort := func(err error) error {
		_ = f.Close()
		_ = s.fs.Remove(tmp)
		s.failed = storageErr("compact", err)
		return s.failed
	}
	n, err := writeSnapshot(f, s.id, s.epoch, st)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return abort(err)
	}
	if err := s.fence.Check(s.epoch); err != nil {
		return abort(err)
	}
	if err := s.fs.Rename(tmp, s.path(s.epoch)); err != nil {
		// Whether the rename happened is not known (a network file system may have done it
		// and lost the answer): the name holds the old file or the new, the same state; the
		// store stops, and a reload cuts whichever it finds at what was acknowledged.
		_ = f.Close()
		s.failed = storageErr("compact", err)
		return s.failed
	}
	old := s.f
	s.f, s.end, s.snapEnd = f, n, n
	_ = old.Close() // its data was fsynced frame by frame
	if err := s.fs.SyncDir(s.dir); err != nil {
		s.failed = storageErr("compact", err)
		return s.failed
	}
	return nil
}

// prune removes files superseded by our snapshot — every offsets file below src (src's
// snapshot covered them) and incomplete ones between src and us — and temporaries below our
// epoch. src itself is kept, for whoever reads the directory. Only names below our epoch are
// touched, never a newer claimer's. Failures cost only disk space.
func (s *store) prune(src int32) {
	names, err := s.fs.ReadDirNames(s.dir)
	if err != nil {
		return
	}
	for _, n := range names {
		if e, ok := parseLogName(n); ok && e < s.epoch && e != src {
			_ = s.fs.Remove(filepath.Join(s.dir, n))
		}
		if e, ok := parseTmpName(n); ok && e < s.epoch {
			_ = s.fs.Remove(filepath.Join(s.dir, n))
		}
	}
}

// remove deletes the group's files. It runs only when the acknowledged state is empty
// (DeleteGroups, or every offset expired) and while the fence still holds the store's epoch.
// Files of lower epochs go first and our own file (the newest record, which says the group is
// empty) after them, each step made durable, so a crash or a failed step never leaves an older
// file that a loader would take for the group's state. Only names below or at our epoch are
// removed: a newer claimer's file stays, and the group lives on with it.
//
// The fence stays, with our claim holding: its claims are never removed (docs/storage.md
// "The fence": a removed claim would leave a hole a claimer could link into below a newer
// claim, two holders at once). So a coordinator at a lower epoch (a stale view) is refused as
// before the removal, this process may create the group again at once on its claim, and a
// coordinator at a higher epoch starts from no file at all, the empty state.
func (s *store) remove() error {
	if err := s.check(); err != nil {
		return err
	}
	s.close()
	names, err := s.fs.ReadDirNames(s.dir)
	if err != nil {
		return storageErr("remove group", err)
	}
	for _, n := range names {
		e, ok := parseLogName(n)
		if !ok {
			e, ok = parseTmpName(n)
		}
		if ok && e < s.epoch {
			if err := s.removeName(n); err != nil {
				return err
			}
		}
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return storageErr("remove group", err)
	}
	// Our temporary, then our file: the newest record is the last of ours to go.
	for _, n := range []string{logName(s.epoch) + tmpSuffix, logName(s.epoch)} {
		if err := s.removeName(n); err != nil {
			return err
		}
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return storageErr("remove group", err)
	}
	return nil
}

func (s *store) removeName(n string) error {
	if err := s.fs.Remove(filepath.Join(s.dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return storageErr("remove group", err)
	}
	return nil
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

func (s *store) path(epoch int32) string    { return filepath.Join(s.dir, logName(epoch)) }
func (s *store) tmpPath(epoch int32) string { return s.path(epoch) + tmpSuffix }

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

// peekID reads the group id from the snapshot of the newest complete file in dir (for a
// hashed directory name, which does not say it); "" when there is none.
func peekID(fsys storage.FS, dir string) (string, error) {
	s := &store{fs: fsys, dir: dir}
	files, err := s.listFiles()
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil // removed since the groups directory was listed
	}
	if err != nil {
		return "", err
	}
	for i := len(files) - 1; i >= 0; i-- {
		f, err := fsys.OpenFile(s.path(files[i]), os.O_RDONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", storageErr("open", err)
		}
		size, err := f.Size()
		if err != nil {
			_ = f.Close()
			return "", storageErr("read", err)
		}
		// The header frame alone: the id is its first field.
		fr := &frameReader{src: f, size: size}
		payload, err := fr.next()
		_ = f.Close()
		if err != nil && !errors.Is(err, errEnd) {
			return "", storageErr("peek", err)
		}
		if err != nil || len(payload) < 2 || payload[0] != kindSnapshot {
			continue
		}
		r := reader{b: payload[2:]}
		if id := r.str(); r.err == nil {
			return id, nil
		}
	}
	return "", nil
}

// storageErr wraps an I/O failure as a *storage.StorageError, leaving fence errors and errors
// that already are storage errors alone.
func storageErr(op string, err error) error {
	if err == nil || errors.Is(err, storage.ErrFenced) || errors.Is(err, storage.ErrStorage) {
		return err
	}
	return &storage.StorageError{Op: "groups: " + op, Err: err}
}
