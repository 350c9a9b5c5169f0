package storage

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-logr/logr"
)

// Fence is the monotonic epoch that says who may write a partition (or, for the group
// coordinator, a group): the highest epoch that has claimed it. A writer at epoch E claims E
// once, and before acknowledging anything it has made durable calls Check(E): once a higher
// epoch has claimed, Check fails and the writer must stop. The value never goes down.
//
// The fence is a chain of claims reached by name, never by a directory listing (which a
// network file system may serve from a cache): claim n+1 is published with an exclusive
// link(2) right after claim n, so at most one claim ever holds each number; it then writes a
// notice into every claim below it that still held, and a holder's Check reads its own
// notice, a file it opens by name. docs/storage.md ("The fence") has the rules and why they
// are safe; the files are:
//
//	<n:020>.claim   claim number n: a header (epoch, the claim's id, who made it), then the
//	                holder's journal (journal.go). Published complete by link; never removed.
//	<id>.notice     the claim's notice: empty while it holds; its successor writes into it.
//	<id>.tmp        a claim being prepared.
//	<epoch>         a claim of the earlier format (one entry per epoch), read only to seed a
//	                chain that has no claim yet.
//
// A Fence holds no open files; it remembers which claims it won, so Check costs one open and
// one small read. It is safe for concurrent use, and any number of processes may use the same
// directory at once.
type Fence struct {
	fs  FS
	dir string

	mu   sync.Mutex
	log  logr.Logger        // guarded by mu
	held map[int32]claimRef // claims this Fence won, by epoch; guarded by mu
	// earlier holds, by epoch of a held claim, whether an earlier-version broker's entry was
	// in the directory when it was claimed: Check then lists too (fence_earlier.go). Guarded
	// by mu.
	earlier map[int32]bool
	junk    map[string]struct{} // junk names already logged; guarded by mu
}

// claimRef names one claim of the chain.
type claimRef struct {
	n     int64 // its number
	epoch int32
	id    string // names its notice
}

// claimHeader is the first record of a claim file.
type claimHeader struct {
	epoch int32
	id    string // 32 lower-case hex digits
	note  string // who claimed (host, pid), for people reading the directory
}

const (
	claimSuffix   = ".claim"
	noticeSuffix  = ".notice"
	claimDigits   = 20
	claimIDLen    = 32
	recClaim      = 'H'
	claimHeadRead = 4 << 10 // a header fits in the first 4 KiB of a claim file
	// claimHintTries is how many of the largest listed claims a walk tries as its starting
	// point before it starts from claim 0.
	claimHintTries = 3
)

func claimName(n int64) string { return fmt.Sprintf("%0*d%s", claimDigits, n, claimSuffix) }

func parseClaimName(name string) (int64, bool) {
	s, ok := strings.CutSuffix(name, claimSuffix)
	if !ok || len(s) != claimDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 63)
	return int64(n), err == nil
}

func encodeClaimHeader(h claimHeader) []byte {
	p := binary.BigEndian.AppendUint32(nil, uint32(h.epoch))
	p = append(p, h.id...)
	p = append(p, h.note...)
	return appendRecord(nil, recClaim, p)
}

var errJunkClaim = errors.New("not a claim")

// decodeClaimHeader reads the header at the start of a claim file.
func decodeClaimHeader(b []byte) (claimHeader, error) {
	recs := splitRecords(b)
	if len(recs) == 0 || recs[0].kind != recClaim || len(recs[0].payload) < 4+claimIDLen {
		return claimHeader{}, errJunkClaim
	}
	p := recs[0].payload
	h := claimHeader{epoch: int32(binary.BigEndian.Uint32(p)), id: string(p[4 : 4+claimIDLen]), note: string(p[4+claimIDLen:])}
	if h.epoch < 0 || !isClaimID(h.id) {
		return claimHeader{}, errJunkClaim
	}
	return h, nil
}

