package txn

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock/broker/storage"
)

// Files (docs/transactions.md "The coordinator"): one directory per transactional id under
// the txn root, "t-" + the id with every byte outside [A-Za-z0-9._-] as %XX, or "h-" + a
// SHA-256 prefix when that is longer than maxEscapedName (the id is inside the state file).
// Inside: fence/ (storage.Fence) and "<epoch>.state", written only by the coordinator that
// claimed that epoch — a whole Txn as JSON behind a 4-byte length and a CRC-32C, replaced by
// rename. A claimer of epoch K copies the newest state of an epoch claimed below K into
// K.state before it answers anything, so a deposed coordinator's late writes (to its own
// file) are never read again.
const (
	fenceDirName   = "fence"
	stateSuffix    = ".state"
	maxEscapedName = 200
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func dirName(id string) string {
	var b strings.Builder
	b.WriteString("t-")
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len() > maxEscapedName {
		sum := sha256.Sum256([]byte(id))
		return "h-" + hex.EncodeToString(sum[:16])
	}
	return b.String()
}

func stateName(epoch int32) string { return strconv.FormatInt(int64(epoch), 10) + stateSuffix }

// store is one transactional id's files at one claimed coordinator epoch.
type store struct {
	fs    storage.FS
	dir   string
	epoch int32
	fence *storage.Fence
}

// exists reports whether id has a directory under root (a read: no claim).
func exists(fsys storage.FS, root, id string) (bool, error) {
	if _, err := fsys.ReadDirNames(filepath.Join(root, dirName(id))); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, storageErr("list txn", err)
	}
	return true, nil
}

// claimStore creates (durably) id's directory if needed, claims its fence at epoch, loads the
// newest state an earlier claimer wrote and copies it into this epoch's file. found is false
// when no state was ever written. A fence at epoch or above fails with storage.ErrFenced.
func claimStore(fsys storage.FS, root, id string, epoch int32) (s *store, t Txn, found bool, err error) {
	dir := filepath.Join(root, dirName(id))
	if err := fsys.MkdirAll(filepath.Join(dir, fenceDirName)); err != nil {
		return nil, Txn{}, false, storageErr("create txn", err)
	}
	for _, d := range []string{filepath.Dir(root), root, dir} {
		if err := fsys.SyncDir(d); err != nil {
			return nil, Txn{}, false, storageErr("create txn", err)
		}
	}
	fence, err := storage.OpenFence(fsys, filepath.Join(dir, fenceDirName))
	if err != nil {
		return nil, Txn{}, false, err
	}
	if err := fence.Claim(epoch); err != nil {
		return nil, Txn{}, false, err
	}
	s = &store{fs: fsys, dir: dir, epoch: epoch, fence: fence}
	var loadErr error
	err = fence.Claims(func(e int32) bool {
		if e >= epoch {
			return true
		}
		got, ok, err := s.read(e)
		if err != nil {
			loadErr = err
			return false
		}
		if ok {
			t, found = got, true
			return false
		}
		return true
	})
	if err == nil {
		err = loadErr
	}
	if err != nil {
		return nil, Txn{}, false, err
	}
	if found {
		if t.ID != id {
			return nil, Txn{}, false, storageErr("load txn", fmt.Errorf("%s holds id %q, want %q", dir, t.ID, id))
		}
		if err := s.write(t); err != nil {
			return nil, Txn{}, false, err
		}
	}
	return s, t, found, nil
}

// read loads epoch's state file; ok is false when there is none.
func (s *store) read(epoch int32) (Txn, bool, error) {
	f, err := s.fs.OpenFile(filepath.Join(s.dir, stateName(epoch)), os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Txn{}, false, nil
		}
		return Txn{}, false, storageErr("read txn", err)
	}
	defer func() { _ = f.Close() }() // read-only: a close error loses nothing
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 64<<20))
	if err != nil {
		return Txn{}, false, storageErr("read txn", err)
	}
	if len(b) < 8 || int(binary.BigEndian.Uint32(b)) != len(b)-8 ||
		crc32.Checksum(b[8:], castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return Txn{}, false, storageErr("read txn", fmt.Errorf("%s: torn or corrupt", stateName(epoch)))
	}
	var t Txn
	if err := json.Unmarshal(b[8:], &t); err != nil {
		return Txn{}, false, storageErr("read txn", err)
	}
	return t, true, nil
}

// write makes t this epoch's state: a temporary, fsynced, renamed over the file, the
// directory synced; then the fence must still hold the epoch. Only then may t be answered.
func (s *store) write(t Txn) error {
	body, err := json.Marshal(t)
	if err != nil {
		return err
	}
	b := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(body, castagnoli))
	b = append(b, body...)
	final := filepath.Join(s.dir, stateName(s.epoch))
	tmp := final + ".tmp"
	f, err := s.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return storageErr("write txn", err)
	}
	_, err = f.WriteAt(b, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(tmp, final)
	}
	if err == nil {
		err = s.fs.SyncDir(s.dir)
	}
	if err != nil {
		return storageErr("write txn", err)
	}
	return s.fence.Check(s.epoch)
}

// check returns nil while the fence still holds the store's epoch.
func (s *store) check() error { return s.fence.Check(s.epoch) }

func storageErr(op string, err error) error {
	if err == nil || errors.Is(err, storage.ErrFenced) || errors.Is(err, storage.ErrStorage) {
		return err
	}
	return &storage.StorageError{Op: op, Err: err}
}

// parseDirName inverts dirName for "t-" names; a hashed "h-" name reports hashed=true and
// no id (the id is read from its state file). Other names are not ids' directories.
func parseDirName(name string) (id string, hashed, ok bool) {
	if strings.HasPrefix(name, "h-") {
		return "", true, len(name) == 2+32
	}
	if !strings.HasPrefix(name, "t-") {
		return "", false, false
	}
	var b strings.Builder
	for i := 2; i < len(name); i++ {
		if name[i] != '%' {
			b.WriteByte(name[i])
			continue
		}
		if i+2 >= len(name) {
			return "", false, false
		}
		v, err := strconv.ParseUint(name[i+1:i+3], 16, 8)
		if err != nil {
			return "", false, false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	id = b.String()
	return id, false, dirName(id) == name
}

// listIDs returns the ids with a directory under root. A hashed directory's id is read from
// its newest-numbered state file (a read to learn a name, not a load: the claim reloads).
func listIDs(fsys storage.FS, root string) ([]string, error) {
	names, err := fsys.ReadDirNames(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, storageErr("list txn ids", err)
	}
	var ids []string
	for _, name := range names {
		id, hashed, ok := parseDirName(name)
		if !ok {
			continue
		}
		if hashed {
			files, err := fsys.ReadDirNames(filepath.Join(root, name))
			if err != nil {
				return nil, storageErr("list txn ids", err)
			}
			best := int32(-1)
			for _, f := range files {
				if n, err := strconv.ParseInt(strings.TrimSuffix(f, stateSuffix), 10, 32); err == nil && strings.HasSuffix(f, stateSuffix) && int32(n) > best {
					best = int32(n)
				}
			}
			if best < 0 {
				continue // claimed but never written: nothing to serve
			}
			t, found, err := (&store{fs: fsys, dir: filepath.Join(root, name)}).read(best)
			if err != nil {
				return nil, err
			}
			if !found {
				continue
			}
			id = t.ID
		}
		ids = append(ids, id)
	}
	return ids, nil
}
