package groups

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/broker/storage"
)

func TestDirNamesAreInjectiveAndReversible(t *testing.T) {
	ids := []string{"", "g", "my-group_1.x", ".", "..", "a/b", "a%2Fb", "%", "ünïcode", "a b", strings.Repeat("x", 200), strings.Repeat("/", 80), strings.Repeat("y", 5000)}
	seen := map[string]string{}
	for _, id := range ids {
		name := dirName(id)
		if prev, ok := seen[name]; ok {
			t.Fatalf("%q and %q share directory %q", prev, id, name)
		}
		seen[name] = id
		if len(name) > 255 || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
			t.Fatalf("%q: directory name %q is not a safe file name", id, name)
		}
		got, hashed, ok := parseDirName(name)
		switch {
		case !ok:
			t.Fatalf("%q: %q does not parse", id, name)
		case hashed && len(id) <= maxEscapedName/3:
			t.Fatalf("%q: a short id was hashed", id)
		case !hashed && got != id:
			t.Fatalf("%q: parsed back as %q", id, got)
		}
	}
	for _, bad := range []string{"x", "g-a%2f", "g-%41", "g-a b", "h-zz", "h-" + strings.Repeat("0", 31), "g-%", "g-%4"} {
		if _, _, ok := parseDirName(bad); ok {
			t.Fatalf("%q parsed; dirName never writes it", bad)
		}
	}
}

func TestLogNames(t *testing.T) {
	for _, e := range []int32{0, 7, 1<<31 - 1} {
		if got, ok := parseLogName(logName(e)); !ok || got != e {
			t.Fatalf("%d: %q → %d %v", e, logName(e), got, ok)
		}
	}
	for _, bad := range []string{"7.log", "000000007.log", "00000000007.log", "0000000007.tmp", "-000000007.log", "9999999999.log"} {
		if _, ok := parseLogName(bad); ok {
			t.Fatalf("%q parsed", bad)
		}
	}
}

func sampleState() *durable {
	d := newDurable()
	d.protocolType, d.emptySinceMs = "consumer", 1699999999999
	d.offsets[tp{"t", 0}] = committed{topicID: [16]byte{1}, offset: 10, leaderEpoch: 3, metadata: "m", commitMs: 1700000000000}
	d.offsets[tp{"t", 1}] = committed{offset: -1, leaderEpoch: -1}
	d.offsets[tp{"ü", 1 << 30}] = committed{topicID: [16]byte{2}, offset: 1 << 62, metadata: strings.Repeat("x", 300)}
	return d
}

// sampleFile is a snapshot of sampleState and a change of every kind, and the state they make.
func sampleFile() ([]byte, *durable) {
	d := sampleState()
	b := encodeSnapshot("grp", 4, d)
	dec := &decoder{d: d.clone(), topics: map[string]string{}}
	changes := [][]byte{
		commitPayload("consumer", []offsetEntry{{tp: tp{"t", 2}, committed: committed{offset: 5}}, {tp: tp{"u", 0}, committed: committed{topicID: [16]byte{7}, offset: 6, expireMs: 1700000999000}}}),
		deletePayload([]tp{{"t", 1}}),
		purgePayload("u", [16]byte{7}),
		emptySincePayload(1700000000123),
		commitPayload("", []offsetEntry{{tp: tp{"t", 0}, committed: committed{offset: 11, leaderEpoch: 4}}}),
		emptySincePayload(0),
	}
	for _, c := range changes {
		if err := dec.apply(c); err != nil {
			panic(err)
		}
		b = append(b, frame(c)...)
	}
	return b, dec.d
}

func sameState(a, b *durable) bool {
	return a.protocolType == b.protocolType && a.consumer == b.consumer && a.emptySinceMs == b.emptySinceMs && maps.Equal(a.offsets, b.offsets) &&
		maps.EqualFunc(a.txn, b.txn, func(x, y *pendingTxn) bool { return x.epoch == y.epoch && maps.Equal(x.offsets, y.offsets) })
}

