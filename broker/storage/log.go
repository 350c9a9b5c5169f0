package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Acks is a Produce request's acks.
type Acks int16

const (
	// AcksNone (acks=0): return once written; the producer gets no response.
	AcksNone Acks = 0
	// AcksLeader (acks=1): acknowledge once written and the fence still holds this epoch.
	AcksLeader Acks = 1
	// AcksAll (acks=-1): acknowledge once fsynced and the fence still holds this epoch.
	AcksAll Acks = -1
)

// AppendResult is what a Produce response needs about an appended batch.
type AppendResult struct {
	BaseOffset int64 // offset of the batch's first record
	LastOffset int64 // offset of its last record
	// LogAppendTime is the time the log stamped (ms), or -1 for a CreateTime topic.
	LogAppendTime  int64
	LogStartOffset int64
	// Duplicate is true when the batch was a producer's retry of one already in the log:
	// nothing was appended and the offsets are the original's.
	Duplicate bool
}

// ReadResult is a Read's batches and the offsets a Fetch response reports with them.
type ReadResult struct {
	// Records holds whole record batches exactly as stored (base offsets and leader epochs
	// assigned), all below HighWatermark (below LastStableOffset for a READ_COMMITTED read).
	// Empty when there is nothing to read yet.
	Records          []byte
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	LogEndOffset     int64
	// Aborted is, for a READ_COMMITTED read (ReadCommitted, ReadSectionCommitted), the
	// aborted transactions overlapping the returned batches — Apache's collectAbortedTxns:
	// every ABORT marker at or after the read offset whose transaction began before the
	// offset after the last returned batch — in log order; non-nil and empty when none (or
	// no batch) is returned. Nil for a READ_UNCOMMITTED read.
	Aborted []AbortedTxn
}

// Isolation is a Fetch's isolation level.
type Isolation int8

const (
	// ReadUncommitted reads up to the high watermark.
	ReadUncommitted Isolation = 0
	// ReadCommitted reads up to the last stable offset, with the aborted transactions.
	ReadCommitted Isolation = 1
)

// Offsets are the log's current bounds.
type Offsets struct {
	LogStart      int64 // first offset that can be read
	HighWatermark int64 // offsets below it are durable and fence-checked: readable
	LogEnd        int64 // offset the next batch will get
}

// TimestampOffset answers a ListOffsets lookup.
type TimestampOffset struct {
	Timestamp   int64
	Offset      int64
	LeaderEpoch int32
}

type logState int

const (
	stateOpen       logState = iota // Open returned; Takeover not yet called
	stateTakingOver                 // Takeover running
	stateServing                    // appends and reads served
	stateStopped                    // relinquished, fenced or failed; see Log.stopErr
)

// round is one group commit: every append written before the flusher captured it is made
// durable (fsync), then the fence is checked, then done is closed with err set.
type round struct {
	done chan struct{}
	err  error
}

func newRound() *round { return &round{done: make(chan struct{})} }

// epochStart is one entry of the leader-epoch history: epoch's first offset.
type epochStart struct {
	epoch int32
	start int64
}

var logIDs atomic.Uint64

