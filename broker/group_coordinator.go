package broker

import (
	"context"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/groups"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/acl"
	"github.com/paddock-dev/paddock/internal/coordinator"
)

// Groups is the broker's group coordinator (broker/groups, docs/groups.md) wired to the
// cluster view: it creates the Coordinator once the view gives the cluster id (its files live
// under storage.GroupsDir(data, clusterID)), hands it every new coordinator epoch with the
// coordinator rule (SetView), purges the offsets of deleted topics, and closes it at exit.
// The group API handlers (api_08 … api_47) reach the Coordinator through Coordinator; before
// it exists they are answered by broker/groups' Unavailable coordinator, as a coordinator
// answers before its first view.
type Groups struct {
	// Self is this broker's id; DataDir the shared volume; View the cluster view.
	Self    int32
	DataDir string
	View    cluster.View
	// FS is the groups' file system (storage.OSFS when nil).
	FS storage.FS
	// Metrics are the coordinator's series; registered by the broker on its registry.
	Metrics *groups.Metrics
	// Configure, when set, adjusts the coordinator's configuration (from
	// groups.DefaultConfig) before it is created: tests shorten the initial rebalance delay.
	Configure func(*groups.Config)
	Log       logr.Logger

	cur atomic.Pointer[groups.Coordinator]
	// offsets is the __consumer_offsets view the coordinator feeds (offsets_topic.go); set
	// with cur.
	offsets atomic.Pointer[offsetsView]
	// started is closed once cur is set (Changed); made by startedCh.
	startedOnce sync.Once
	started     chan struct{}
}

// Coordinator is the running coordinator, nil until the view gave the cluster id (or
// without a data directory).
func (g *Groups) Coordinator() *groups.Coordinator {
	if g == nil {
		return nil
	}
	return g.cur.Load()
}

// Changed returns a channel closed at the next change of Owned: the coordinator's start, a
// group taken over, a group unloaded. Take it before reading Owned, so no change slips
// between. Never closed on a nil Groups (no data directory: nothing is ever held).
func (g *Groups) Changed() <-chan struct{} {
	if g == nil {
		return nil
	}
	if c := g.cur.Load(); c != nil {
		return c.OwnedChanged()
	}
	return g.startedCh()
}

func (g *Groups) startedCh() chan struct{} {
	g.startedOnce.Do(func() { g.started = make(chan struct{}) })
	return g.started
}

// offsetsTopic is the __consumer_offsets view of the running coordinator, nil before it
// runs (or without a data directory).
func (g *Groups) offsetsTopic() *offsetsView {
	if g == nil {
		return nil
	}
	return g.offsets.Load()
}

// Owned is how many groups this broker still holds (groups.Coordinator.Owned); 0 before the
// coordinator exists.
func (g *Groups) Owned() int {
	if c := g.Coordinator(); c != nil {
		return c.Owned()
	}
	return 0
}

// Counts counts the groups this broker coordinates and serves, by protocol and state
// (groups.Coordinator.GroupCounts), for its heartbeat Lease; none before the coordinator
// starts.
func (g *Groups) Counts() []v1alpha1.GroupCount {
	c := g.Coordinator()
	if c == nil {
		return nil
	}
	counts := c.GroupCounts()
	out := make([]v1alpha1.GroupCount, len(counts))
	for i, n := range counts {
		out[i] = v1alpha1.GroupCount{Protocol: n.Type, State: n.State, Count: int32(min(n.Count, v1alpha1.MaxGroupsPerBroker))}
	}
	return out
}

// Run follows the view until ctx ends, then closes the coordinator (its waiting requests
// are answered NOT_COORDINATOR). It returns when the coordinator is closed.
func (g *Groups) Run(ctx context.Context) {
	defer func() {
		if c := g.cur.Load(); c != nil {
			_ = c.Close() // always nil
		}
	}()
	purged := map[topicIncarnation]bool{}
	var last *cluster.Snapshot
	for {
		updated := g.View.Updated() // taken before reading, so no change slips between
		s := g.View.Snapshot()
		c := g.cur.Load()
		if c == nil && s.Synced && s.ClusterID != "" {
			var err error
			if c, err = g.start(s); err != nil {
				g.Log.Error(err, "Group coordinator not started; groups answer COORDINATOR_NOT_AVAILABLE until a view change lets it start")
			}
		}
		if c != nil {
			if epoch, owns, ok := coordinatorView(s, g.Self); ok {
				c.SetView(epoch, owns)
			}
			g.offsets.Load().follow(s)
			g.purge(ctx, c, last, s, purged)
			last = s
		}
		select {
		case <-ctx.Done():
			return
		case <-updated:
		}
	}
}