// sampleTxnFile is a state with pending transactional offsets of two producers (one stale
// after a plain commit), snapshotted as version 4, then a transactional commit, a plain
// commit, a completion of each kind and a delete, and the state they make.
func sampleTxnFile() ([]byte, *durable) {
	d := sampleState()
	d.txnSeq = applyTxnCommit(d.txn, d.txnSeq, 7, 2, 0, []offsetEntry{{tp: tp{"t", 0}, committed: committed{offset: 40, leaderEpoch: -1, metadata: "x", commitMs: 9}}})
	d.txnSeq = applyTxnCommit(d.txn, d.txnSeq, 9, 0, 1, []offsetEntry{{tp: tp{"t", 0}, committed: committed{offset: 41, commitMs: 10}}, {tp: tp{"t", 5}, committed: committed{offset: 3}}})
	markStale(d.txn, []tp{{"t", 5}})
	b := encodeSnapshot("grp", 4, d)
	dec := &decoder{d: d.clone(), topics: map[string]string{}}
	changes := [][]byte{
		txnCommitPayload(7, 3, 2, []offsetEntry{{tp: tp{"t", 1}, committed: committed{offset: 50, expireMs: 0}}}),
		commitPayload("", []offsetEntry{{tp: tp{"t", 1}, committed: committed{offset: 12}}}),
		txnCompletePayload(9, true),
		txnCompletePayload(42, false),
		txnCommitPayload(11, 0, 3, []offsetEntry{{tp: tp{"u", 0}, committed: committed{offset: 1}}, {tp: tp{"u", 1}, committed: committed{offset: 2}}}),
		deletePayload([]tp{{"u", 1}}),
	}
	for _, c := range changes {
		if err := dec.apply(c); err != nil {
			panic(err)
		}
		b = append(b, frame(c)...)
	}
	return b, dec.d
}

// The transactional frames replay Apache's rules: a plain commit after a pending offset makes
// it stale (not applied at commit), a commit applies a producer's fresh offsets and makes the
// other producers' earlier ones stale, a delete drops pending offsets too.
func TestTransactionalFramesReplayApachesOrder(t *testing.T) {
	b, want := sampleTxnFile()
	pf, err := parseFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !sameState(pf.state, want) {
		t.Fatalf("parsed %+v, want %+v", pf.state, want)
	}
	st := pf.state
	if c := st.offsets[tp{"t", 0}]; c.offset != 41 {
		t.Fatalf("t/0 = %d, want 41 (producer 9's commit)", c.offset)
	}
	if _, ok := st.offsets[tp{"t", 5}]; ok {
		t.Fatal("a stale pending offset was applied")
	}
	if st.txn[9] != nil || st.txn[7] == nil || !st.txn[7].offsets[tp{"t", 0}].stale || !st.txn[7].offsets[tp{"t", 1}].stale {
		t.Fatalf("pending after replay: %+v", st.txn[7])
	}
	if p := st.txn[11]; p == nil || len(p.offsets) != 1 {
		t.Fatalf("producer 11 pending %+v, want u/0 only", p)
	}
	again, err := parseFile(encodeSnapshot("grp", 4, st))
	if err != nil || !sameState(again.state, st) {
		t.Fatalf("version-4 snapshot round trip: %v", err)
	}
	if v := encodeSnapshot("grp", 4, newDurable())[frameHeaderSize+1]; v != snapshotVersionNoTxn {
		t.Fatalf("a state without pending offsets is written as version %d, want %d", v, snapshotVersionNoTxn)
	}
}

func TestFileRoundTrip(t *testing.T) {
	b, want := sampleFile()
	pf, err := parseFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if pf.groupID != "grp" || pf.epoch != 4 || pf.valid != int64(len(b)) || !sameState(pf.state, want) {
		t.Fatalf("parsed %q epoch %d valid %d/%d state %+v, want %+v", pf.groupID, pf.epoch, pf.valid, len(b), pf.state, want)
	}
	if _, ok := pf.state.offsets[tp{"u", 0}]; ok {
		t.Fatal("purged offset survived")
	}
	g := append(encodeSnapshot("grp", 4, pf.state), frame(deleteGroupPayload())...)
	pf, err = parseFile(g)
	if err != nil || len(pf.state.offsets) != 0 || pf.state.protocolType != "" {
		t.Fatalf("delete-group: %v %+v", err, pf.state)
	}
}