// Log is one partition's log on the shared volume, led by this process at one leader epoch.
// Its life is Open → Takeover → serve (Append, Read, ...) → Relinquish; it never leads twice
// (open a new Log to lead again at a higher epoch). Every method is safe for concurrent use.
//
// One goroutine, the flusher, owns durability: it fsyncs for every round of appends (group
// commit), checks the fence, advances the high watermark, rolls segments, applies retention,
// and is the one that closes the log's files. Appends write under mu, in order, while the
// flusher fsyncs what was written before.
type Log struct {
	id    uint64
	dir   string
	opts  Options
	fsys  FS
	cache *FileCache
	log   logr.Logger

	// checkSem serializes acks=1 fence checks, so one check serves every append written
	// before it began. (A channel, not a mutex: it is held across file-system calls.)
	checkSem   chan struct{}
	checkedSeq uint64 // writes covered by the last passing check; guarded by checkSem

	// journalSem serializes appends to the claim's journal (the flusher's, and a read's
	// record of a log-start move it found).
	journalSem chan struct{}

	mu sync.Mutex

	// All fields below are guarded by mu. fence, claim, journal and pred are set once by the
	// takeover's claim and discovery.
	fence   *Fence
	claim   claimRef // the claim this log won
	journal *journal // the claim's journal, appended under journalSem
	pred    string   // the claim file whose journal described the log at takeover ("" if none)
	cfg     Config
	state   logState
	stopErr error // why the log stopped (ErrNotLeader after Relinquish, *FencedError, *StorageError)
	// broken is a failed write's error: sticky at once (every later Begin refuses), while the
	// log goes on to stop with it, classified, outside mu.
	broken error
	epoch  int32
	// closed are the closed segments in log order. Only the flusher changes the list.
	closed     []*segment
	activeIdx  *segIndex      // the active segment: its index and summary (base, next, size)
	activeFile *cachedSegment // the active segment's file, pinned by the log
	// activeSince is when the active segment got its first batch (segment.ms).
	activeSince time.Time
	logStart    int64
	leo         int64  // log end offset: activeIdx.next
	writes      uint64 // batches written so far (acks=1 check coalescing)
	hw          int64  // high watermark: durable and fence-checked
	hwPos       int64  // byte position of hw in the active segment
	hwCh        chan struct{}
	pending     *round // the round that will cover the next write
	inflight    *round // the round the flusher is making durable now (nil between rounds)
	inflightEnd int64  // the log end inflight covers
	rollWanted  bool
	rollQueue   []chan struct{} // appends waiting for the roll, in arrival order (awaitRollLocked)
	stopWanted  bool
	producers   *producerState
	decided     []decidedTxn // transactions whose markers are written but not below hw yet
	epochs      []epochStart
	// dirtyFrom is the cleaner's checkpoint (compaction): offsets below it have been cleaned
	// against every key at or above the log start up to it. cleanPasses counts this log's
	// cleaning passes (the n of the copies it writes); retired are the files of segments a
	// pass replaced, removed at the next pass or when the log stops (a reader that found the
	// segment just before the swap may still open it).
	dirtyFrom   int64
	horizon     int64 // the earliest delete horizon in the cleaned log; -1 none
	cleanPasses uint32
	retired     []string

	kick    chan struct{} // wakes the flusher; capacity 1
	ops     chan func()   // work run on the flusher (DeleteRecords, retention on demand)
	done    chan struct{} // closed when the log stops serving
	stopped chan struct{} // closed once the log's files are closed
}

// Open prepares the log of the partition kept in dir. It does no I/O: the log serves
// nothing (ErrNotLeader) until Takeover completes.
func Open(dir string, cfg Config, opts Options) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	l := &Log{
		id: logIDs.Add(1), dir: dir, opts: opts, fsys: opts.FS, cache: opts.Cache,
		cfg: cfg, epoch: -1, horizon: -1, hwCh: make(chan struct{}), pending: newRound(),
		checkSem: make(chan struct{}, 1), journalSem: make(chan struct{}, 1),
		kick: make(chan struct{}, 1), ops: make(chan func()),
		done: make(chan struct{}), stopped: make(chan struct{}),
	}
	l.log = opts.Log.WithValues("dir", dir)
	return l, nil
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// Epoch is the leader epoch the log was taken over at (-1 before Takeover).
func (l *Log) Epoch() int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// Done is closed when the log stops serving: relinquished, fenced by a newer leader, or
// failed. Err says which.
func (l *Log) Done() <-chan struct{} { return l.done }

// Err is nil while the log is serving (or not yet taken over), else why it stopped:
// ErrNotLeader after Relinquish, a *FencedError, or a *StorageError.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopErr
}

// SetConfig changes the topic configuration; segment and retention limits apply from the
// next append and retention pass.
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	l.cfg = cfg
	l.mu.Unlock()
	if c := l.opts.Cleaner; c != nil && cfg.Compact {
		c.Kick()
	}
	return nil
}

func (l *Log) servingLocked() error {
	switch {
	case l.stopErr != nil:
		return l.stopErr
	case l.broken != nil:
		return l.broken
	case l.state == stateServing && !l.stopWanted:
		return nil
	default:
		return ErrNotLeader
	}
}

// Append appends one record batch (v2, as a producer sent it) and returns once acks is
// satisfied: AcksNone once written; AcksLeader once written and the fence re-read still
// holds this log's epoch; AcksAll once fsynced and then fence-checked (the high watermark
// covers it). A producer's retry of a batch still in its last five is not appended again:
// its original offsets come back with Duplicate set, once they satisfy acks too.
//
// Append assigns the base offset and stamps it and the leader epoch into batch — in place:
// the caller must not reuse the slice — and, for LogAppendTime topics, the append time
// (recomputing the CRC). Bad batches get ErrInvalidRecord, ErrCorruptMessage,
// ErrMessageTooLarge or ErrRecordListTooLarge and change nothing; sequence problems
// ErrOutOfOrderSequence or ErrInvalidProducerEpoch. A log that is not serving answers
// ErrNotLeader, *FencedError or *StorageError; after a storage error nothing more is ever
// acknowledged. If ctx ends while waiting, Append returns ctx.Err(): the batch may still
// become durable (as a Produce timeout in Kafka).
//
// Append is Begin followed by the returned PendingAppend's Wait.
func (l *Log) Append(ctx context.Context, batch []byte, acks Acks) (AppendResult, error) {
	p, err := l.Begin(batch, acks)
	if err != nil {
		return AppendResult{}, err
	}
	return p.Result, p.Wait(ctx)
}

