package groups

import (
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// kafkaGoRead runs a segmentio/kafka-go Reader with a GroupID until done holds for what it
// read, commits what it read (CommitMessages) and closes (leaving the group).
func kafkaGoRead(t *testing.T, c *cluster, group, topic string, done func([]consumed) bool) []consumed {
	t.Helper()
	ctx := testCtx(t)
	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: c.Addrs, GroupID: group, Topic: topic,
		MaxWait: 200 * time.Millisecond, StartOffset: kafkago.FirstOffset,
		HeartbeatInterval: time.Second, SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
		Logger: kafkago.LoggerFunc(func(msg string, args ...any) { t.Logf("kafka-go: "+msg, args...) }),
	})
	defer func() {
		if err := r.Close(); err != nil {
			t.Errorf("close kafka-go reader: %v", err)
		}
	}()
	var got []consumed
	var msgs []kafkago.Message
	for !done(got) {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("%s: fetch after %d records: %v", group, len(got), err)
		}
		got = append(got, consumed{int32(m.Partition), m.Offset, string(m.Value)})
		msgs = append(msgs, m)
	}
	if err := r.CommitMessages(ctx, msgs...); err != nil {
		t.Fatalf("%s: commit: %v", group, err)
	}
	return got
}

// TestKafkaGoReaderWithGroupResumesAtTheCommittedOffset: a kafka-go Reader with a GroupID
// reads part of a topic produced earlier and commits; a new Reader resumes at the committed
// offsets.
func TestKafkaGoReaderWithGroupResumesAtTheCommittedOffset(t *testing.T) {
	resumesAtTheCommittedOffset(t, newCluster(t, 3), "kafkago", "kafkago-group", 4, 25, kafkaGoRead)
}
