package groups

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/broker/storage"
)

// commitBig commits offset value to every partition in parts of topic "big" with metadata
// meta, and returns the per-partition codes.
func (e *env) commitBig(c *Coordinator, group string, parts []int32, value int64, meta string) map[int32]int16 {
	e.t.Helper()
	return e.commitTopic(c, group, "big", parts, value, meta)
}

// commitTopic commits value+p to every partition p in parts of topic, with metadata meta
// (generation -1), and returns the per-partition codes.
func (e *env) commitTopic(c *Coordinator, group, topic string, parts []int32, value int64, meta string) map[int32]int16 {
	e.t.Helper()
	offs := map[int32]int64{}
	for _, p := range parts {
		offs[p] = value + int64(p)
	}
	return firstTopicCodes(e.commitResp(c, commitReq(group, "", -1, map[string]map[int32]int64{topic: offs}, meta)))
}

// fetchTopic reads every committed offset of topic and its metadata.
func (e *env) fetchTopic(c *Coordinator, group, topic string) (map[int32]int64, map[int32]string, int16) {
	e.t.Helper()
	g := e.offsetFetch(c, group)
	offs, metas := map[int32]int64{}, map[int32]string{}
	for _, t := range g.Topics {
		if t.Topic != topic {
			continue
		}
		for _, p := range t.Partitions {
			offs[p.Partition] = p.Offset
			if p.Metadata != nil {
				metas[p.Partition] = *p.Metadata
			}
		}
	}
	return offs, metas, g.ErrorCode
}