// PendingAppend is an append that Begin has written (or recognised as a retry) and whose
// acknowledgement may still wait for durability.
type PendingAppend struct {
	// Result is what the answer reports once Wait returns nil.
	Result AppendResult

	l    *Log
	acks Acks
	r    *round // the round that covers the write
	seq  uint64 // the write's number (acks=1 check coalescing)
	done bool   // nothing to wait for (a retry of a batch already durable, acks=-1)
}

// Begin is the first half of Append: it validates batch, checks idempotence, assigns and
// stamps the offsets and writes the batch at the end of the active segment — everything
// Append does before it waits — so appends begun one after the other are in the log in that
// order even when their waits overlap (a connection's pipelined Produce requests). Errors
// are Append's; nothing was written when Begin fails. The caller must Wait before it
// acknowledges anything.
func (l *Log) Begin(batch []byte, acks Acks) (*PendingAppend, error) {
	if acks != AcksNone && acks != AcksLeader && acks != AcksAll {
		return nil, fmt.Errorf("%w: acks=%d", ErrInvalidRequiredAcks, acks)
	}
	return l.begin(batch, acks, nil)
}

// begin writes batch (a marker's control batch when m is set) under mu, as Begin and
// AppendMarker do once their arguments are checked.
func (l *Log) begin(batch []byte, acks Acks, m *Marker) (*PendingAppend, error) {
	l.mu.Lock()
	p, woken, err := l.beginLocked(batch, acks, m)
	if woken {
		l.wakeRollWaiterLocked()
	}
	broken := l.broken
	l.mu.Unlock()
	if err != nil && err == broken {
		// A failed write: sticky already (every later Begin refuses); the fence is read,
		// to tell a fenced log from a failing disk, now that mu is released.
		l.fail(broken)
		return nil, l.Err()
	}
	return p, err
}

// beginLocked is Begin under mu. woken reports that it waited for a roll and was released: it
// then holds the turn of the appends waiting behind the roll and must pass it on.
// A marker (AppendMarker) passes its control batch in batch and itself in marker: it skips
// the producer-batch checks and gets the marker's.
func (l *Log) beginLocked(batch []byte, acks Acks, marker *Marker) (p *PendingAppend, woken bool, err error) {
	if err := l.servingLocked(); err != nil {
		return nil, false, err
	}
	var h batchHeader
	if marker != nil {
		h = parseHeader(batch)
		if err := parseControl(&h, batch[batchHeaderSize:]); err != nil {
			return nil, false, err
		}
	} else if h, err = validateClientBatch(batch, &l.cfg); err != nil {
		return nil, false, err
	}
	now := l.opts.Now()
	for l.rollWanted || l.needsRollLocked(int64(len(batch)), now) {
		l.rollWanted = true
		l.kickFlusher()
		l.awaitRollLocked()
		woken = true
		if err := l.servingLocked(); err != nil {
			return nil, woken, err
		}
	}
	if marker != nil {
		if err := l.producers.checkMarker(*marker); err != nil {
			return nil, woken, err
		}
	} else if h.idempotent() {
		dup, err := l.producers.check(h)
		if err != nil {
			return nil, woken, err
		}
		if dup != nil {
			return l.duplicateLocked(dup, acks), woken, nil
		}
	}
	appendTime := int64(-1)
	if l.cfg.LogAppendTime {
		appendTime = now.UnixMilli()
	}
	p, err = l.writeLocked(batch, h, acks, now, appendTime)
	return p, woken, err
}

