package storage

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns either wraps one of them (test with
// errors.Is) or is a context error from the caller's own context. The Kafka error code each
// should be answered with is named in its comment; docs/storage.md has the same table.
var (
	// ErrNotLeader: the log is not serving — takeover has not completed, or the log has
	// relinquished. NOT_LEADER_OR_FOLLOWER (6).
	ErrNotLeader = errors.New("partition log is not serving")
	// ErrFenced: the partition's fence holds a higher epoch than this log's (another leader
	// claimed it), or a takeover asked for an epoch at or below the fence. The log never
	// acknowledges again. NOT_LEADER_OR_FOLLOWER (6). The concrete type is *FencedError.
	ErrFenced = errors.New("fenced by a higher epoch")
	// ErrStorage: an I/O error (EIO, ENOSPC, a failed fsync, ...) or corruption. It is
	// sticky: the log acknowledges nothing afterwards and stops serving.
	// KAFKA_STORAGE_ERROR (56). The concrete type is *StorageError.
	ErrStorage = errors.New("storage error")
	// ErrCorruptLog: recovery found a closed segment that does not hold every batch up to
	// the next segment (bytes lost or damaged in the middle of the log). Takeover refuses to
	// serve rather than silently drop acknowledged records. Wrapped in a *StorageError, so
	// errors.Is(err, ErrStorage) holds too. KAFKA_STORAGE_ERROR (56).
	ErrCorruptLog = errors.New("log corrupt before its tail")

	// ErrInvalidRecord: the batch is structurally unacceptable (magic ≠ 2, base offset ≠ 0,
	// record count ≠ lastOffsetDelta+1, control bit from a client, producer id without a
	// sequence). INVALID_RECORD (87).
	ErrInvalidRecord = errors.New("invalid record batch")
	// ErrCorruptMessage: the batch's length or CRC-32C does not check. CORRUPT_MESSAGE (2).
	ErrCorruptMessage = errors.New("corrupt record batch")
	// ErrMessageTooLarge: batch larger than max.message.bytes. MESSAGE_TOO_LARGE (10).
	ErrMessageTooLarge = errors.New("record batch larger than max.message.bytes")
	// ErrRecordListTooLarge: batch larger than segment.bytes. RECORD_LIST_TOO_LARGE (18).
	ErrRecordListTooLarge = errors.New("record batch larger than segment.bytes")
	// ErrInvalidRequiredAcks: acks not in {-1, 0, 1}. INVALID_REQUIRED_ACKS (21).
	ErrInvalidRequiredAcks = errors.New("acks must be -1, 0 or 1")
	// ErrInvalidProducerEpoch: the batch's producer epoch is older than the one this
	// partition has seen. INVALID_PRODUCER_EPOCH (47).
	ErrInvalidProducerEpoch = errors.New("stale producer epoch")
	// ErrOutOfOrderSequence: the batch's sequence does not follow the producer's last one
	// (a gap, a duplicate older than the last five batches, or a new epoch not starting at
	// 0). OUT_OF_ORDER_SEQUENCE_NUMBER (45).
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	// ErrInvalidTxnState: a producer with a transaction open on the partition sent a
	// non-transactional batch. INVALID_TXN_STATE (48).
	ErrInvalidTxnState = errors.New("non-transactional batch inside an open transaction")
	// ErrTransactionCoordinatorFenced: a transaction marker from a coordinator epoch older
	// than the one the partition last saw for the producer. TRANSACTION_COORDINATOR_FENCED (52).
	ErrTransactionCoordinatorFenced = errors.New("transaction coordinator epoch is stale")
	// ErrOffsetOutOfRange: a read or DeleteRecords below the log-start offset or past the
	// log end (Read) / high watermark (DeleteRecords). OFFSET_OUT_OF_RANGE (1).
	ErrOffsetOutOfRange = errors.New("offset out of range")
)

// FencedError says which epoch was refused and what the fence held.
type FencedError struct {
	Epoch int32 // this log's (or the claimer's) epoch
	Fence int32 // the fence's epoch when it was read
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("epoch %d fenced: the fence holds %d", e.Epoch, e.Fence)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// StorageError is an I/O failure or corruption on the partition's files. Unwrap gives the
// cause, so errors.Is(err, syscall.ENOSPC) works as well as errors.Is(err, ErrStorage).
type StorageError struct {
	Op  string // what the log was doing: "append", "fsync", "recover", ...
	Err error
}

func (e *StorageError) Error() string { return "storage: " + e.Op + ": " + e.Err.Error() }
func (e *StorageError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrStorage) true.
func (e *StorageError) Is(target error) bool { return target == ErrStorage }

// storageErr wraps err as a *StorageError unless it already is one (or is a fence error,
// which keeps its own meaning).
func storageErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *StorageError
	if errors.As(err, &se) || errors.Is(err, ErrFenced) {
		return err
	}
	return &StorageError{Op: op, Err: err}
}
