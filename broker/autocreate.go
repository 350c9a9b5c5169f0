package broker

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Metadata auto-creation (docs/topics.md, "Admin APIs (broker)"): a Metadata request naming an unknown topic with
// allow_auto_topic_creation (implied before v4), on a cluster whose auto.create.topics.enable
// is true (the default), creates the topic with num.partitions partitions — in the background:
// the Metadata answer does not wait, it says UNKNOWN_TOPIC_OR_PARTITION as KRaft brokers do,
// and the client's next Metadata finds the topic once it exists and is assigned.

// maxAutoCreates bounds the creations in flight per broker; a client asking for more unknown
// topics at once gets them created on its later Metadata requests.
const maxAutoCreates = 64

// autoCreateTimeout bounds one creation's API write.
const autoCreateTimeout = 30 * time.Second

// autoCreator runs background creations, at most one per topic name at a time.
type autoCreator struct {
	mu       sync.Mutex
	inFlight map[string]bool // topic names being created; guarded by mu
	wg       sync.WaitGroup  // one count per creation goroutine
}

func newAutoCreator() *autoCreator { return &autoCreator{inFlight: map[string]bool{}} }

// start runs create(name) on its own goroutine unless a creation of name is in flight or
// maxAutoCreates are; it reports whether it started one.
func (a *autoCreator) start(name string, create func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inFlight[name] || len(a.inFlight) >= maxAutoCreates {
		return false
	}
	a.inFlight[name] = true
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer func() {
			a.mu.Lock()
			delete(a.inFlight, name)
			a.mu.Unlock()
		}()
		create()
	}()
	return true
}

// wait returns once every creation has ended (they end when the server closes).
func (a *autoCreator) wait() { a.wg.Wait() }

// autoCreateTopic creates topic name with partitions partitions in the background. Its context
// is the Handler's, so Handler.Close ends it.
func (h *Handler) autoCreateTopic(name string, partitions int32) {
	if h.Admin == nil {
		return
	}
	h.init()
	h.autoCreate.start(name, func() {
		ctx, cancel := context.WithTimeout(h.base, autoCreateTimeout)
		defer cancel()
		err := h.Admin.CreateTopic(ctx, name, partitions, nil)
		switch {
		case err == nil:
			h.Log.Info("Auto-created topic", "topic", name, "partitions", partitions)
		case apierrors.IsAlreadyExists(err):
			h.Log.V(1).Info("Auto-creation found the topic already created", "topic", name)
		case h.base.Err() == nil:
			h.Log.Error(err, "Auto-creating topic failed", "topic", name)
		}
	})
}