// legacyFile is a file as the first format wrote it: the whole state in one snapshot frame
// (version 1), commits without expiry (kind 2).
func legacyFile() []byte {
	p := []byte{kindSnapshot, 1}
	p = appendStr(p, "old")
	p = binary.AppendVarint(p, 3)
	p = appendStr(p, "consumer")
	p = binary.AppendUvarint(p, 2)
	p = appendOffsetV1(p, offsetEntry{tp{"t", 0}, committed{topicID: [16]byte{1}, offset: 10, leaderEpoch: 2, metadata: "m", commitMs: 5}})
	p = appendOffsetV1(p, offsetEntry{tp{"t", 1}, committed{offset: 11, leaderEpoch: -1, commitMs: 6}})
	c := []byte{kindCommitV1}
	c = appendStr(c, "")
	c = binary.AppendUvarint(c, 1)
	c = appendOffsetV1(c, offsetEntry{tp{"t", 1}, committed{offset: 12, leaderEpoch: -1, commitMs: 7}})
	return append(frame(p), frame(c)...)
}

func TestFilesOfTheFirstFormatStillLoad(t *testing.T) {
	pf, err := parseFile(legacyFile())
	if err != nil {
		t.Fatal(err)
	}
	want := map[tp]committed{
		{"t", 0}: {topicID: [16]byte{1}, offset: 10, leaderEpoch: 2, metadata: "m", commitMs: 5},
		{"t", 1}: {offset: 12, leaderEpoch: -1, commitMs: 7},
	}
	if pf.groupID != "old" || pf.epoch != 3 || pf.state.protocolType != "consumer" || pf.state.emptySinceMs != 0 || !maps.Equal(pf.state.offsets, want) {
		t.Fatalf("parsed %q epoch %d %+v", pf.groupID, pf.epoch, pf.state)
	}
}

func TestASnapshotOfAnyStateIsWrittenInBoundedParts(t *testing.T) {
	d := newDurable()
	for p := range int32(20000) {
		d.offsets[tp{"topic", p}] = committed{offset: int64(p), leaderEpoch: -1, metadata: strings.Repeat("m", 100), commitMs: 1}
	}
	b := encodeSnapshot("g", 1, d)
	frames, largest := 0, 0
	for fr := (&frameReader{src: bytes.NewReader(b), size: int64(len(b))}); ; frames++ {
		p, err := fr.next()
		if err != nil {
			break
		}
		largest = max(largest, len(p))
	}
	if frames < 8 || largest > snapshotPartBytes+200 {
		t.Fatalf("a %d-byte snapshot in %d frames, the largest %d bytes", len(b), frames, largest)
	}
	pf, err := parseFile(b)
	if err != nil || !sameState(pf.state, d) || pf.snapEnd != int64(len(b)) {
		t.Fatalf("round trip: %v", err)
	}
}

func TestTornTailEndsTheFileAtTheLastWholeFrame(t *testing.T) {
	b, _ := sampleFile()
	full, _ := parseFile(b)
	// Every cut inside the last frame, and every single-byte flip in it, ends the file at the
	// frame before it.
	last := frame(commitPayload("", []offsetEntry{{tp: tp{"t", 3}, committed: committed{offset: 77}}}))
	whole := append(bytes.Clone(b), last...)
	for cut := 1; cut < len(last); cut++ {
		pf, err := parseFile(whole[:len(b)+cut])
		if err != nil || pf.valid != int64(len(b)) || !sameState(pf.state, full.state) {
			t.Fatalf("cut %d: %v valid %d", cut, err, pf.valid)
		}
	}
	for i := range last {
		flipped := bytes.Clone(whole)
		flipped[len(b)+i] ^= 0x40
		pf, err := parseFile(flipped)
		if err != nil || pf.valid != int64(len(b)) {
			t.Fatalf("flip at %d: %v valid %d", i, err, pf.valid)
		}
	}
}

func TestIncompleteSnapshotIsReportedAsSuch(t *testing.T) {
	snap := encodeSnapshot("g", 1, sampleState())
	header := encodeSnapshot("g", 1, newDurable())
	for _, b := range [][]byte{nil, snap[:3], snap[:len(header)], snap[:len(snap)-1], frame(commitPayload("", nil))} {
		if _, err := parseFile(b); !errors.Is(err, errIncomplete) {
			t.Fatalf("%d bytes: %v, want errIncomplete", len(b), err)
		}
	}
}

