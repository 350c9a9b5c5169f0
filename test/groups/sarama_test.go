package groups

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_7_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	cfg.Admin.Timeout = 10 * time.Second
	return cfg
}

// saramaRead runs a sarama ConsumerGroup of topic until done holds for what it read, marks
// and commits what it read (session.Commit) and closes (leaving the group).
func saramaRead(t *testing.T, c *cluster, group, topic string, done func([]consumed) bool) []consumed {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	cg, err := sarama.NewConsumerGroup(c.Addrs, group, saramaConfig())
	if err != nil {
		t.Fatalf("sarama consumer group: %v", err)
	}
	h := &saramaHandler{done: done, finished: cancel}
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
			t.Logf("sarama consume: %v", err)
		}
	}
	if err := cg.Close(); err != nil {
		t.Errorf("close sarama consumer group: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.committed {
		t.Fatalf("%s: read %d records without finishing", group, len(h.got))
	}
	return h.got
}

// saramaHandler collects records and, once done holds, commits what it marked and ends
// the session.
type saramaHandler struct {
	done     func([]consumed) bool
	finished context.CancelFunc

	mu        sync.Mutex
	got       []consumed
	committed bool
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		if h.committed {
			h.mu.Unlock()
			return nil
		}
		h.got = append(h.got, consumed{m.Partition, m.Offset, string(m.Value)})
		s.MarkMessage(m, "")
		if h.done(h.got) {
			s.Commit()
			h.committed = true
			h.finished()
		}
		h.mu.Unlock()
	}
	return nil
}

// TestSaramaConsumerGroupResumesAtTheCommittedOffset: a sarama ConsumerGroup reads part
// of a topic produced earlier, marks and commits; a new one resumes at the committed offsets.
func TestSaramaConsumerGroupResumesAtTheCommittedOffset(t *testing.T) {
	resumesAtTheCommittedOffset(t, newCluster(t, 3), "sarama", "sarama-group", 4, 25, saramaRead)
}
