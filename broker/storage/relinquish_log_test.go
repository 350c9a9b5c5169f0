package storage

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
)

// errorCounter is a logr sink that counts Error calls and drops everything else.
type errorCounter struct{ errors *atomic.Int32 }

func (errorCounter) Init(logr.RuntimeInfo)            {}
func (errorCounter) Enabled(int) bool                 { return true }
func (errorCounter) Info(int, string, ...any)         {}
func (c errorCounter) Error(error, string, ...any)    { c.errors.Add(1) }
func (c errorCounter) WithValues(...any) logr.LogSink { return c }
func (c errorCounter) WithName(string) logr.LogSink   { return c }

// relinquishWithFailingCheckpoint relinquishes a leader at epoch 1 whose checkpoint rename
// fails; before failing it, nextLeader (when set) claims the fence at epoch 2, as a new
// leader taking over during the move does. It returns how many errors the log reported.
func relinquishWithFailingCheckpoint(t *testing.T, nextLeader bool) int32 {
	dir := partitionDir(t)
	var errs atomic.Int32
	faulty := FaultFS{FS: OSFS{}, Fault: func(op Op, path string) error {
		if op != OpRename || !strings.HasSuffix(path, indexSuffix) { // the checkpoint's index (the rename's target)
			return nil
		}
		if nextLeader {
			fence, err := OpenFence(OSFS{}, filepath.Join(dir, fenceDirName))
			if err != nil {
				return err
			}
			if err := fence.Claim(2); err != nil {
				return err
			}
		}
		return fs.ErrNotExist // the next leader removed this leader's temporary
	}}
	l := openLog(t, dir, 1, testConfig(), Options{FS: faulty, Log: logr.New(errorCounter{&errs})})
	mustAppend(t, l, makeBatch(plain(3, 1)), AcksAll)
	relinquish(t, l)
	if _, err := l.Append(t.Context(), makeBatch(plain(1, 2)), AcksAll); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append after relinquish: %v, want ErrNotLeader", err)
	}
	return errs.Load()
}

func TestRelinquishRacingTheNextLeadersClaimIsNotAnError(t *testing.T) {
	if n := relinquishWithFailingCheckpoint(t, true); n != 0 {
		t.Fatalf("a checkpoint lost to the next leader's claim logged %d errors; it is the normal race of a move", n)
	}
}

func TestRelinquishCheckpointFailureWithTheFenceHeldIsAnError(t *testing.T) {
	if n := relinquishWithFailingCheckpoint(t, false); n == 0 {
		t.Fatal("a checkpoint that failed with the fence still held logged no error")
	}
}