func allParts(n int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestTheOffsetsFileStaysBoundedWhileTheEpochStays: a group committing the same 64 partitions
// over and over at one coordinator epoch (~256 KB a commit, 10 MB in all) keeps an offsets
// file of about its state's size, not one that grows by every commit; the next coordinator
// reads exactly the last commit.
func TestTheOffsetsFileStaysBoundedWhileTheEpochStays(t *testing.T) {
	e := newEnv(t)
	meta := strings.Repeat("m", 4000)
	var last int64
	for i := range 40 {
		last = int64(i) * 1000
		for p, code := range e.commitBig(e.c, "g", allParts(64), last, meta) {
			if code != 0 {
				t.Fatalf("commit %d partition %d: %s", i, p, codeName(code))
			}
		}
	}
	files := logFiles(t, groupDir(e, "g"))
	if len(files) != 1 {
		t.Fatalf("files %v, want the epoch's one offsets file", files)
	}
	size := fileSize(t, filepath.Join(groupDir(e, "g"), files[0]))
	t.Logf("after 40 commits of 64 partitions (10 MB of frames) the offsets file is %d bytes", size)
	if size > 2<<20 {
		t.Fatalf("the offsets file is %d bytes after 40 commits of the same 64 partitions: it grows by every commit", size)
	}
	_ = e.c.Close()
	got, metas, code := e.fetchTopic(e.start(2), "g", "big")
	if code != 0 || len(got) != 64 {
		t.Fatalf("after a takeover: %d offsets, %s", len(got), codeName(code))
	}
	for p, v := range got {
		if v != last+int64(p) || metas[p] != meta {
			t.Fatalf("partition %d: offset %d (metadata %d bytes), want %d with the committed metadata", p, v, len(metas[p]), last+int64(p))
		}
	}
}

// crashFS fails every operation from the armed one on, as if the process died there: nothing
// after it reaches the disk. Operations before arming pass.
type crashFS struct {
	*faultFS
	ops    atomic.Int64 // operations since arming
	at     atomic.Int64 // the operation that "crashes" (0: disarmed)
	failed atomic.Bool
}

func newCrashFS() *crashFS {
	c := &crashFS{faultFS: newFaultFS()}
	c.set(func(storage.Op, string) error {
		at := c.at.Load()
		if at == 0 {
			return nil
		}
		if c.ops.Add(1) >= at {
			c.failed.Store(true)
			return syscall.EIO
		}
		return nil
	})
	return c
}

func (c *crashFS) arm(at int64) { c.ops.Store(0); c.at.Store(at) }

// TestACrashAtEveryStepOfACompactionLosesNoAcknowledgedCommit: a group commits large commits
// at one epoch, so its file is compacted several times; the process "dies" at operation k of
// that sequence (every operation from k on fails), for every k until the sequence completes.
// A coordinator at the next epoch must then have every acknowledged commit, with its
// metadata. The same holds for the same process once its disk works again (the group reloads
// its own file, cut at what it acknowledged).
func TestACrashAtEveryStepOfACompactionLosesNoAcknowledgedCommit(t *testing.T) {
	meta := strings.Repeat("x", 4000)
	for _, sameProcess := range []bool{false, true} {
		for k := int64(1); ; k++ {
			cfs := newCrashFS()
			m := NewMetrics()
			// LoadWait a minute: a reload on a loaded machine may take longer than the default 1 s.
			e := newEnv(t, func(c *Config) { c.FS, c.Metrics, c.LoadWait = cfs, m, time.Minute })
			if code := e.commitBig(e.c, "g", allParts(64), 0, meta)[0]; code != 0 {
				t.Fatal(codeName(code))
			}
			acked := int64(0)
			cfs.arm(k)
			for i := int64(1); i <= 12; i++ {
				if e.commitBig(e.c, "g", allParts(64), i*1000, meta)[0] == 0 {
					acked = i * 1000
				}
				if cfs.failed.Load() {
					break
				}
			}
			crashed := cfs.failed.Load()
			next := e.c
			if sameProcess {
				cfs.arm(0)
			} else {
				_ = e.c.Close()
				next = e.start(2, func(c *Config) { c.FS = storage.OSFS{} })
			}
			got, metas, code := e.fetchTopic(next, "g", "big")
			if code != 0 {
				t.Fatalf("crash at op %d (same process %v): the group answers %s", k, sameProcess, codeName(code))
			}
			for p := range int32(64) {
				if got[p] < acked+int64(p) || metas[p] != meta {
					t.Fatalf("crash at op %d (same process %v): partition %d has %d (metadata %d bytes), but %d was acknowledged",
						k, sameProcess, p, got[p], len(metas[p]), acked+int64(p))
				}
			}
			if sameProcess {
				// It serves on: a commit now is there for the next coordinator.
				if code := e.commitBig(next, "g", allParts(64), 99000, meta)[0]; code != 0 {
					t.Fatalf("crash at op %d: commit after the disk recovered: %s", k, codeName(code))
				}
				_ = next.Close()
				if got, _, code := e.fetchTopic(e.start(2), "g", "big"); code != 0 || got[63] != 99063 {
					t.Fatalf("crash at op %d: after recovery and a takeover partition 63 = %d (%s), want 99063", k, got[63], codeName(code))
				}
			}
			if !crashed {
				if n := value(t, m.compactions); n < 2 {
					t.Fatalf("only %v compactions in the sequence: the test does not exercise them", n)
				}
				t.Logf("same process %v: a crash at each of the first %d operations of 12 large commits (and %v compactions) lost nothing acknowledged",
					sameProcess, k-1, value(t, m.compactions))
				break
			}
		}
	}
}

// recordingFS remembers the largest single read.
type recordingFS struct {
	storage.FS
	mu      sync.Mutex
	maxRead int
}

type recordingFile struct {
	storage.File
	fs *recordingFS
}

func (r *recordingFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	f, err := r.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return recordingFile{f, r}, nil
}

func (r recordingFile) ReadAt(p []byte, off int64) (int, error) {
	r.fs.mu.Lock()
	r.fs.maxRead = max(r.fs.maxRead, len(p))
	r.fs.mu.Unlock()
	return r.File.ReadAt(p, off)
}

// TestTheLoaderStreamsTheFile: a 24 MB offsets file (a snapshot and a hundred 240 KB commits
// left by a coordinator whose process died) is read in pieces no larger than its largest
// frame, never whole.
func TestTheLoaderStreamsTheFile(t *testing.T) {
	// Loading 24 MB on a loaded machine can take longer than the default LoadWait (1 s): the
	// fetch would be answered COORDINATOR_LOAD_IN_PROGRESS, which is not what this test pins.
	e := newEnv(t, func(c *Config) { c.LoadWait = time.Minute })
	e.commitBig(e.c, "g", []int32{0}, 1, "")
	_ = e.c.Close()
	path := filepath.Join(groupDir(e, "g"), logName(1))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	meta := strings.Repeat("y", 3700)
	var entries []offsetEntry
	for p := range int32(64) {
		entries = append(entries, offsetEntry{tp: tp{"big", p}, committed: committed{topicID: [16]byte{3}, offset: 77, leaderEpoch: -1, metadata: meta}})
	}
	fr := frame(commitPayload("", entries))
	for range 100 {
		if _, err := f.Write(fr); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rfs := &recordingFS{FS: storage.OSFS{}}
	got, _, code := e.fetchTopic(e.start(2, func(c *Config) { c.FS = rfs }), "g", "big")
	if code != 0 || len(got) != 64 || got[5] != 77 {
		t.Fatalf("loaded %d offsets (%s), partition 5 = %d", len(got), codeName(code), got[5])
	}
	rfs.mu.Lock()
	defer rfs.mu.Unlock()
	t.Logf("file of %d bytes read in pieces of at most %d bytes (frames of %d)", fileSize(t, path), rfs.maxRead, len(fr))
	if rfs.maxRead > 2*len(fr) {
		t.Fatalf("the loader read %d bytes at once from a file of frames of %d bytes: it reads the whole file", rfs.maxRead, len(fr))
	}
}

// TestAStateLargerThan64MiBKeepsItsCommittedOffsets: 67 partitions with 1 MiB of metadata each
// (allowed by offset.metadata.max.bytes = 1 MiB) make a state above 64 MiB. A takeover
// snapshots it; the commit of 999 acknowledged after that must be what the next coordinator
// reads — not the 1 of the file before, with the newer file pruned.
func TestAStateLargerThan64MiBKeepsItsCommittedOffsets(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test writes ~70 MB several times; make test runs it (no -short)")
	}
	e := newEnv(t, func(c *Config) { c.MaxMetadataSize, c.LoadWait = 1<<20, time.Minute })
	e.topics.set("huge", [16]byte{4}, 67)
	meta := strings.Repeat("z", 1<<20)
	for first := int32(0); first < 67; first += 10 {
		parts := allParts(min(first+10, 67))[first:]
		for p, code := range e.commitTopic(e.c, "g", "huge", parts, 1, meta) {
			if code != 0 {
				t.Fatalf("partition %d: %s", p, codeName(code))
			}
		}
	}
	_ = e.c.Close()
	c2 := e.start(2)
	if code := e.commitTopic(c2, "g", "huge", []int32{0}, 999, "")[0]; code != 0 {
		t.Fatalf("commit at epoch 2: %s", codeName(code))
	}
	_ = c2.Close()
	got, metas, code := e.fetchTopic(e.start(3), "g", "huge")
	if code != 0 || got[0] != 999 {
		t.Fatalf("partition 0 reads %d (%s) after the takeover, but 999 was acknowledged", got[0], codeName(code))
	}
	if len(got) != 67 || got[66] != 1+66 || metas[66] != meta {
		t.Fatalf("%d offsets, partition 66 = %d with %d bytes of metadata", len(got), got[66], len(metas[66]))
	}
}

// checkedFrame is a frame of payload whose CRC checks, even beyond the size a writer writes.
func checkedFrame(payload []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(payload, castagnoli))
	return append(b, payload...)
}

