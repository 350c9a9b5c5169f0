package groups

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupHeartbeat (key 68) v0–1, the consumer group protocol (KIP-848; docs/groups.md
// "The consumer protocol"). Off (Config.ConsumerProtocol false) it answers
// UNSUPPORTED_VERSION, as Apache 4.0 does while group.coordinator.rebalance.protocols lacks
// "consumer". A request Apache's throwIfConsumerGroupHeartbeatRequestIsInvalid refuses is
// INVALID_REQUEST with its message; an unknown ServerAssignor UNSUPPORTED_ASSIGNOR; a regular
// expression that does not compile INVALID_REGULAR_EXPRESSION — all before the group is asked.
// v0: a joining member without id gets one from the coordinator; v1 (KIP-1082) requires the
// client's own member id and carries SubscribedTopicRegex.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, cl Client, req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
	if err := checkVersion(req); err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(code int16, msg string) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = strp(msg)
		}
		return resp, nil
	}
	if !c.cfg.ConsumerProtocol {
		return fail(kerr.UnsupportedVersion.Code, "The consumer group protocol is disabled (group.coordinator.rebalance.protocols).")
	}
	if code, msg := c.validateConsumerHeartbeat(req); code != 0 {
		return fail(code, msg)
	}
	a := cgHeartbeat{
		memberID:         req.MemberID,
		epoch:            req.MemberEpoch,
		rebalanceTimeout: req.RebalanceTimeoutMillis,
		names:            slices.Clone(req.SubscribedTopicNames),
		clientID:         cl.ID,
		clientHost:       cl.Host,
		mayDescribe:      cl.MayDescribeTopic,
	}
	if req.SubscribedTopicNames != nil && a.names == nil {
		a.names = []string{}
	}
	a.instanceID, a.rackID = clonePtr(req.InstanceID), clonePtr(req.RackID)
	a.assignor = clonePtr(req.ServerAssignor)
	if req.Version >= 1 {
		a.regex = clonePtr(req.SubscribedTopicRegex)
	}
	if req.Topics != nil {
		a.owned = pset{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				a.owned[tpid{t.TopicID, p}] = struct{}{}
			}
		}
	}
	a.full = a.rebalanceTimeout != -1 && (a.names != nil || a.regex != nil) && a.owned != nil
	res, err := do(ctx, c, req.Group,
		func(g *group, w *waiter[cgResult]) { w.send(g.handleConsumerHeartbeat(a)) },
		func(code int16) cgResult { return cgError(code, "") })
	if err != nil {
		return nil, err
	}
	if res.code != 0 {
		return fail(res.code, res.message)
	}
	resp.MemberID = strp(res.memberID)
	resp.MemberEpoch = res.epoch
	resp.HeartbeatIntervalMillis = int32(res.interval.Milliseconds())
	if res.assignment != nil {
		as := &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
		for _, t := range byTopicID(res.assignment) {
			rt := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			rt.TopicID, rt.Partitions = t.id, t.partitions
			as.Topics = append(as.Topics, rt)
		}
		if as.Topics == nil {
			as.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		}
		resp.Assignment = as
	}
	return resp, nil
}

func clonePtr(s *string) *string {
	if s == nil {
		return nil
	}
	return strp(strings.Clone(*s))
}

// validateConsumerHeartbeat is Apache 4.0's throwIfConsumerGroupHeartbeatRequestIsInvalid.
func (c *Coordinator) validateConsumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	invalid := kerr.InvalidRequest.Code
	empty := func(s *string) bool { return s != nil && strings.TrimSpace(*s) == "" }
	switch {
	case strings.TrimSpace(req.Group) == "":
		return invalid, "GroupId can't be empty."
	case empty(req.InstanceID):
		return invalid, "InstanceId can't be empty."
	case empty(req.RackID):
		return invalid, "RackId can't be empty."
	case strings.TrimSpace(req.MemberID) == "" && (req.Version >= 1 || req.MemberEpoch > 0 || req.MemberEpoch == -1):
		return invalid, "MemberId can't be empty."
	case req.MemberEpoch == 0 && req.RebalanceTimeoutMillis == -1:
		return invalid, "RebalanceTimeoutMs must be provided in first request."
	case req.MemberEpoch == 0 && (req.Topics == nil || len(req.Topics) > 0):
		return invalid, "TopicPartitions must be empty when (re-)joining."
	case req.MemberEpoch == 0 && req.SubscribedTopicNames == nil && (req.Version < 1 || req.SubscribedTopicRegex == nil):
		return invalid, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
	case req.MemberEpoch == leftStaticEpoch && req.InstanceID == nil:
		return invalid, "InstanceId can't be null."
	case req.MemberEpoch < leftStaticEpoch:
		return invalid, "MemberEpoch is invalid."
	}
	if req.Version >= 1 && req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileSubscription(*req.SubscribedTopicRegex); err != nil {
			return kerr.InvalidRegularExpression.Code, "SubscribedTopicRegex `" + *req.SubscribedTopicRegex + "` is not a valid regular expression: " + err.Error()
		}
	}
	if a := req.ServerAssignor; a != nil && !slices.Contains(c.cfg.ConsumerAssignors, *a) {
		return kerr.UnsupportedAssignor.Code, "ServerAssignor " + *a + " is not supported. Supported assignors: " + strings.Join(c.cfg.ConsumerAssignors, ", ") + "."
	}
	return 0, ""
}