// writeLocked stamps batch with the next offset and this log's epoch (and appendTime when it
// is not -1), writes it at the end of the active segment and applies it to the producer
// state. On a write error the log is broken (sticky) and the error returned.
func (l *Log) writeLocked(batch []byte, h batchHeader, acks Acks, now time.Time, appendTime int64) (*PendingAppend, error) {
	base := l.leo
	ctl := h.ctl
	h = stampBatch(batch, h, base, l.epoch, appendTime)
	h.ctl = ctl
	pos := l.activeIdx.size
	if _, err := l.activeFile.f.WriteAt(batch, pos); err != nil {
		l.broken = storageErr("append", err)
		return nil, l.broken
	}
	if l.activeIdx.batches == 0 {
		l.activeSince = now
	}
	l.activeIdx.add(h, pos)
	l.leo = h.nextOffset()
	if h.idempotent() {
		if e := l.producers.m[h.ProducerID]; e != nil && e.txnFirst >= 0 && h.Attributes&attrControl != 0 {
			// Decided, but readable as decided only once the marker is durable and
			// fence-checked (Apache's unreplicatedTxns): until the high watermark passes the
			// marker the transaction still holds the last stable offset.
			l.decided = append(l.decided, decidedTxn{first: e.txnFirst, marker: h.BaseOffset})
		}
		l.producers.apply(h)
	}
	l.writes++
	p := &PendingAppend{
		Result: AppendResult{BaseOffset: base, LastOffset: h.lastOffset(), LogAppendTime: appendTime, LogStartOffset: l.logStart},
		l:      l, acks: acks, r: l.pending, seq: l.writes,
	}
	l.kickFlusher()
	return p, nil
}

// Marker is a transaction's end on this partition, as the transaction coordinator's
// WriteTxnMarkers asks for it.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool // COMMIT, else ABORT
	CoordinatorEpoch int32
	TimestampMs      int64 // the control batch's timestamp
}

// AppendMarker writes m as a control batch (docs/transactions.md "Markers"), under the fence
// and with Append's durability and acks rules, closing the producer's open transaction on
// this partition. A marker for a producer with no open transaction (or unknown here) is
// written all the same and records its epochs, as Apache's appendEndTxnMarker. Errors are
// Append's, plus ErrInvalidProducerEpoch (m's epoch is below the producer's) and
// ErrTransactionCoordinatorFenced (m's coordinator epoch is below the one the partition
// last saw for the producer); nothing is written then.
func (l *Log) AppendMarker(ctx context.Context, m Marker, acks Acks) (AppendResult, error) {
	if acks != AcksNone && acks != AcksLeader && acks != AcksAll {
		return AppendResult{}, fmt.Errorf("%w: acks=%d", ErrInvalidRequiredAcks, acks)
	}
	if m.ProducerID < 0 || m.ProducerEpoch < 0 {
		return AppendResult{}, fmt.Errorf("%w: marker for producer %d epoch %d", ErrInvalidRecord, m.ProducerID, m.ProducerEpoch)
	}
	p, err := l.begin(buildMarker(m), acks, &m)
	if err != nil {
		return AppendResult{}, err
	}
	return p.Result, p.Wait(ctx)
}

// LastStableOffset is the offset below which every transaction is decided: the first
// offset of the oldest transaction still open — or decided with its marker not yet below the
// high watermark — if that is below the high watermark, else the high watermark; never below
// the log start. A READ_COMMITTED fetch reads only below it. The channel is HighWatermark's
// (closed when the high watermark next moves or the log stops): a marker moves the last
// stable offset only once the high watermark covers it, so the channel serves both.
func (l *Log) LastStableOffset() (int64, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastStableLocked(), l.hwCh
}

func (l *Log) lastStableLocked() int64 {
	lso := l.hw
	if first := l.producers.oldestOpenTxn(); first >= 0 {
		lso = min(lso, first)
	}
	l.pruneDecidedLocked()
	for _, t := range l.decided {
		lso = min(lso, t.first)
	}
	// Retention or DeleteRecords may move the log start past an open transaction's first
	// offset (Apache's onLogStartOffsetIncremented): nothing below the log start is readable.
	return max(lso, l.logStart)
}

// pruneDecidedLocked forgets the decided transactions whose markers are below the high
// watermark (called as the high watermark moves, so the list stays bounded by the writes
// not yet durable).
func (l *Log) pruneDecidedLocked() {
	keep := l.decided[:0]
	for _, t := range l.decided {
		if t.marker >= l.hw {
			keep = append(keep, t)
		}
	}
	clear(l.decided[len(keep):])
	l.decided = keep
}

// decidedTxn is a transaction whose marker (at offset marker) is written; first is its first
// offset on this partition.
type decidedTxn struct{ first, marker int64 }

// awaitRollLocked waits, mu released meanwhile, until the roll completes (or the log stops).
// Appends waiting for a roll are released one at a time in the order they came — the flusher
// releases the first, each the next once it has written — so they are written in that order.
func (l *Log) awaitRollLocked() {
	ticket := make(chan struct{})
	l.rollQueue = append(l.rollQueue, ticket)
	l.mu.Unlock()
	<-ticket
	if l.opts.step != nil {
		l.opts.step("released after the roll")
	}
	l.mu.Lock()
}

// wakeRollWaiterLocked releases the first append waiting for a roll, unless another roll is
// wanted now (the flusher releases it once that one completes).
func (l *Log) wakeRollWaiterLocked() {
	if len(l.rollQueue) == 0 || (l.rollWanted && l.stopErr == nil) {
		return
	}
	close(l.rollQueue[0])
	l.rollQueue = l.rollQueue[1:]
}

