package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// VolumeProperty is one property of a shared volume that the storage rules rely on, as
// CheckVolume measured it.
type VolumeProperty struct {
	Name   string
	OK     bool
	Rounds int           // how many times it was tried
	Detail string        // what was seen: the failure, or the measurement
	Worst  time.Duration // for latencies: the slowest round
}

// VolumeReport is CheckVolume's answer, one line per property.
type VolumeReport struct {
	Properties []VolumeProperty
}

// OK is true when every property held.
func (r VolumeReport) OK() bool {
	return !slices.ContainsFunc(r.Properties, func(p VolumeProperty) bool { return !p.OK })
}

func (r VolumeReport) String() string {
	var b strings.Builder
	for _, p := range r.Properties {
		verdict := "ok  "
		if !p.OK {
			verdict = "FAIL"
		}
		fmt.Fprintf(&b, "%s %-44s %4d rounds  %s\n", verdict, p.Name, p.Rounds, p.Detail)
	}
	return b.String()
}

// The properties CheckVolume tests (docs/storage.md, "What the volume must provide").
const (
	PropExclusiveCreate  = "exclusive create races have one winner"
	PropExclusiveLink    = "exclusive link races have one winner"
	PropAtomicRename     = "a rename replaces a file whole"
	PropFsyncThenRead    = "fsynced data reads back on the other node"
	PropWriteIntoOpened  = "a write into a file is seen at the next open"
	PropCreateVisible    = "a new file opens by name on the other node"
	PropListingFreshness = "a new file shows in the other node's listing"
)

// CheckVolume is the core of `paddock storage check`: it exercises a shared volume from two
// nodes, a and b, each a file system handle on the same directory (dirA as a sees it, dirB as
// b does), and reports per property. It works in a fresh subdirectory, which it removes.
// rounds ≤ 0 means 50. Listing freshness is measured and reported but never fails the check:
// nothing rests on a listing; every other property is a rule the fence, the journals and the
// takeover need.
func CheckVolume(ctx context.Context, a, b FS, dirA, dirB string, rounds int) (VolumeReport, error) {
	if rounds <= 0 {
		rounds = 50
	}
	var raw [6]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return VolumeReport{}, err
	}
	sub := "paddock-storage-check-" + hex.EncodeToString(raw[:])
	c := volumeCheck{a: a, b: b, da: filepath.Join(dirA, sub), db: filepath.Join(dirB, sub), rounds: rounds}
	if err := a.MkdirAll(c.da); err != nil {
		return VolumeReport{}, fmt.Errorf("storage check: create %s: %w", c.da, err)
	}
	if err := a.SyncDir(dirA); err != nil {
		return VolumeReport{}, fmt.Errorf("storage check: %w", err)
	}
	defer c.cleanup()
	var r VolumeReport
	for _, check := range []func(context.Context) VolumeProperty{
		c.exclusiveCreate, c.exclusiveLink, c.atomicRename, c.fsyncThenRead,
		c.writeIntoOpened, c.createVisible, c.listingFreshness,
	} {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		r.Properties = append(r.Properties, check(ctx))
	}
	return r, nil
}

type volumeCheck struct {
	a, b   FS
	da, db string // the work directory as each node sees it
	rounds int
}

func (c volumeCheck) cleanup() {
	names, _ := c.a.ReadDirNames(c.da)
	for _, n := range names {
		_ = c.a.Remove(filepath.Join(c.da, n))
	}
	_ = c.a.Remove(c.da)
}

// race runs fa and fb at once, as two nodes do; round decides which is started first.
func race(round int, fa, fb func() error) (errA, errB error) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	runA := func() { wg.Go(func() { <-start; errA = fa() }) }
	runB := func() { wg.Go(func() { <-start; errB = fb() }) }
	if round%2 == 0 {
		runA()
		runB()
	} else {
		runB()
		runA()
	}
	close(start)
	wg.Wait()
	return errA, errB
}

func createExcl(fsys FS, path string) error {
	f, err := fsys.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// oneWinner scores a race of two exclusive operations: exactly one must succeed and the other
// fail with "exists".
func oneWinner(errA, errB error) (ok bool, why string) {
	won := 0
	for _, err := range []error{errA, errB} {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, fs.ErrExist):
			return false, err.Error()
		}
	}
	if won != 1 {
		return false, fmt.Sprintf("%d winners", won)
	}
	return true, ""
}