// topicPartitions is one topic's partitions of a set, sorted.
type topicPartitions struct {
	id         [16]byte
	partitions []int32
}

// byTopicID splits a set by topic, topics and partitions sorted.
func byTopicID(s pset) []topicPartitions {
	var out []topicPartitions
	for _, p := range s.sorted() {
		if n := len(out); n == 0 || out[n-1].id != p.id {
			out = append(out, topicPartitions{id: p.id})
		}
		out[len(out)-1].partitions = append(out[len(out)-1].partitions, p.p)
	}
	return out
}

// ConsumerGroupDescribe (key 69) v0–1: each group once, in request order; a group that is not
// a consumer group, or does not exist, is GROUP_ID_NOT_FOUND. Members show their epoch, their
// subscription, what they own and their target assignment (topics by id and name); v1 adds the
// member type (1: consumer protocol). Authorized operations, when asked for, are all of a
// group's (no ACLs yet). Off (Config.ConsumerProtocol false): UNSUPPORTED_VERSION per group.
func (c *Coordinator) ConsumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) (*kmsg.ConsumerGroupDescribeResponse, error) {
	if err := checkVersion(req); err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group = id
		var res cgDescribeResult
		if !c.cfg.ConsumerProtocol {
			res.code = kerr.UnsupportedVersion.Code
		} else {
			var err error
			res, err = do(ctx, c, id,
				func(g *group, w *waiter[cgDescribeResult]) { w.send(g.handleConsumerDescribe()) },
				func(code int16) cgDescribeResult { return cgDescribeResult{code: code} })
			if err != nil {
				return nil, err
			}
		}
		rg.ErrorCode = res.code
		if res.message != "" {
			rg.ErrorMessage = strp(res.message)
		}
		if res.code == 0 {
			rg.State, rg.Epoch, rg.AssignmentEpoch, rg.AssignorName = res.state, res.epoch, res.assignmentEpoch, res.assignor
			for _, m := range res.members {
				rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
				rm.MemberID, rm.InstanceID, rm.RackID, rm.MemberEpoch = m.id, m.instanceID, m.rackID, m.epoch
				rm.ClientID, rm.ClientHost = m.clientID, m.clientHost
				rm.SubscribedTopics, rm.SubscribedTopicRegex = m.names, m.regex
				if rm.SubscribedTopics == nil {
					rm.SubscribedTopics = []string{}
				}
				rm.Assignment, rm.TargetAssignment = c.describeAssignment(m.assigned), c.describeAssignment(m.target)
				if req.Version >= 1 {
					rm.MemberType = 1
				}
				rg.Members = append(rg.Members, rm)
			}
			if req.IncludeAuthorizedOperations {
				rg.AuthorizedOperations = groupOperations
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

func (c *Coordinator) describeAssignment(s pset) kmsg.Assignment {
	a := kmsg.Assignment{TopicPartitions: []kmsg.AssignmentTopicPartition{}}
	for _, t := range byTopicID(s) {
		tp := kmsg.AssignmentTopicPartition{TopicID: t.id, Partitions: t.partitions}
		tp.Topic, _, _ = c.cfg.Topics.TopicByID(t.id)
		a.TopicPartitions = append(a.TopicPartitions, tp)
	}
	return a
}

// GroupCount is how many groups of one type ("classic", "consumer") in one state this
// coordinator holds.
type GroupCount struct {
	Type, State string
	Count       int
}

// GroupCounts counts the groups this coordinator holds and serves, by type and state (groups
// that do not exist, are loading or failed to load are left out), sorted by type and state:
// what the broker publishes on its heartbeat Lease for the cluster's status.
func (c *Coordinator) GroupCounts() []GroupCount {
	c.mu.Lock()
	gs := make([]*group, 0, len(c.groups))
	for id, g := range c.groups {
		if c.owns != nil && c.owns(id) {
			gs = append(gs, g)
		}
	}
	c.mu.Unlock()
	n := map[[2]string]int{}
	for _, g := range gs {
		select {
		case <-g.loaded:
		default:
			continue
		}
		if ov := g.overview.Load(); g.loadErr == nil && ov != nil && ov.State != StateDead.String() {
			n[[2]string{ov.Type, ov.State}]++
		}
	}
	out := make([]GroupCount, 0, len(n))
	for k, v := range n {
		out = append(out, GroupCount{Type: k[0], State: k[1], Count: v})
	}
	slices.SortFunc(out, func(a, b GroupCount) int { return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.State, b.State)) })
	return out
}

// ConsumerProtocolEnabled reports whether this coordinator serves the consumer group
// protocol (Config.ConsumerProtocol): what ApiVersions finalizes group.version at.
func (c *Coordinator) ConsumerProtocolEnabled() bool { return c.cfg.ConsumerProtocol }