func isClaimID(s string) bool {
	if len(s) != claimIDLen {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// OpenFence opens (creating if needed) the fence kept in dir.
func OpenFence(fsys FS, dir string) (*Fence, error) {
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, storageErr("open fence", err)
	}
	return &Fence{fs: fsys, dir: dir, log: logr.Discard(), held: map[int32]claimRef{}, earlier: map[int32]bool{}, junk: map[string]struct{}{}}, nil
}

// SetLogger makes the fence report junk it ignores (files no claim wrote) to log.
func (f *Fence) SetLogger(log logr.Logger) {
	f.mu.Lock()
	f.log = log
	f.mu.Unlock()
}

// Epoch reads the fence: the highest epoch claimed so far, or -1 if none was.
func (f *Fence) Epoch() (int32, error) {
	h, err := f.head()
	if err != nil {
		return 0, storageErr("read fence", err)
	}
	return h.value(), nil
}

// Claim makes epoch the fence's value. It fails with a *FencedError (errors.Is ErrFenced)
// when the fence already holds epoch or more — then it writes nothing — or when a concurrent
// claimer overtook it. An epoch is claimed at most once: claiming the epoch the fence already
// holds is refused too.
func (f *Fence) Claim(epoch int32) error {
	if epoch < 0 {
		return fmt.Errorf("claim epoch %d: epochs are non-negative", epoch)
	}
	h, err := f.head()
	if err != nil {
		return storageErr("claim fence", err)
	}
	if v := h.value(); v >= epoch {
		return &FencedError{Epoch: epoch, Fence: v}
	}
	earlier, err := f.claimEarlierFormat(epoch)
	if err != nil {
		return err
	}
	ref, err := f.claim(epoch, h)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.held[epoch], f.earlier[epoch] = ref, earlier
	f.mu.Unlock()
	return nil
}

// claim publishes a claim of epoch after the newest claim h found and supersedes every claim
// below it (the numbered steps of docs/storage.md, "The fence").
func (f *Fence) claim(epoch int32, h chainHead) (claimRef, error) {
	p, err := f.prepare(epoch)
	if err != nil {
		return claimRef{}, storageErr("claim fence", err)
	}
	defer p.cleanup()
	ref, err := f.publish(p, h)
	if err != nil {
		return claimRef{}, err
	}
	p.published = true
	if err := f.supersedeBelow(ref); err != nil {
		return claimRef{}, storageErr("claim fence", err)
	}
	if by, err := f.superseded(ref); err != nil || by >= 0 {
		if err != nil {
			return claimRef{}, storageErr("claim fence", err)
		}
		return claimRef{}, &FencedError{Epoch: epoch, Fence: by}
	}
	return ref, nil
}

// preparedClaim is a claim's notice and header, written before the claim is published.
type preparedClaim struct {
	f         *Fence
	hdr       claimHeader
	tmp       string
	published bool
}

// prepare writes the claim's (empty) notice and its header under a temporary name, both
// durable, so the link that publishes the claim publishes it whole.
func (f *Fence) prepare(epoch int32) (*preparedClaim, error) {
	var raw [claimIDLen / 2]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	p := &preparedClaim{f: f, hdr: claimHeader{epoch: epoch, id: hex.EncodeToString(raw[:]), note: fmt.Sprintf("%s pid %d", host, os.Getpid())}}
	p.tmp = filepath.Join(f.dir, p.hdr.id+tmpSuffix)
	if err := writeNew(f.fs, filepath.Join(f.dir, p.hdr.id+noticeSuffix), nil); err != nil {
		return nil, err
	}
	if err := writeNew(f.fs, p.tmp, encodeClaimHeader(p.hdr)); err != nil {
		_ = f.fs.Remove(filepath.Join(f.dir, p.hdr.id+noticeSuffix))
		return nil, err
	}
	if err := f.fs.SyncDir(f.dir); err != nil {
		p.cleanup()
		return nil, err
	}
	return p, nil
}

// cleanup removes the temporary name, and the notice of a claim that was never published.
func (p *preparedClaim) cleanup() {
	_ = p.f.fs.Remove(p.tmp)
	if !p.published {
		_ = p.f.fs.Remove(filepath.Join(p.f.dir, p.hdr.id+noticeSuffix))
	}
}

// publish links the prepared claim as the number after the newest one: it tries the number
// after h and, while the name is taken (exclusive link: the server's word, not a cache's),
// the next, refusing as soon as a claim at or above its epoch turns up.
func (f *Fence) publish(p *preparedClaim, h chainHead) (claimRef, error) {
	pred := h.value()
	for n := h.n + 1; ; n++ {
		if pred >= p.hdr.epoch {
			return claimRef{}, &FencedError{Epoch: p.hdr.epoch, Fence: pred}
		}
		err := f.fs.Link(p.tmp, filepath.Join(f.dir, claimName(n)))
		if !errors.Is(err, fs.ErrExist) {
			// Linked, or failed in a way that may have linked (a lost reply): from here the
			// claim may be in the chain, and a published claim's notice is never removed — a
			// claim without one would read as superseded while the claims below it still hold.
			p.published = true
		}
		if err == nil {
			if err := f.fs.SyncDir(f.dir); err != nil {
				return claimRef{}, storageErr("claim fence", err)
			}
			return claimRef{n: n, epoch: p.hdr.epoch, id: p.hdr.id}, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return claimRef{}, storageErr("claim fence", err)
		}
		other, err := f.readClaim(n)
		if errors.Is(err, errJunkClaim) {
			continue // a file no claim wrote: it holds the number, not the fence
		}
		if err != nil {
			return claimRef{}, storageErr("claim fence", err)
		}
		pred = max(pred, other.epoch)
	}
}

// supersedeBelow writes a notice into every claim below ref that still holds. It walks down
// to the first claim already superseded and writes the notices from there upwards, so the
// superseded claims are always a prefix of the chain: a claimer that finds one superseded
// knows every claim below it is too, even if the claimer before it crashed half-way.
func (f *Fence) supersedeBelow(ref claimRef) error {
	var holding []claimHeader
	for n := ref.n - 1; n >= 0; n-- {
		h, err := f.readClaimBelow(n)
		if errors.Is(err, errJunkClaim) {
			continue
		}
		if errors.Is(err, fs.ErrNotExist) {
			break // the chain does not reach further down (a fence directory that was wiped)
		}
		if err != nil {
			return err
		}
		by, err := f.noticeSays(claimRef{n: n, epoch: h.epoch, id: h.id})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err == nil && by >= 0 {
			break
		}
		// Holding, or a notice that cannot be found: not known to be superseded, so it gets
		// a notice (created if missing) and the walk goes on down. Only a written notice
		// proves the claims below it are superseded.
		holding = append(holding, h)
	}
	note := []byte(fmt.Sprintf("superseded by claim %d at epoch %d\n", ref.n, ref.epoch))
	for i := len(holding) - 1; i >= 0; i-- {
		if err := f.writeNotice(holding[i].id, note); err != nil {
			return err
		}
	}
	return nil
}

// writeNotice writes note into the notice of claim id and makes it durable. A notice that
// cannot be found by name (a cached negative lookup) is created by an exclusive link of the
// note itself, which either lands (the holder reads it) or tells us the notice exists.
func (f *Fence) writeNotice(id string, note []byte) error {
	path := filepath.Join(f.dir, id+noticeSuffix)
	for range 2 {
		err := writeSynced(f.fs, path, os.O_RDWR, note)
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := f.linkFresh(path, note); !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return fmt.Errorf("notice %s: neither found nor created", path)
}

// linkFresh publishes content under path by an exclusive link from a temporary file:
// fs.ErrExist when path exists.
func (f *Fence) linkFresh(path string, content []byte) error {
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	tmp := filepath.Join(f.dir, "probe-"+hex.EncodeToString(raw[:])+tmpSuffix)
	if err := writeNew(f.fs, tmp, content); err != nil {
		return err
	}
	defer func() { _ = f.fs.Remove(tmp) }()
	if err := f.fs.Link(tmp, path); err != nil {
		return err
	}
	return f.fs.SyncDir(f.dir)
}

// superseded reads claim ref's notice: -1 while the claim holds, else the epoch that
// superseded it (or the claim's own epoch + 1 when the notice says no more). A notice that
// cannot be opened counts as superseded: the safe direction.
func (f *Fence) superseded(ref claimRef) (int32, error) {
	by, err := f.noticeSays(ref)
	if errors.Is(err, fs.ErrNotExist) {
		return ref.epoch + 1, nil
	}
	return by, err
}

// noticeSays reads claim ref's notice as superseded does, except that a notice that cannot
// be opened is an error wrapping fs.ErrNotExist: safe for the holder to count as superseded,
// never proof to a claimer that the claims below it are.
func (f *Fence) noticeSays(ref claimRef) (int32, error) {
	b, err := readPrefix(f.fs, filepath.Join(f.dir, ref.id+noticeSuffix), 256)
	if err != nil {
		return 0, err
	}
	if len(b) == 0 {
		return -1, nil
	}
	var n int64
	var e int32
	if _, err := fmt.Sscanf(string(b), "superseded by claim %d at epoch %d", &n, &e); err == nil && e > ref.epoch {
		return e, nil
	}
	return ref.epoch + 1, nil
}

// Check re-reads the fence and returns nil only if it still holds exactly epoch: no other
// writer has claimed since. Call it after making data durable and before acknowledging it.
func (f *Fence) Check(epoch int32) error {
	ref, err := f.locate(epoch)
	if err != nil {
		return err
	}
	by, err := f.superseded(ref)
	if err != nil {
		return storageErr("check fence", err)
	}
	if by >= 0 {
		return &FencedError{Epoch: epoch, Fence: by}
	}
	f.mu.Lock()
	earlier := f.earlier[epoch]
	f.mu.Unlock()
	if earlier {
		return f.checkEarlierFormat(epoch)
	}
	return nil
}

// Claims calls visit with the epoch of each claim on the fence, newest (highest) first,
// until visit returns false. Each claim is reached by name — the walk up to the newest, then
// every number below it, asked of the server where a cached "no such file" could hide one —
// so a stale listing never hides a claim. After the chain comes the largest entry of the
// earlier format, if there is one (older entries of that format are known only to a listing).
// Junk is skipped. It is how the group store finds, by name, every file a claimer may have
// written (docs/storage.md "Metadata by name, never by listing").
func (f *Fence) Claims(visit func(epoch int32) bool) error {
	h, err := f.head()
	if err != nil {
		return storageErr("read fence", err)
	}
	for n := h.n; n >= 0; n-- {
		c, err := f.readClaimBelow(n)
		if errors.Is(err, errJunkClaim) {
			continue
		}
		if errors.Is(err, fs.ErrNotExist) {
			break // the chain does not reach further down (a fence directory that was wiped)
		}
		if err != nil {
			return storageErr("read fence", err)
		}
		if !visit(c.epoch) {
			return nil
		}
	}
	legacy, err := f.legacyValue()
	if err != nil {
		return storageErr("read fence", err)
	}
	if legacy >= 0 {
		visit(legacy)
	}
	return nil
}

// locate finds the claim of epoch: remembered when this Fence won it, else by walking the
// chain.
func (f *Fence) locate(epoch int32) (claimRef, error) {
	f.mu.Lock()
	ref, ok := f.held[epoch]
	f.mu.Unlock()
	if ok {
		return ref, nil
	}
	h, err := f.walk(func(r claimRef) bool { return r.epoch >= epoch })
	if err != nil {
		return claimRef{}, storageErr("check fence", err)
	}
	if h.newest.epoch != epoch || h.newest.id == "" {
		return claimRef{}, &FencedError{Epoch: epoch, Fence: h.value()}
	}
	earlier, _, err := f.scanEarlierFormat() // a claim another Fence won: what it would have found
	if err != nil {
		return claimRef{}, storageErr("check fence", err)
	}
	f.mu.Lock()
	f.held[epoch], f.earlier[epoch] = h.newest, earlier
	f.mu.Unlock()
	return h.newest, nil
}

// claimPath is the file of the claim this Fence won at epoch ("" if it won none).
func (f *Fence) claimPath(epoch int32) (claimRef, string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ref, ok := f.held[epoch]
	return ref, filepath.Join(f.dir, claimName(ref.n)), ok
}

// chainHead is what a walk up the chain found.
type chainHead struct {
	n      int64    // the number of the last claim file (-1: none)
	newest claimRef // the newest valid claim (id "" when none)
	legacy int32    // the largest claim of the earlier format when the chain has no claim, else -1
}

// value is the fence's epoch as the walk saw it.
func (h chainHead) value() int32 {
	if h.newest.id != "" {
		return h.newest.epoch
	}
	return h.legacy
}

// head walks to the newest claim.
func (f *Fence) head() (chainHead, error) {
	return f.walk(func(claimRef) bool { return false })
}

// walk goes up the chain by name from the best starting point a listing suggests until the
// next number does not exist or stop says so. A stale listing only makes the walk longer: the
// walk never decides anything from what the listing leaves out.
func (f *Fence) walk(stop func(claimRef) bool) (chainHead, error) {
	h, err := f.startingPoint()
	if err != nil {
		return chainHead{}, err
	}
	for h.newest.id == "" || !stop(h.newest) {
		c, err := f.readClaim(h.n + 1)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		h.n++
		if errors.Is(err, errJunkClaim) {
			continue
		}
		if err != nil {
			return chainHead{}, err
		}
		h.newest = claimRef{n: h.n, epoch: c.epoch, id: c.id}
	}
	if h.newest.id == "" {
		h.legacy, err = f.legacyValue()
		if err != nil {
			return chainHead{}, err
		}
	}
	return h, nil
}

// startingPoint is the largest valid claim the directory listing shows (a hint: a stale one
// is an older claim, which the walk goes on from), or the start of the chain.
func (f *Fence) startingPoint() (chainHead, error) {
	names, err := f.fs.ReadDirNames(f.dir)
	if err != nil {
		return chainHead{}, err
	}
	var listed []int64
	for _, name := range names {
		if n, ok := parseClaimName(name); ok {
			listed = append(listed, n)
		}
	}
	slices.Sort(listed)
	for i := len(listed) - 1; i >= 0 && i >= len(listed)-claimHintTries; i-- {
		c, err := f.readClaim(listed[i])
		if err == nil {
			return chainHead{n: listed[i], newest: claimRef{n: listed[i], epoch: c.epoch, id: c.id}, legacy: -1}, nil
		}
		if !errors.Is(err, errJunkClaim) && !errors.Is(err, fs.ErrNotExist) {
			return chainHead{}, err
		}
	}
	return chainHead{n: -1, legacy: -1}, nil
}

// readClaim reads the header of claim n: fs.ErrNotExist when there is no such claim,
// errJunkClaim (logged once) when the file is not one.
func (f *Fence) readClaim(n int64) (claimHeader, error) {
	name := claimName(n)
	b, err := readPrefix(f.fs, filepath.Join(f.dir, name), claimHeadRead)
	if err != nil {
		return claimHeader{}, err
	}
	h, err := decodeClaimHeader(b)
	if err != nil {
		f.logJunk(name, "not a claim the fence wrote")
		return claimHeader{}, err
	}
	return h, nil
}

// readClaimBelow reads claim n, which lies below a claim already published and so exists
// (claims are published in order and never removed). A "no such file" may be a cached
// negative lookup from before the claim was made; an exclusive link of an empty file asks the
// server. If the name really was free (a wiped fence directory), the empty file now holds the
// number as junk, so no claim can ever be published below one that exists.
func (f *Fence) readClaimBelow(n int64) (claimHeader, error) {
	b, err := f.readClaimFileBelow(n, claimHeadRead)
	if err != nil {
		return claimHeader{}, err
	}
	h, err := decodeClaimHeader(b)
	if err != nil {
		f.logJunk(claimName(n), "not a claim the fence wrote")
	}
	return h, err
}

// readClaimFileBelow reads up to limit bytes of the file of claim n, which lies below a
// published claim (see readClaimBelow).
func (f *Fence) readClaimFileBelow(n int64, limit int) ([]byte, error) {
	path := filepath.Join(f.dir, claimName(n))
	b, err := readPrefix(f.fs, path, limit)
	if !errors.Is(err, fs.ErrNotExist) {
		return b, err
	}
	switch err := f.linkFresh(path, nil); {
	case errors.Is(err, fs.ErrExist):
		return readPrefix(f.fs, path, limit)
	case err != nil:
		return nil, err
	}
	f.logJunk(claimName(n), "a claim missing below a published one (the fence directory was wiped?)")
	return nil, fs.ErrNotExist
}

// legacyValue is the largest claim of the earlier format (an entry named by its epoch,
// holding "<epoch> claimed by ..."), from the listing; -1 when there is none. Names beyond any
// epoch and entries without that content are junk: logged and ignored.
func (f *Fence) legacyValue() (int32, error) {
	names, err := f.fs.ReadDirNames(f.dir)
	if err != nil {
		return 0, err
	}
	slices.Sort(names)
	// This version's own entries of the earlier format (fence_earlier.go) are for
	// earlier-version readers only: the chain already holds those claims.
	v, err := largestClaimedEntry(f.fs, f.dir, names, math.MaxInt32, f.logJunk, writtenForTheEarlierVersion)
	return int32(v), err
}

func (f *Fence) logJunk(name, why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, seen := f.junk[name]; seen {
		return
	}
	f.junk[name] = struct{}{}
	f.log.Info("Ignoring junk in a fence directory", "dir", f.dir, "name", name, "reason", why)
}

// parseDecimal accepts only canonical non-negative decimals ("0", "17"; not "017", "+1").
func parseDecimal(s string) (int64, bool) {
	if s == "" || len(s) > 19 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// writeNew creates path exclusively with content, durably; a file it created but could not
// complete is removed.
func writeNew(fsys FS, path string, content []byte) error {
	f, err := fsys.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := writeAndClose(f, content); err != nil {
		_ = fsys.Remove(path)
		return err
	}
	return nil
}

// readPrefix reads at most limit bytes from the start of path.
func readPrefix(fsys FS, path string, limit int) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: a close error loses nothing
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, min(size, int64(limit)))
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}