func (c volumeCheck) exclusiveCreate(context.Context) VolumeProperty {
	p := VolumeProperty{Name: PropExclusiveCreate, OK: true, Rounds: c.rounds}
	winsA := 0
	for i := range c.rounds {
		name := fmt.Sprintf("excl-%d", i)
		errA, errB := race(i, func() error { return createExcl(c.a, filepath.Join(c.da, name)) }, func() error { return createExcl(c.b, filepath.Join(c.db, name)) })
		if ok, why := oneWinner(errA, errB); !ok {
			p.OK, p.Detail = false, fmt.Sprintf("round %d: %s", i, why)
			return p
		}
		if errA == nil {
			winsA++
		}
	}
	p.Detail = fmt.Sprintf("node a won %d, node b %d", winsA, c.rounds-winsA)
	return p
}

func (c volumeCheck) exclusiveLink(context.Context) VolumeProperty {
	p := VolumeProperty{Name: PropExclusiveLink, OK: true, Rounds: c.rounds}
	srcA, srcB := filepath.Join(c.da, "link-src-a"), filepath.Join(c.db, "link-src-b")
	if err := writeNew(c.a, srcA, []byte("a")); err != nil {
		return VolumeProperty{Name: p.Name, Detail: err.Error()}
	}
	if err := writeNew(c.b, srcB, []byte("b")); err != nil {
		return VolumeProperty{Name: p.Name, Detail: err.Error()}
	}
	winsA := 0
	for i := range c.rounds {
		name := fmt.Sprintf("link-%d", i)
		errA, errB := race(i, func() error { return c.a.Link(srcA, filepath.Join(c.da, name)) }, func() error { return c.b.Link(srcB, filepath.Join(c.db, name)) })
		if ok, why := oneWinner(errA, errB); !ok {
			p.OK, p.Detail = false, fmt.Sprintf("round %d: %s", i, why)
			return p
		}
		want := "b"
		if errA == nil {
			want, winsA = "a", winsA+1
		}
		if got, err := readFile(c.b, filepath.Join(c.db, name)); err != nil || string(got) != want {
			p.OK, p.Detail = false, fmt.Sprintf("round %d: the linked name holds %q (%v), the winner's file holds %q", i, got, err, want)
			return p
		}
	}
	p.Detail = fmt.Sprintf("node a won %d, node b %d", winsA, c.rounds-winsA)
	return p
}

// versionContent is a self-checking file body: version, padding, CRC.
func versionContent(v int) []byte {
	body := fmt.Sprintf("v%08d:%s", v, strings.Repeat("x", 4096+v%4096))
	return fmt.Appendf(nil, "%s:%08x", body, crc32.Checksum([]byte(body), castagnoli))
}

func validVersion(b []byte) bool {
	i := bytes.LastIndexByte(b, ':')
	if i < 0 || len(b)-i != 9 {
		return false
	}
	return fmt.Sprintf("%08x", crc32.Checksum(b[:i], castagnoli)) == string(b[i+1:])
}

// staleRetries is how many fresh opens the rename check's reader makes after a stale handle
// (ESTALE) before it counts the read as bad: with renames back to back, one fresh open can
// land on a handle that a later rename made stale too (TestTheVolumeCheckPassesALocalDiskAndNFSWithCloseToOpen
// failed about one run in three under -race with a single retry, and about one in 200 with ten).
const staleRetries = 20

func (c volumeCheck) atomicRename(ctx context.Context) VolumeProperty {
	p := VolumeProperty{Name: PropAtomicRename, OK: true, Rounds: c.rounds}
	target := "rename-target"
	if err := writeFileAtomic(c.a, filepath.Join(c.da, target), versionContent(0), 0); err != nil {
		return VolumeProperty{Name: p.Name, Detail: err.Error()}
	}
	stop := make(chan struct{})
	var reads, bad int
	var firstBad string
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := readFile(c.b, filepath.Join(c.db, target))
			for retry := 0; errors.Is(err, syscall.ESTALE) && retry < staleRetries; retry++ {
				// The file was replaced while this node held it open: a network file
				// system may say so, and a fresh open reads the new one — unless the
				// other node renamed yet another version in meanwhile, as it does here
				// without pause; so a few times, never a partial read.
				b, err = readFile(c.b, filepath.Join(c.db, target))
			}
			reads++
			if err != nil || !validVersion(b) {
				bad++
				if firstBad == "" {
					firstBad = fmt.Sprintf("read %d bytes, %v", len(b), err)
				}
			}
		}
	})
	for v := 1; v <= c.rounds && ctx.Err() == nil; v++ {
		if err := writeFileAtomic(c.a, filepath.Join(c.da, target), versionContent(v), 0); err != nil {
			close(stop)
			wg.Wait()
			return VolumeProperty{Name: p.Name, Rounds: v, Detail: err.Error()}
		}
	}
	close(stop)
	wg.Wait()
	if bad > 0 {
		p.OK, p.Detail = false, fmt.Sprintf("%d of %d reads on the other node saw a partial or missing file (first: %s)", bad, reads, firstBad)
		return p
	}
	p.Detail = fmt.Sprintf("%d reads on the other node, each a whole version", reads)
	return p
}