// start creates the coordinator with the cluster's group settings as the view s gives them
// (group.initial.rebalance.delay.ms, group.{min,max}.session.timeout.ms, group.max.size,
// offset.metadata.max.bytes, offsets.retention.minutes and the consumer protocol's
// group.coordinator.rebalance.protocols and group.consumer.*: read once, so a change applies at
// the broker's next restart).
func (g *Groups) start(s *cluster.Snapshot) (*groups.Coordinator, error) {
	cfg := groups.DefaultConfig()
	cfg.Dir = storage.GroupsDir(g.DataDir, s.ClusterID)
	cfg.InitialRebalanceDelay = s.Config.GroupInitialRebalanceDelay
	cfg.MinSessionTimeout, cfg.MaxSessionTimeout = s.Config.GroupMinSessionTimeout, s.Config.GroupMaxSessionTimeout
	cfg.MaxGroupSize = int(s.Config.GroupMaxSize)
	cfg.MaxMetadataSize = int(s.Config.OffsetMetadataMaxBytes)
	cfg.OffsetsRetention = s.Config.OffsetsRetention
	if n := s.Config.OffsetsTopicPartitions; n > 0 {
		cfg.OffsetsPartitions = n
	}
	cfg.ConsumerProtocol = s.Config.ConsumerProtocol
	cfg.ConsumerHeartbeatInterval, cfg.ConsumerSessionTimeout = s.Config.ConsumerHeartbeatInterval, s.Config.ConsumerSessionTimeout
	cfg.ConsumerMaxSize = int(s.Config.ConsumerMaxSize)
	cfg.ConsumerAssignors = s.Config.ConsumerAssignors
	cfg.Topics = viewTopics{g.View}
	cfg.FS = g.FS
	cfg.Metrics = g.Metrics
	cfg.Log = g.Log
	view := newOffsetsView(g.Self, g.View)
	cfg.OffsetsChanged = view.changed
	if g.Configure != nil {
		g.Configure(&cfg)
	}
	c, err := groups.New(cfg)
	if err != nil {
		return nil, err
	}
	g.offsets.Store(view)
	g.cur.Store(c)
	close(g.startedCh())
	g.Log.Info("Group coordinator started", "dir", cfg.Dir, "initialRebalanceDelay", cfg.InitialRebalanceDelay,
		"sessionTimeouts", fmt.Sprintf("%v-%v", cfg.MinSessionTimeout, cfg.MaxSessionTimeout), "maxGroupSize", cfg.MaxGroupSize, "consumerProtocol", cfg.ConsumerProtocol)
	return c, nil
}

// topicIncarnation is one topic's name and id: what a purge removes.
type topicIncarnation struct {
	name string
	id   [16]byte
}

// purge removes, from the groups held here, the offsets of every topic incarnation the view
// shows deleted (being deleted, or served in the last view and gone from this one), once per
// incarnation. A purge that fails is logged; the offsets stay hidden once a topic of that
// name with another id exists (docs/groups.md, "How the broker does it": deleted topics).
func (g *Groups) purge(ctx context.Context, c *groups.Coordinator, last, s *cluster.Snapshot, done map[topicIncarnation]bool) {
	var gone []topicIncarnation
	for _, d := range s.Deleting {
		gone = append(gone, topicIncarnation{d.Name, d.ID})
	}
	if last != nil {
		for _, t := range last.Topics {
			if now, ok := s.Topic(t.Name); !ok || now.ID != t.ID {
				gone = append(gone, topicIncarnation{t.Name, t.ID})
			}
		}
	}
	for _, ti := range gone {
		if done[ti] {
			continue
		}
		if _, live := s.Topic(ti.name); live && ti.id == ([16]byte{}) {
			// A zero id purges every offset of the name, the live topic's too: leave them (an
			// incarnation that never had an id cannot be told from the live one's offsets).
			continue
		}
		done[ti] = true
		if err := c.PurgeTopic(ctx, ti.name, ti.id); err != nil && ctx.Err() == nil {
			g.Log.Error(err, "Purging a deleted topic's committed offsets failed", "topic", ti.name)
		}
	}
}

