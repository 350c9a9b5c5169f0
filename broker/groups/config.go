package groups

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/paddock-dev/paddock/broker/storage"
)

// Config configures a Coordinator. Start from DefaultConfig: a zero duration means zero
// (InitialRebalanceDelay 0 is a legitimate setting), not "default".
type Config struct {
	// Dir is the groups root on the shared volume, storage.GroupsDir(data, clusterID). Required.
	Dir string
	// Topics is the broker's view of the topics, used to validate commits. Required.
	Topics Topics
	// FS is the file-system seam; storage.OSFS when nil.
	FS storage.FS
	// Clock drives every protocol timer (session, rebalance, initial delay, pending members);
	// the real clock when nil. Tests use k8s.io/utils/clock/testing.
	Clock clock.Clock
	// Log receives group state changes; discarded when zero.
	Log logr.Logger
	// Metrics counts; nil counts nothing.
	Metrics *Metrics

	// MinSessionTimeout, MaxSessionTimeout are group.min.session.timeout.ms (6 s) and
	// group.max.session.timeout.ms (30 min): a JoinGroup outside them gets
	// INVALID_SESSION_TIMEOUT.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms (3 s): an Empty group's first
	// rebalance waits this long, and again for each new member (generation 0 only), capped by
	// the rebalance timeout.
	InitialRebalanceDelay time.Duration
	// MaxGroupSize is group.max.size (Apache's default: unbounded, math.MaxInt32).
	MaxGroupSize int
	// MaxMetadataSize is offset.metadata.max.bytes (4096), counted as Java's String.length
	// (UTF-16 code units), as Apache does.
	MaxMetadataSize int
	// NewMemberJoinTimeout is how long a new member's JoinGroup may wait for its rebalance
	// (Apache's fixed 5 minutes) before the member is dropped.
	NewMemberJoinTimeout time.Duration
	// OffsetsRetention is offsets.retention.minutes (7 days): how long committed offsets
	// outlive a group — counted from when an Empty group became Empty, or from the commit for
	// a group that only stores offsets and for unsubscribed topics of a Stable consumer group
	// (docs/groups.md "Offset retention").
	OffsetsRetention time.Duration
	// CleanupInterval is offsets.retention.check.interval.ms (10 min): how often each group
	// expires offsets, and when an Empty group without offsets or members is removed with its
	// files, as Apache's periodic cleanup does.
	CleanupInterval time.Duration
	// LoadWait bounds how long a request waits for its group to be loaded before it is
	// answered COORDINATOR_LOAD_IN_PROGRESS. Real time, not Clock: it bounds disk I/O.
	LoadWait time.Duration
	// LoadConcurrency bounds how many groups load (claim + read + snapshot) at once.
	LoadConcurrency int
	// OffsetsChanged, when set, is told of every acknowledged change of committed offsets
	// (offsets_view.go): the broker's __consumer_offsets view.
	OffsetsChanged OffsetsChanged

	// ConsumerProtocol enables the consumer group protocol (KIP-848:
	// ConsumerGroupHeartbeat, ConsumerGroupDescribe): group.coordinator.rebalance.protocols
	// lists "consumer". Off, both APIs answer UNSUPPORTED_VERSION, as Apache does.
	ConsumerProtocol bool
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms (5 s): how often a
	// consumer-protocol member is told to heartbeat.
	ConsumerHeartbeatInterval time.Duration
	// ConsumerSessionTimeout is group.consumer.session.timeout.ms (45 s): a consumer-protocol
	// member that does not heartbeat for this long is removed.
	ConsumerSessionTimeout time.Duration
	// ConsumerMaxSize is group.consumer.max.size (unbounded): the most members a
	// consumer-protocol group may have.
	ConsumerMaxSize int
	// ConsumerAssignors is group.consumer.assignors: the server-side assignors a member may
	// name, the first being the default ("uniform", "range"; docs/groups.md "Assignors").
	ConsumerAssignors []string
	// RegexRefresh is how often a group re-resolves its members' regular expressions against
	// the topics (Apache 4.0's 10 s).
	RegexRefresh time.Duration

	// OffsetsPartitions is offsets.topic.num.partitions (50): a group's __consumer_offsets
	// partition is internal/coordinator.Partition(group, OffsetsPartitions), the partition a
	// transaction's marker for its offsets names (CompleteTransaction).
	OffsetsPartitions int32

	// compactMin is the smallest offsets file that is compacted (defaultCompactMin when 0);
	// tests lower it to compact often.
	compactMin int64
}