func (c volumeCheck) fsyncThenRead(context.Context) VolumeProperty {
	p := VolumeProperty{Name: PropFsyncThenRead, OK: true, Rounds: c.rounds}
	for i := range c.rounds {
		data := make([]byte, 1+i*997%(256<<10))
		_, _ = rand.Read(data)
		name := fmt.Sprintf("fsync-%d", i)
		if err := writeNew(c.a, filepath.Join(c.da, name), data); err != nil {
			return VolumeProperty{Name: p.Name, Rounds: i, Detail: err.Error()}
		}
		got, err := readFile(c.b, filepath.Join(c.db, name))
		if err != nil || !bytes.Equal(got, data) {
			p.OK, p.Detail = false, fmt.Sprintf("round %d: %d bytes fsynced, the other node read %d (%v)", i, len(data), len(got), err)
			return p
		}
	}
	p.Detail = "every byte, at once"
	return p
}

// writeIntoOpened is the fence's notice: one node keeps a file it created, the other writes
// into it, and the first must see the write at its next open.
func (c volumeCheck) writeIntoOpened(context.Context) VolumeProperty {
	p := VolumeProperty{Name: PropWriteIntoOpened, OK: true, Rounds: c.rounds}
	for i := range c.rounds {
		name := fmt.Sprintf("notice-%d", i)
		if err := writeNew(c.b, filepath.Join(c.db, name), nil); err != nil {
			return VolumeProperty{Name: p.Name, Rounds: i, Detail: err.Error()}
		}
		if got, err := readFile(c.b, filepath.Join(c.db, name)); err != nil || len(got) != 0 {
			return VolumeProperty{Name: p.Name, Rounds: i, Detail: fmt.Sprintf("a new empty file reads %d bytes (%v)", len(got), err)}
		}
		note := []byte(fmt.Sprintf("written by node a in round %d", i))
		if err := writeSynced(c.a, filepath.Join(c.da, name), os.O_RDWR, note); err != nil {
			return VolumeProperty{Name: p.Name, Rounds: i, Detail: err.Error()}
		}
		if got, err := readFile(c.b, filepath.Join(c.db, name)); err != nil || !bytes.Equal(got, note) {
			p.OK, p.Detail = false, fmt.Sprintf("round %d: node b's next open read %q (%v), want node a's write", i, got, err)
			return p
		}
	}
	p.Detail = "at the next open, every time"
	return p
}

func (c volumeCheck) createVisible(context.Context) VolumeProperty {
	p := VolumeProperty{Name: PropCreateVisible, OK: true, Rounds: c.rounds}
	for i := range c.rounds {
		name := fmt.Sprintf("visible-%d", i)
		if err := writeNew(c.a, filepath.Join(c.da, name), []byte("x")); err != nil {
			return VolumeProperty{Name: p.Name, Rounds: i, Detail: err.Error()}
		}
		if _, err := readFile(c.b, filepath.Join(c.db, name)); err != nil {
			p.OK, p.Detail = false, fmt.Sprintf("round %d: created and closed on node a, node b's open failed: %v", i, err)
			return p
		}
	}
	p.Detail = "at once, every time"
	return p
}

// listingFreshness measures how long the other node's listing takes to show a new file, up to
// a minute; it is reported, never a failure.
func (c volumeCheck) listingFreshness(ctx context.Context) VolumeProperty {
	p := VolumeProperty{Name: PropListingFreshness, OK: true}
	var total time.Duration
	for i := range min(c.rounds, 10) {
		name := fmt.Sprintf("listed-%d", i)
		if err := writeNew(c.a, filepath.Join(c.da, name), nil); err != nil {
			return VolumeProperty{Name: p.Name, OK: true, Detail: "not measured: " + err.Error()}
		}
		start := time.Now()
		for {
			names, err := c.b.ReadDirNames(c.db)
			if err == nil && slices.Contains(names, name) {
				break
			}
			if time.Since(start) > time.Minute || ctx.Err() != nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		took := time.Since(start)
		total += took
		p.Worst = max(p.Worst, took)
		p.Rounds++
	}
	p.Detail = fmt.Sprintf("worst %v, mean %v (informational: nothing rests on a listing)", p.Worst, total/time.Duration(max(p.Rounds, 1)))
	return p
}
