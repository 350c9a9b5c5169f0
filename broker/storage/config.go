package storage

import (
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"
)

// Config is a partition's topic configuration as far as storage is concerned. Fields are named
// after, and take the units of, the Kafka topic configs in their comments.
type Config struct {
	// SegmentBytes is segment.bytes: the active segment rolls before it would grow past it.
	SegmentBytes int64
	// SegmentMs is segment.ms: the active segment rolls once its first batch is this old.
	SegmentMs int64
	// RetentionMs is retention.ms: closed segments whose newest record is older are
	// deleted. -1 keeps them forever.
	RetentionMs int64
	// RetentionBytes is retention.bytes: the oldest closed segments are deleted while the
	// log is larger. -1 means no size limit.
	RetentionBytes int64
	// MaxMessageBytes is max.message.bytes: the largest batch accepted.
	MaxMessageBytes int32
	// LogAppendTime is message.timestamp.type=LogAppendTime: the log stamps each batch's
	// maxTimestamp with the append time (and sets attribute bit 3).
	LogAppendTime bool
	// IndexIntervalBytes is index.interval.bytes: how many bytes of batches lie between
	// two entries of the sparse offset/time index.
	IndexIntervalBytes int32
	// ProducerIDExpirationMs is producer.id.expiration.ms: a producer whose last batch is
	// older is forgotten (its next batch is accepted with any sequence).
	ProducerIDExpirationMs int64

	// Compaction (docs/compaction.md). Compact is cleanup.policy containing compact: the
	// log's cleaner keeps the latest record per key. NoDelete is cleanup.policy without
	// delete: retention.ms and retention.bytes delete nothing (cleanup.policy=compact).
	Compact  bool
	NoDelete bool
	// DeleteRetentionMs is delete.retention.ms: how long a tombstone (and a transaction
	// marker) stays after the cleaning that first kept it.
	DeleteRetentionMs int64
	// MinCompactionLagMs is min.compaction.lag.ms: a segment whose newest record is younger
	// is not cleaned.
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms: dirty data older than this is cleaned
	// whatever the dirty ratio, and the active segment rolls at least this often.
	MaxCompactionLagMs int64
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: the log is cleaned once its dirty
	// bytes are more than this share of its cleanable bytes.
	MinCleanableDirtyRatio float64
}

// DefaultConfig is Apache Kafka 3.7's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:           1 << 30,
		SegmentMs:              7 * 24 * 3600 * 1000,
		RetentionMs:            7 * 24 * 3600 * 1000,
		RetentionBytes:         -1,
		MaxMessageBytes:        1048588,
		IndexIntervalBytes:     4096,
		ProducerIDExpirationMs: 24 * 3600 * 1000,
		DeleteRetentionMs:      24 * 3600 * 1000,
		MaxCompactionLagMs:     math.MaxInt64,
		MinCleanableDirtyRatio: 0.5,
	}
}

// Validate reports the first field outside its range.
func (c Config) Validate() error {
	switch {
	case c.SegmentBytes < batchHeaderSize:
		return fmt.Errorf("segment.bytes %d: must be at least %d", c.SegmentBytes, batchHeaderSize)
	case c.SegmentMs < 1:
		return fmt.Errorf("segment.ms %d: must be at least 1", c.SegmentMs)
	case c.RetentionMs < -1:
		return fmt.Errorf("retention.ms %d: must be -1 or more", c.RetentionMs)
	case c.RetentionBytes < -1:
		return fmt.Errorf("retention.bytes %d: must be -1 or more", c.RetentionBytes)
	case c.MaxMessageBytes < batchHeaderSize:
		return fmt.Errorf("max.message.bytes %d: must be at least %d", c.MaxMessageBytes, batchHeaderSize)
	case c.IndexIntervalBytes < 1:
		return fmt.Errorf("index.interval.bytes %d: must be at least 1", c.IndexIntervalBytes)
	case c.ProducerIDExpirationMs < 1:
		return fmt.Errorf("producer.id.expiration.ms %d: must be at least 1", c.ProducerIDExpirationMs)
	case c.Compact && c.DeleteRetentionMs < 0:
		return fmt.Errorf("delete.retention.ms %d: must be at least 0", c.DeleteRetentionMs)
	case c.Compact && c.MinCompactionLagMs < 0:
		return fmt.Errorf("min.compaction.lag.ms %d: must be at least 0", c.MinCompactionLagMs)
	case c.Compact && c.MaxCompactionLagMs < 1:
		return fmt.Errorf("max.compaction.lag.ms %d: must be at least 1", c.MaxCompactionLagMs)
	case c.Compact && c.MinCompactionLagMs > c.MaxCompactionLagMs:
		return fmt.Errorf("min.compaction.lag.ms %d is above max.compaction.lag.ms %d", c.MinCompactionLagMs, c.MaxCompactionLagMs)
	case c.Compact && !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1):
		return fmt.Errorf("min.cleanable.dirty.ratio %v: must be between 0 and 1", c.MinCleanableDirtyRatio)
	}
	return nil
}

// Options are the broker-wide parts of a Log: shared by every partition a broker leads.
type Options struct {
	// FS is the file system; OSFS when nil.
	FS FS
	// Cache holds the broker's open closed-segment files; DefaultFileCache when nil.
	Cache *FileCache
	// Log receives state changes (takeover, fenced, storage failure); discarded when zero.
	Log logr.Logger
	// Now reads the clock (LogAppendTime, segment.ms, retention); time.Now when nil.
	Now func() time.Time
	// RetentionCheckInterval is log.retention.check.interval.ms: how often the log applies
	// retention. Five minutes when zero.
	RetentionCheckInterval time.Duration
	// IOTimeout bounds every file-system call of the log (WatchdogFS): an fsync, fence check,
	// listing, read or write that has not returned by then fails the log with ErrIOTimeout.
	// DefaultIOTimeout when zero; negative turns the bound off.
	IOTimeout time.Duration
	// Cleaner, when set, cleans the log while it serves and its topic is compacted
	// (docs/compaction.md); without one a compacted log is cleaned only by Log.Clean.
	Cleaner *Cleaner
	// FenceChecked, when set, is told of every fence check the log makes — before it
	// acknowledges, at the steps of a takeover, when it classifies a storage error — with how
	// long the check took and its result: nil, an ErrFenced error, or a storage error. It is
	// called on the checking goroutine and must not block (the broker counts and times them).
	FenceChecked func(took time.Duration, err error)

	// step, when set (by this package's simulations), is called where a goroutine of the log
	// resumes on its own without a file-system call — an append released after a roll — so
	// that a scheduler can order it too.
	step func(what string)
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = OSFS{}
	}
	if o.Cache == nil {
		o.Cache = DefaultFileCache
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RetentionCheckInterval <= 0 {
		o.RetentionCheckInterval = 5 * time.Minute
	}
	if o.IOTimeout == 0 {
		o.IOTimeout = DefaultIOTimeout
	}
	o.FS = WatchdogFS(o.FS, o.IOTimeout)
	return o
}