func TestUnknownVersionsAndKindsAreRefusedNotSkipped(t *testing.T) {
	snap := encodeSnapshot("g", 1, newDurable())
	p := bytes.Clone(snap[frameHeaderSize:])
	p[1] = snapshotVersion + 1
	if _, err := parseFile(frame(p)); err == nil || errors.Is(err, errIncomplete) {
		t.Fatalf("snapshot version %d: %v, want a refusal", p[1], err)
	}
	b := append(encodeSnapshot("g", 1, sampleState()), frame([]byte{99, 1, 2})...)
	if _, err := parseFile(b); err == nil || errors.Is(err, errIncomplete) {
		t.Fatalf("frame kind 99: %v, want a refusal", err)
	}
}

// FuzzParseFile feeds the loader arbitrary bytes: it must never panic or allocate beyond the
// input, and whatever it accepts must re-encode to the same state.
func FuzzParseFile(f *testing.F) {
	b, _ := sampleFile()
	f.Add(b)
	f.Add(encodeSnapshot("", 0, newDurable()))
	f.Add(legacyFile())
	f.Add(b[:len(b)/2])
	tb, _ := sampleTxnFile()
	f.Add(tb)
	f.Fuzz(func(t *testing.T, b []byte) {
		pf, err := parseFile(b)
		if err != nil {
			return
		}
		if pf.valid < frameHeaderSize || pf.valid > int64(len(b)) {
			t.Fatalf("valid %d of %d", pf.valid, len(b))
		}
		again, err := parseFile(encodeSnapshot(pf.groupID, pf.epoch, pf.state))
		if err != nil || !sameState(again.state, pf.state) || again.groupID != pf.groupID || again.epoch != pf.epoch {
			t.Fatalf("re-encoded state differs: %v", err)
		}
		// Bytes after the valid prefix never change what the prefix says.
		prefix, err := parseFile(b[:pf.valid])
		if err != nil || !sameState(prefix.state, pf.state) || prefix.valid != pf.valid {
			t.Fatalf("prefix parses differently: %v", err)
		}
	})
}

// TestFuzzCorpusIsCommitted keeps the seed corpus in testdata/fuzz in step with the format.
func TestFuzzCorpusIsCommitted(t *testing.T) {
	ents, err := os.ReadDir(filepath.Join("testdata", "fuzz", "FuzzParseFile"))
	if err != nil || len(ents) < 3 {
		t.Fatalf("the seed corpus testdata/fuzz/FuzzParseFile is missing: %v (%d files)", err, len(ents))
	}
}

// snapshotV2 is a file as snapshot version 2 wrote it: the header without the group type,
// the offsets in one part frame, then a commit and an Empty-since change.
func snapshotV2(group string, epoch int32) []byte {
	h := []byte{kindSnapshot, 2}
	h = appendStr(h, group)
	h = binary.AppendVarint(h, int64(epoch))
	h = appendStr(h, "consumer")
	h = binary.AppendVarint(h, 1700000000000)
	h = binary.AppendUvarint(h, 2)
	p := binary.AppendUvarint([]byte{kindSnapshotPart}, 2)
	p = appendOffset(p, offsetEntry{tp{"t", 0}, committed{topicID: [16]byte{1}, offset: 20, leaderEpoch: 2, commitMs: 5}})
	p = appendOffset(p, offsetEntry{tp{"t", 1}, committed{offset: 21, leaderEpoch: -1, commitMs: 6}})
	b := append(frame(h), frame(p)...)
	b = append(b, frame(commitPayload("", []offsetEntry{{tp: tp{"t", 1}, committed: committed{offset: 22, leaderEpoch: -1, commitMs: 7}}}))...)
	return append(b, frame(emptySincePayload(1700000000500))...)
}

// snapshotV1 is legacyFile's format for another group id.
func snapshotV1(group string, epoch int32) []byte {
	p := []byte{kindSnapshot, 1}
	p = appendStr(p, group)
	p = binary.AppendVarint(p, int64(epoch))
	p = appendStr(p, "consumer")
	p = binary.AppendUvarint(p, 2)
	p = appendOffsetV1(p, offsetEntry{tp{"t", 0}, committed{topicID: [16]byte{1}, offset: 20, leaderEpoch: 2, commitMs: 5}})
	p = appendOffsetV1(p, offsetEntry{tp{"t", 1}, committed{offset: 21, leaderEpoch: -1, commitMs: 6}})
	c := []byte{kindCommitV1}
	c = appendStr(c, "")
	c = binary.AppendUvarint(c, 1)
	c = appendOffsetV1(c, offsetEntry{tp{"t", 1}, committed{offset: 22, leaderEpoch: -1, commitMs: 7}})
	return append(frame(p), frame(c)...)
}