// DefaultConfig is Apache Kafka 3.7's defaults, Apache 4.0's for the consumer protocol (plus
// LoadWait 1 s and LoadConcurrency 8).
func DefaultConfig() Config {
	return Config{
		MinSessionTimeout:     6 * time.Second,
		MaxSessionTimeout:     30 * time.Minute,
		InitialRebalanceDelay: 3 * time.Second,
		MaxGroupSize:          math.MaxInt32,
		MaxMetadataSize:       4096,
		NewMemberJoinTimeout:  5 * time.Minute,
		OffsetsRetention:      7 * 24 * time.Hour,
		CleanupInterval:       10 * time.Minute,
		LoadWait:              time.Second,
		LoadConcurrency:       8,
		OffsetsPartitions:     50,

		ConsumerProtocol:          true,
		ConsumerHeartbeatInterval: 5 * time.Second,
		ConsumerSessionTimeout:    45 * time.Second,
		ConsumerMaxSize:           math.MaxInt32,
		ConsumerAssignors:         []string{"uniform", "range"},
		RegexRefresh:              10 * time.Second,
	}
}

// Validate reports the first unusable field.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("groups: Dir is required")
	case c.Topics == nil:
		return errors.New("groups: Topics is required")
	case c.MinSessionTimeout <= 0 || c.MaxSessionTimeout < c.MinSessionTimeout:
		return fmt.Errorf("groups: session timeout bounds [%v, %v] are not a range", c.MinSessionTimeout, c.MaxSessionTimeout)
	case c.InitialRebalanceDelay < 0:
		return fmt.Errorf("groups: initial rebalance delay %v is negative", c.InitialRebalanceDelay)
	case c.MaxGroupSize < 1:
		return fmt.Errorf("groups: max group size %d must be at least 1", c.MaxGroupSize)
	case c.MaxMetadataSize < 0:
		return fmt.Errorf("groups: max metadata size %d is negative", c.MaxMetadataSize)
	case c.NewMemberJoinTimeout <= 0 || c.CleanupInterval <= 0:
		return errors.New("groups: NewMemberJoinTimeout and CleanupInterval must be positive")
	case c.OffsetsRetention < time.Minute:
		return fmt.Errorf("groups: offsets retention %v is under a minute", c.OffsetsRetention)
	case c.LoadWait < 0 || c.LoadConcurrency < 1:
		return errors.New("groups: LoadWait must not be negative and LoadConcurrency at least 1")
	case c.ConsumerHeartbeatInterval <= 0 || c.ConsumerSessionTimeout <= c.ConsumerHeartbeatInterval:
		return fmt.Errorf("groups: consumer heartbeat interval %v must be positive and below the session timeout %v", c.ConsumerHeartbeatInterval, c.ConsumerSessionTimeout)
	case c.ConsumerMaxSize < 1:
		return fmt.Errorf("groups: consumer group max size %d must be at least 1", c.ConsumerMaxSize)
	case c.OffsetsPartitions < 1:
		return fmt.Errorf("groups: OffsetsPartitions %d must be at least 1", c.OffsetsPartitions)
	case c.RegexRefresh <= 0:
		return errors.New("groups: RegexRefresh must be positive")
	}
	if len(c.ConsumerAssignors) == 0 {
		return errors.New("groups: ConsumerAssignors names no assignor")
	}
	for _, a := range c.ConsumerAssignors {
		if assignorByName(a) == nil {
			return fmt.Errorf("groups: unknown assignor %q (uniform, range)", a)
		}
	}
	return nil
}

// Topics is the broker's view of the topics. It must be safe for concurrent use.
type Topics interface {
	// Topic reports whether topic exists, its id (zero if unknown) and its partition count.
	Topic(name string) (id [16]byte, partitions int32, ok bool)
	// TopicNames lists every topic's name (a consumer-protocol member's regular expression
	// is matched against them).
	TopicNames() []string
	// TopicByID returns the name and partition count of the topic with a (non-zero) id: the
	// consumer protocol names topics by id.
	TopicByID(id [16]byte) (name string, partitions int32, ok bool)
}

// Client identifies the connection a request came on, for member ids and DescribeGroups.
type Client struct {
	// ID is the request header's client id.
	ID string
	// Host is the client's address as Apache shows it: "/" followed by the IP.
	Host string
	// MayDescribeTopic reports whether the client's principal may DESCRIBE the topic: a
	// consumer member's regular expression resolves only over the topics it may (Apache 4.0's
	// KAFKA-18813). Nil: every topic (authorization off). The coordinator keeps the one of a
	// member's latest heartbeat and calls it from the group's goroutine.
	MayDescribeTopic func(topic string) bool
}