// Wait returns nil once the append's acks is satisfied (see Append), else the error that
// prevents it, or ctx.Err() if ctx ends first.
func (p *PendingAppend) Wait(ctx context.Context) error {
	if p.done {
		return nil
	}
	return p.l.awaitAck(ctx, p.acks, p.r, p.seq)
}

// needsRollLocked: the active segment is not empty and the batch would take it past
// segment.bytes, or its first batch is segment.ms old.
func (l *Log) needsRollLocked(size int64, now time.Time) bool {
	x := l.activeIdx
	if x.batches == 0 {
		return false
	}
	rollMs := l.cfg.SegmentMs
	if l.cfg.Compact {
		rollMs = min(rollMs, l.cfg.MaxCompactionLagMs) // the active segment is never cleaned
	}
	return x.size+size > l.cfg.SegmentBytes || now.Sub(l.activeSince).Milliseconds() >= rollMs
}

// duplicateLocked answers a retried batch with its original offsets, once those satisfy
// acks: a retry of an append that is not durable yet waits for it as the original does.
func (l *Log) duplicateLocked(dup *batchMeta, acks Acks) *PendingAppend {
	res := AppendResult{BaseOffset: dup.firstOffset, LastOffset: dup.lastOffset, LogAppendTime: -1, LogStartOffset: l.logStart, Duplicate: true}
	if l.cfg.LogAppendTime {
		res.LogAppendTime = dup.timestamp
	}
	durable := dup.lastOffset < l.hw
	r := l.pending
	if !durable && l.inflight != nil && dup.lastOffset < l.inflightEnd {
		// The round making the original durable is running: it answers the retry too. (The
		// next round starts only when something is written after it.)
		r = l.inflight
	}
	p := &PendingAppend{Result: res, l: l, acks: acks, r: r, seq: l.writes, done: durable && acks == AcksAll}
	if !durable {
		l.kickFlusher()
	}
	return p
}