// snapshotV3 is this version's snapshot of a consumer (KIP-848) group, then a group-type frame
// that keeps it one and the same commit.
func snapshotV3(group string, epoch int32) []byte {
	d := newDurable()
	d.protocolType, d.consumer, d.emptySinceMs = "consumer", true, 1700000000000
	d.offsets[tp{"t", 0}] = committed{topicID: [16]byte{1}, offset: 20, leaderEpoch: 2, commitMs: 5}
	d.offsets[tp{"t", 1}] = committed{offset: 21, leaderEpoch: -1, commitMs: 6}
	b := append(encodeSnapshot(group, epoch, d), frame(groupTypePayload(true))...)
	return append(b, frame(commitPayload("", []offsetEntry{{tp: tp{"t", 1}, committed: committed{offset: 22, leaderEpoch: -1, commitMs: 7}}}))...)
}

// snapshotV4 is snapshotV3 with a pending transactional offset (which a plain commit of
// t/1 then makes stale).
func snapshotV4(group string, epoch int32) []byte {
	d := newDurable()
	d.protocolType, d.consumer, d.emptySinceMs = "consumer", true, 1700000000000
	d.offsets[tp{"t", 0}] = committed{topicID: [16]byte{1}, offset: 20, leaderEpoch: 2, commitMs: 5}
	d.offsets[tp{"t", 1}] = committed{offset: 21, leaderEpoch: -1, commitMs: 6}
	d.txnSeq = applyTxnCommit(d.txn, 0, 5, 1, 0, []offsetEntry{{tp: tp{"t", 1}, committed: committed{offset: 99, leaderEpoch: -1}}})
	b := append(encodeSnapshot(group, epoch, d), frame(groupTypePayload(true))...)
	return append(b, frame(commitPayload("", []offsetEntry{{tp: tp{"t", 1}, committed: committed{offset: 22, leaderEpoch: -1, commitMs: 7}}}))...)
}

// A group file of every snapshot version this coordinator has written (1: the whole state in
// one frame; 2: header and parts; 3: the group type in the header) is taken over by the next
// coordinator with its offsets and type, and the file that coordinator writes (the current
// version) is taken over again by the one after.
func TestEverySnapshotVersionLoadsAtTheNextCoordinator(t *testing.T) {
	if snapshotVersion != 4 {
		t.Fatalf("snapshot version %d: add its file to this test", snapshotVersion)
	}
	for _, v := range []struct {
		version  int
		file     func(string, int32) []byte
		consumer bool
	}{{1, snapshotV1, false}, {2, snapshotV2, false}, {3, snapshotV3, true}, {4, snapshotV4, true}} {
		t.Run(fmt.Sprint("version ", v.version), func(t *testing.T) {
			e := newEnv(t)
			_ = e.c.Close()
			s, err := openStore(storage.OSFS{}, e.dir, "g", true)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.claim(3); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(groupDir(e, "g"), logName(3)), v.file("g", 3), 0o644); err != nil {
				t.Fatal(err)
			}
			for epoch := int32(4); epoch <= 5; epoch++ {
				c := e.start(epoch)
				if got, code := e.fetch(c, "g"); code != 0 || got[0] != 20 || got[1] != 22 || len(got) != 2 {
					t.Fatalf("epoch %d: offsets %v %s, want 0:20 1:22", epoch, got, codeName(code))
				}
				d := e.cgDescribe(c, "g")
				if isConsumer := d.ErrorCode == 0; isConsumer != v.consumer {
					t.Fatalf("epoch %d: ConsumerGroupDescribe %s %s, want a consumer group: %v", epoch, codeName(d.ErrorCode), d.State, v.consumer)
				}
				if !v.consumer {
					if g := e.describe(c, "g"); g.ProtocolType != "consumer" || g.State != "Empty" {
						t.Fatalf("epoch %d: DescribeGroups %s %q", epoch, g.State, g.ProtocolType)
					}
				}
				_ = c.Close()
			}
		})
	}
}