// TestAnOverlongFrameIsCorruptionNotAnIncompleteFile: file 2 starts with a snapshot frame
// longer than any frame the loader accepts, and its CRC checks (an older paddock wrote a state
// over 64 MiB as one frame). The loader must refuse the group — not load file 1's older
// offsets and prune file 2 — keep the file, and count a storage error.
func TestAnOverlongFrameIsCorruptionNotAnIncompleteFile(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test writes a 64 MiB frame; make test runs it (no -short)")
	}
	m := NewMetrics()
	e := newEnv(t, func(c *Config) { c.Metrics = m })
	e.commit(e.c, "g", "", -1, map[int32]int64{0: 1})
	_ = e.c.Close()
	s, err := openStore(storage.OSFS{}, e.dir, "g", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.claim(2); err != nil {
		t.Fatal(err)
	}
	big := newDurable()
	big.offsets[tp{"t", 0}] = committed{topicID: [16]byte{1}, offset: 999, leaderEpoch: -1, metadata: strings.Repeat("q", 64<<20)}
	p := []byte{kindSnapshot, 1}
	p = appendStr(p, "g")
	p = binary.AppendVarint(p, 2)
	p = appendStr(p, "")
	p = binary.AppendUvarint(p, 1)
	p = appendOffset(p, offsetEntry{tp{"t", 0}, big.offsets[tp{"t", 0}]})
	path2 := filepath.Join(groupDir(e, "g"), logName(2))
	if err := os.WriteFile(path2, checkedFrame(p), 0o644); err != nil {
		t.Fatal(err)
	}
	before := value(t, m.storageErrs)
	got, code := e.fetch(e.start(3), "g", 0)
	if code == 0 {
		t.Fatalf("the group loaded (offsets %v) past a frame it cannot read: want it refused", got)
	}
	if _, err := os.Stat(path2); err != nil {
		t.Fatalf("the file with the over-long frame was removed: %v", err)
	}
	if files := logFiles(t, groupDir(e, "g")); !slices.Contains(files, logName(1)) {
		t.Fatalf("files %v: the older file must stay too", files)
	}
	if value(t, m.storageErrs) <= before {
		t.Fatal("the refusal was not counted as a storage error")
	}
}

// TestACheckedOverlongFrameAfterTheSnapshotIsRefusedNotCut: a change frame whose checked
// length exceeds the limit is corruption; one whose length is garbage (its CRC does not
// check) is a torn tail.
func TestACheckedOverlongFrameAfterTheSnapshotIsRefusedNotCut(t *testing.T) {
	b, _ := sampleFile()
	huge := make([]byte, maxFrame+1)
	huge[0] = kindCommit
	if _, err := parseFile(append(bytes.Clone(b), checkedFrame(huge)...)); err == nil || errors.Is(err, errIncomplete) {
		t.Fatalf("a checked frame over the limit: %v, want it refused as corruption", err)
	}
	torn := checkedFrame(huge)
	torn[len(torn)-1] ^= 1
	pf, err := parseFile(append(bytes.Clone(b), torn...))
	if err != nil || pf.valid != int64(len(b)) {
		t.Fatalf("an over-long frame whose CRC does not check: %v valid %d, want a torn tail at %d", err, pf.valid, len(b))
	}
}