// awaitAck waits until acks is satisfied for a write that was the seq-th and is covered by
// round r.
func (l *Log) awaitAck(ctx context.Context, acks Acks, r *round, seq uint64) error {
	switch acks {
	case AcksNone:
		return nil
	case AcksLeader:
		return l.checkFenceAfter(seq)
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkFenceAfter returns nil once a fence check that began after the seq-th write has
// passed (one check serves every acks=1 append written before it began).
func (l *Log) checkFenceAfter(seq uint64) error {
	l.checkSem <- struct{}{}
	defer func() { <-l.checkSem }()
	l.mu.Lock()
	err := l.stopErr
	covered := l.writes
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if l.checkedSeq >= seq {
		return nil
	}
	if err := l.fenceCheck(); err != nil {
		l.fail(err)
		return l.Err()
	}
	l.checkedSeq = covered
	return nil
}

// fenceCheck checks that the fence still holds this log's claim.
func (l *Log) fenceCheck() error {
	l.mu.Lock()
	fence, epoch := l.fence, l.epoch
	l.mu.Unlock()
	return l.checkFence(fence, epoch)
}

// checkFence is fence.Check(epoch), told to Options.FenceChecked.
func (l *Log) checkFence(fence *Fence, epoch int32) error {
	start := time.Now()
	err := fence.Check(epoch)
	if l.opts.FenceChecked != nil {
		l.opts.FenceChecked(time.Since(start), err)
	}
	return err
}

func (l *Log) kickFlusher() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// fail stops the log for good with err (fenced or a storage error).
func (l *Log) fail(err error) {
	err = l.classify(err)
	l.mu.Lock()
	l.failLocked(err)
	l.mu.Unlock()
}

// classify reports a storage error on a log whose fence has moved as what it really is:
// this log was fenced (a newer leader's recovery may have truncated, removed or replaced a
// file under it).
func (l *Log) classify(err error) error {
	l.mu.Lock()
	fence, epoch := l.fence, l.epoch
	l.mu.Unlock()
	if fence == nil || !errors.Is(err, ErrStorage) || errors.Is(err, ErrIOTimeout) {
		return err // a volume that hangs cannot tell us the fence either
	}
	if ferr := l.checkFence(fence, epoch); errors.Is(ferr, ErrFenced) {
		return ferr
	}
	return err
}

// failLocked moves the log to stateStopped with reason err (the first reason wins): appends
// and reads are refused from now on, every append waiting for durability fails, and the
// flusher closes the files.
func (l *Log) failLocked(err error) {
	if l.state == stateStopped {
		return
	}
	if errors.Is(err, ErrFenced) {
		l.log.Info("Partition fenced by a newer leader; relinquishing", "epoch", l.epoch, "err", err.Error())
	} else if !errors.Is(err, ErrNotLeader) {
		l.log.Error(err, "Partition log failed; acknowledging nothing more", "epoch", l.epoch)
	}
	l.state, l.stopErr = stateStopped, err
	l.pending.err = err
	close(l.pending.done)
	l.pending = newRound()
	l.pending.err = err
	close(l.pending.done) // appends racing with the stop see a failed round, never a hung one
	close(l.hwCh)         // wake long-polling fetchers; the channel stays closed
	close(l.done)
	for _, t := range l.rollQueue {
		close(t)
	}
	l.rollQueue = nil
	l.kickFlusher()
}

// HighWatermark returns the high watermark and a channel that is closed when it next moves
// (or the log stops), so a long-polling Fetch can wait without polling.
func (l *Log) HighWatermark() (int64, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hw, l.hwCh
}

// Offsets returns the log-start offset, high watermark and log end offset.
func (l *Log) Offsets() (Offsets, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.servingLocked(); err != nil {
		return Offsets{}, err
	}
	return Offsets{LogStart: l.logStart, HighWatermark: l.hw, LogEnd: l.leo}, nil
}

// read (Read, ReadSection and their READ_COMMITTED forms) returns whole batches starting
// with the one holding offset, up to maxBytes, all below the high watermark — below the last
// stable offset when iso is ReadCommitted — and from one segment. With atLeastOne the first
// batch is returned whole even if larger than maxBytes (Fetch v3+'s rule for the first
// partition); without it such a batch is left out. An offset below the log start or past the
// log end is ErrOffsetOutOfRange; one between the readable end (the high watermark, or the
// last stable offset) and the log end reads nothing.
// The bytes are a fresh copy read from the segment file; Read never decodes records.
// With sec set (ReadSection) the batches are cut into it instead of copied.
//
// The last stable offset is a batch boundary (a transaction's first batch, or the high
// watermark) unless the log start moved past it, and then nothing below it is readable: so
// the batches below it are exactly those whose base offset is below it.
func (l *Log) read(offset int64, maxBytes int, atLeastOne bool, sec *Section, iso Isolation) (ReadResult, error) {
	l.mu.Lock()
	if err := l.servingLocked(); err != nil {
		l.mu.Unlock()
		return ReadResult{}, err
	}
	lso := l.lastStableLocked()
	res := ReadResult{HighWatermark: l.hw, LastStableOffset: lso, LogStartOffset: l.logStart, LogEndOffset: l.leo}
	readable := l.hw
	var aborted []AbortedTxn
	if iso == ReadCommitted {
		readable = lso
		res.Aborted = []AbortedTxn{}
		// The index as of now, read after mu is released: appends only add entries past its
		// length and a log-start move replaces the slice, so this view never changes. Taken
		// with the bounds, so a log-start move racing with the read cannot drop an entry
		// covering batches the read returns.
		aborted = l.producers.aborted
	}
	if offset < l.logStart || offset > l.leo {
		l.mu.Unlock()
		return res, fmt.Errorf("%w: offset %d outside [%d, %d]", ErrOffsetOutOfRange, offset, l.logStart, l.leo)
	}
	if offset >= readable {
		l.mu.Unlock()
		return res, nil
	}
	cut := batchCut{limitOffset: readable, maxBytes: maxBytes, atLeastOne: atLeastOne}
	if offset >= l.activeIdx.base {
		_, pos := l.activeIdx.floorOffset(offset)
		limit, e := l.hwPos, l.activeFile
		l.cache.ref(e)
		l.mu.Unlock()
		defer l.cache.release(e)
		recs, next, err := sec.readBatches(l.cache, e, pos, limit, offset, cut)
		if err != nil {
			return res, l.readFailed(err) // the active segment is this log's own: no one else removes it
		}
		sec.from(l, nil, 0, offset)
		res.Records = recs
		collectAborted(&res, aborted, iso, offset, next)
		return res, nil
	}
	l.mu.Unlock()
	// From the segment holding offset on: a cleaned segment may hold no batch at or after
	// offset (the cleaner removed its last offsets), and then the first batch is in a later
	// one (Apache's searchForOffsetWithSize), possibly the active segment.
	from := offset
	for {
		l.mu.Lock()
		if err := l.servingLocked(); err != nil {
			l.mu.Unlock()
			return res, err
		}
		i := sort.Search(len(l.closed), func(i int) bool { return l.closed[i].end > from })
		if i == len(l.closed) {
			l.mu.Unlock()
			return l.read(from, maxBytes, atLeastOne, sec, iso) // the rest is in the active segment
		}
		seg, logStart := l.closed[i], l.logStart
		l.mu.Unlock()
		e, err := l.acquireClosed(seg)
		if err != nil && vanished(err) && l.replaced(seg) {
			continue // a cleaning pass swapped in another copy since we looked
		}
		if err != nil {
			return l.resultAfterVanish(res, offset, l.closedUnavailable(seg, logStart, err))
		}
		_, pos := e.idx.floorOffset(from)
		recs, next, err := sec.readBatches(l.cache, e, pos, seg.size, from, cut)
		if err == nil && next == from && seg.gen.cleaned() {
			var found bool
			if _, _, found, err = locateBatch(e.f, pos, seg.size, from); err == nil && !found {
				l.cache.release(e)
				from = seg.end
				continue
			}
		}
		if err != nil {
			l.cache.release(e)
			return l.resultAfterVanish(res, offset, l.segmentReadFailed(seg, logStart, err))
		}
		l.cache.release(e)
		sec.from(l, seg, logStart, from)
		res.Records = recs
		collectAborted(&res, aborted, iso, from, next)
		return res, nil
	}
}

// replaced reports whether seg is no longer in the log because a cleaning pass swapped in
// another copy of it (so a read that found it vanished reads the new copy instead).
func (l *Log) replaced(seg *segment) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := sort.Search(len(l.closed), func(i int) bool { return l.closed[i].end > seg.base })
	return i < len(l.closed) && l.closed[i] != seg && l.closed[i].base == seg.base && l.closed[i].epoch == seg.epoch
}

// collectAborted fills a READ_COMMITTED result's aborted transactions from index: those
// overlapping [offset, next), next being the offset after the last returned batch (offset
// when none was returned, which selects nothing). Every transaction that overlaps returned
// batches has its marker in index: the batches are below the last stable offset, which does
// not pass a transaction's first offset before its marker is durable.
func collectAborted(res *ReadResult, index []AbortedTxn, iso Isolation, offset, next int64) {
	if iso != ReadCommitted || next <= offset {
		return
	}
	res.Aborted = abortedOverlapping(index, offset, next)
}

// ReadCommitted is Read for a READ_COMMITTED fetch: the batches stop before the last stable
// offset, and the result carries the aborted transactions overlapping them (ReadResult.Aborted).
func (l *Log) ReadCommitted(offset int64, maxBytes int, atLeastOne bool) (ReadResult, error) {
	return l.read(offset, maxBytes, atLeastOne, nil, ReadCommitted)
}

// resultAfterVanish answers a read whose closed segment vanished and so moved the log start
// (errLogStartMoved): OFFSET_OUT_OF_RANGE with the new offsets. Other errors pass through.
func (l *Log) resultAfterVanish(res ReadResult, offset int64, err error) (ReadResult, error) {
	if !errors.Is(err, errLogStartMoved) {
		return res, err
	}
	l.mu.Lock()
	res.LogStartOffset = l.logStart
	l.mu.Unlock()
	return res, fmt.Errorf("%w: offset %d is below the log start %d, which moved: %w", ErrOffsetOutOfRange, offset, res.LogStartOffset, err)
}

// closedUnavailable explains a closed segment that could not be opened (see vanishedSegment);
// other errors are storage errors.
func (l *Log) closedUnavailable(seg *segment, logStart int64, err error) error {
	if vanished(err) {
		return l.vanishedSegment(seg, logStart, err)
	}
	return l.readFailed(err)
}

// segmentReadFailed explains a failed read of an open segment file: a closed segment whose
// file another client removed meanwhile (ESTALE on a network file system) vanished; anything
// else is a storage error.
func (l *Log) segmentReadFailed(seg *segment, logStart int64, err error) error {
	if seg != nil && vanished(err) {
		l.cache.forget(l.cacheKey(seg))
		return l.vanishedSegment(seg, logStart, err)
	}
	return l.readFailed(err)
}

// vanishedSegment handles a closed segment that is no longer there (docs/storage.md "Metadata
// by name, never by listing", "Reads and lookups"): the log start moved past it — this log's own retention since the caller looked, or
// a deposed leader's whose move this log had not seen. It re-reads the log start where moves
// are recorded (the predecessor's journal), adopts it, records it in this log's journal (so
// the next leader does not count the segment either) and answers errLogStartMoved. A closed
// segment above every recorded log start that vanished is damage to the log: a storage error.
func (l *Log) vanishedSegment(seg *segment, seen int64, cause error) error {
	if l.replaced(seg) {
		// Not a log-start move: a cleaning pass swapped in another copy and removed this one
		// (a reader that held it longer than the pass waits). The client retries.
		return fmt.Errorf("%w: segment %s was replaced by its cleaned copy; retry", errSegmentReplaced, seg.name())
	}
	l.mu.Lock()
	start, pred := l.logStart, l.pred
	l.mu.Unlock()
	if start > seen && seg.end <= start {
		return fmt.Errorf("%w to %d", errLogStartMoved, start)
	}
	recorded := l.recordedLogStart(pred)
	if seg.end > recorded {
		return l.readFailed(&StorageError{Op: "read " + seg.name(), Err: fmt.Errorf("%w: a closed segment above the log start %d vanished: %w", ErrCorruptLog, recorded, cause)})
	}
	l.mu.Lock()
	moved := recorded > l.logStart
	if moved {
		l.logStart = min(recorded, l.hw)
		l.producers.dropAbortedBelow(l.logStart)
	}
	start = l.logStart
	l.mu.Unlock()
	if moved {
		l.log.Info("A closed segment vanished: a deposed leader's retention moved the log start", "segment", seg.name(), "logStart", start)
		if err := l.journalRecord(recLogStart, start); err != nil {
			l.fail(storageErr("persist log-start offset", err))
		}
	}
	return fmt.Errorf("%w to %d", errLogStartMoved, start)
}

// recordedLogStart is the largest log start recorded by the predecessor (in its journal, or
// for a log from before journals in its log-start file); -1 when it cannot be read.
func (l *Log) recordedLogStart(pred string) int64 {
	start := int64(-1)
	if pred != "" {
		if b, err := readFile(l.fsys, pred); err == nil {
			if v, err := parseJournal(b); err == nil {
				start = v.logStart
			}
		}
	}
	if legacy, err := l.readLegacyLogStart(); err == nil {
		start = max(start, legacy)
	}
	return start
}

// readFailed makes a read's I/O error (or data below the high watermark that does not parse)
// the log's sticky storage error: the partition goes offline on this broker.
func (l *Log) readFailed(err error) error {
	l.fail(storageErr("read", err))
	return l.Err()
}

func (l *Log) cacheKey(s *segment) cacheKey { return cacheKey{owner: l.id, name: s.name()} }

// acquireClosed opens (or finds cached) a closed segment's file and index. The index comes
// from the .index file if it matches the segment, else it is rebuilt from the batches.
func (l *Log) acquireClosed(s *segment) (*cachedSegment, error) {
	return l.cache.acquire(l.cacheKey(s), func() (File, *segIndex, error) {
		f, err := l.fsys.OpenFile(filepath.Join(l.dir, s.name()), os.O_RDONLY, 0)
		if err != nil {
			return nil, nil, err
		}
		l.mu.Lock()
		interval := l.cfg.IndexIntervalBytes
		l.mu.Unlock()
		idx, err := l.loadIndex(context.Background(), f, diskSegment{base: s.base, epoch: s.epoch, gen: s.gen}, s.end, s.size, interval)
		if err != nil {
			_ = f.Close()
			return nil, nil, err
		}
		return f, idx, nil
	})
}

// loadIndex reads segment s's .index file and returns it if it describes exactly the batches
// below end in size bytes (any size when size < 0) within the file; otherwise it rebuilds the
// index by walking the batch headers, and fails with ErrCorruptLog if those do not reach end.
// A cleaned segment's batches may stop short of end (the cleaner removed the last offsets)
// but must fill its file: the cleaner wrote it whole.
func (l *Log) loadIndex(ctx context.Context, f File, s diskSegment, end, size int64, interval int32) (*segIndex, error) {
	gaps := s.gen.cleaned()
	fileSize, err := f.Size()
	if err != nil {
		return nil, err
	}
	if b, err := readFile(l.fsys, filepath.Join(l.dir, s.indexName())); err == nil {
		if x, err := decodeIndex(b, s.base, s.epoch, interval, gaps); err == nil && x.next == end && x.size <= fileSize && (size < 0 || x.size == size) {
			return x, nil
		}
	}
	x := newSegIndex(s.base, interval)
	got, err := scanBatches(ctx, f, 0, fileSize, s.base, end, false, gaps, x.add)
	if err != nil {
		return nil, err
	}
	short := got.next != end
	if gaps {
		short = got.next > end || got.pos != fileSize || got.refused != nil
		x.next = end
	}
	if short || (size >= 0 && got.pos != size) {
		return nil, &StorageError{Op: "index " + s.name(), Err: fmt.Errorf("%w: batches end at offset %d (byte %d), the next segment starts at %d: %v", ErrCorruptLog, got.next, got.pos, end, got.refused)}
	}
	return x, nil
}