// coordinatorView is what SetView needs from a snapshot: status.coordinatorEpoch and the
// coordinator rule over the broker sets that epoch was set for (status.coordinatorBrokers),
// so that every epoch has exactly one owner per group. ok is false while the operator has
// not set an epoch yet (the coordinator then answers COORDINATOR_NOT_AVAILABLE).
//
// FindCoordinator applies the same rule (coordinator.Pick) to the registry rows themselves;
// the two differ only between a registry change and the epoch bump that follows it, when a
// client sent to the new coordinator is answered NOT_COORDINATOR and asks again.
func coordinatorView(s *cluster.Snapshot, self int32) (epoch int32, owns func(string) bool, ok bool) {
	if s.CoordinatorEpoch <= 0 || s.CoordinatorBrokers == nil {
		return 0, nil, false
	}
	registered, alive := s.CoordinatorBrokers.Registered, s.CoordinatorBrokers.Alive
	partitions := s.Config.OffsetsTopicPartitions
	owns = func(group string) bool {
		id, ok := coordinator.Pick(group, partitions, registered, alive)
		return ok && id == self
	}
	return int32(min(s.CoordinatorEpoch, math.MaxInt32)), owns, true
}

// coordinatesGroups reports whether the snapshot's coordinator rule can still pick this
// broker for some group: it is in the alive set the coordinator epoch was set for.
func coordinatesGroups(s *cluster.Snapshot, self int32) bool {
	if s.CoordinatorBrokers == nil {
		return false
	}
	for _, id := range s.CoordinatorBrokers.Alive {
		if id == self {
			return true
		}
	}
	return false
}

// viewTopics is the coordinator's view of the topics (groups.Topics), read from the
// current snapshot at each call.
type viewTopics struct{ view cluster.View }

func (v viewTopics) Topic(name string) (id [16]byte, partitions int32, ok bool) {
	t, ok := v.view.Snapshot().Topic(name)
	if !ok {
		return id, 0, false
	}
	return t.ID, int32(len(t.Partitions)), true
}

func (v viewTopics) TopicNames() []string {
	s := v.view.Snapshot()
	out := make([]string, len(s.Topics))
	for i, t := range s.Topics {
		out[i] = t.Name
	}
	return out
}

func (v viewTopics) TopicByID(id [16]byte) (string, int32, bool) {
	t, ok := v.view.Snapshot().TopicByID(id)
	if !ok {
		return "", 0, false
	}
	return t.Name, int32(len(t.Partitions)), true
}

// groupClient is the request's client as the coordinator records it: the header's client id
// and "/<ip>", as Apache prints a member's host.
func (rc *requestContext) groupClient() groups.Client {
	cl := groups.Client{ID: rc.clientID}
	if rc.remote != nil {
		host := rc.remote.String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		cl.Host = "/" + host
	}
	if rc.enforcing() {
		// The principal's DESCRIBE on a topic, by the ACLs as of this request: a consumer
		// member's regular expression resolves only over the topics it may describe.
		z, principal, addr := rc.z(), rc.principal(), rc.host()
		cl.MayDescribeTopic = func(topic string) bool {
			return z.Allowed(acl.Action{Principal: principal, Host: addr, Type: v1alpha1.ACLTopic, Name: topic, Operation: acl.OpDescribe})
		}
	}
	return cl
}

// coordinator is the group coordinator the request is answered by: the running one, or
// broker/groups' Unavailable one while there is none (no data directory, or no cluster id
// yet).
func (rc *requestContext) coordinator() *groups.Coordinator {
	if c := rc.h.Groups.Coordinator(); c != nil {
		return c
	}
	return rc.h.unavailable
}

// answer is a coordinator's typed answer as a handler returns it: no typed nil response
// next to an error.
func answer[R kmsg.Response](resp R, err error) (kmsg.Response, error) {
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// registerGroupAPI registers a group API key at the version range broker/groups
// implements, so what ApiVersions advertises is exactly what the coordinator serves.
func registerGroupAPI(key int16, h handler) {
	lo, hi, ok := groups.VersionRange(key)
	if !ok {
		panic("broker: broker/groups does not serve api key " + kmsg.NameForKey(key))
	}
	register(key, lo, hi, h)
}
