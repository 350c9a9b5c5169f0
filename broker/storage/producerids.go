package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
)

// DefaultProducerIDBlockSize is how many producer ids one claim reserves (Apache's
// ProducerIdManager hands out blocks of 1000 too).
const DefaultProducerIDBlockSize = 1000

// maxBlockClaimAttempts bounds the exclusive creates one claim tries. Each attempt after a
// taken number jumps twice as far as the one before, so even a listing that is hours stale
// costs a few dozen attempts; this only trips on a broken directory.
const maxBlockClaimAttempts = 64

// ProducerIDs allocates the cluster's producer ids (InitProducerId) from the shared volume.
// Ids come in blocks: block n is ids [n·size, (n+1)·size), claimed by exclusively creating
// the entry n in the allocator's directory (O_CREATE|O_EXCL: the file system's word, not a
// cache's) and made durable before any id in it is handed out. Entries are never removed, so
// no number is ever created twice, and ids are unique across brokers and restarts; an id
// handed out is never handed out again, and a broker that restarts skips the rest of its
// block. The directory listing only suggests where to start: a stale one costs a few taken
// numbers, never an id (docs/storage.md, "Producer ids"). ProducerIDs is safe for
// concurrent use.
type ProducerIDs struct {
	fs   FS
	dir  string
	size int64

	mu   sync.Mutex
	log  logr.Logger         // guarded by mu
	junk map[string]struct{} // junk names already logged; guarded by mu
	last int64               // the largest block this allocator created or saw taken; guarded by mu
	next int64               // next id to hand out; guarded by mu
	end  int64               // end of the current block (exclusive); guarded by mu
}

// OpenProducerIDs opens (creating if needed) the allocator kept in dir (ProducerIDsDir).
// blockSize ≤ 0 means DefaultProducerIDBlockSize. Every broker of a cluster must use the
// same block size.
func OpenProducerIDs(fsys FS, dir string, blockSize int64) (*ProducerIDs, error) {
	if blockSize <= 0 {
		blockSize = DefaultProducerIDBlockSize
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, storageErr("open producer ids", err)
	}
	return &ProducerIDs{fs: fsys, dir: dir, size: blockSize, log: logr.Discard(), junk: map[string]struct{}{}, last: -1}, nil
}

// SetLogger makes the allocator report junk it ignores (entries no allocator wrote) to log.
func (p *ProducerIDs) SetLogger(log logr.Logger) {
	p.mu.Lock()
	p.log = log
	p.mu.Unlock()
}

// Next returns a producer id no one has been given before.
func (p *ProducerIDs) Next() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end {
		if err := p.claimBlockLocked(); err != nil {
			return 0, err
		}
	}
	id := p.next
	p.next++
	return id, nil
}

// maxBlock is the largest block number whose ids fit in an int64.
func (p *ProducerIDs) maxBlock() int64 { return math.MaxInt64/p.size - 1 }

func (p *ProducerIDs) claimBlockLocked() error {
	top, err := p.largestListedLocked()
	if err != nil {
		return storageErr("claim producer id block", err)
	}
	n := max(top, p.last) + 1
	for attempt := range maxBlockClaimAttempts {
		if n > p.maxBlock() {
			return fmt.Errorf("claim producer id block in %s: the producer id space is exhausted (block %d)", p.dir, n)
		}
		err := p.create(n)
		if err == nil {
			p.last = n
			p.next, p.end = n*p.size, (n+1)*p.size
			return nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return storageErr("claim producer id block", err)
		}
		p.last = max(p.last, n)
		n += int64(1) << min(attempt, 40) // taken: the listing was stale, jump past what it missed
	}
	return fmt.Errorf("claim producer id block in %s: %d numbers in a row were taken", p.dir, maxBlockClaimAttempts)
}

// create claims block n: an exclusive create, a note of who claimed it, fsync, the
// directory's fsync. A crash after the create leaves an entry with no note: the number stays
// taken (and is junk to the listing hint).
func (p *ProducerIDs) create(n int64) error {
	name := strconv.FormatInt(n, 10)
	host, _ := os.Hostname()
	if err := writeNew(p.fs, filepath.Join(p.dir, name), []byte(fmt.Sprintf("%s claimed by %s pid %d\n", name, host, os.Getpid()))); err != nil {
		return err
	}
	return p.fs.SyncDir(p.dir)
}

// largestListedLocked is the largest block the directory listing shows that an allocator
// wrote (-1 if none): only a starting point for claimBlockLocked. Entries whose block would
// overflow the id space, and entries without an allocator's note, are junk: logged, ignored.
func (p *ProducerIDs) largestListedLocked() (int64, error) {
	names, err := p.fs.ReadDirNames(p.dir)
	if err != nil {
		return 0, err
	}
	return largestClaimedEntry(p.fs, p.dir, names, p.maxBlock(), p.logJunkLocked, nil)
}

func (p *ProducerIDs) logJunkLocked(name, why string) {
	if _, seen := p.junk[name]; seen {
		return
	}
	p.junk[name] = struct{}{}
	p.log.Info("Ignoring junk in the producer-id directory", "dir", p.dir, "name", name, "reason", why)
}
