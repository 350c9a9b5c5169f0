package groups

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The API methods take a decoded kmsg request (Version set) and return its response, with
// every version-dependent rule of the group protocol applied here; framing, connections and
// ApiVersions are the broker's. They copy what they keep from the request before handing it
// to the group, so the caller may reuse the request's buffers once the method returns. The
// error is non-nil only when ctx ended before the answer (drop the request) or the version is
// outside VersionRange (a bug in the caller).

// VersionRange is the version range this package implements for an API key (Apache Kafka
// 3.7's; 4.0's for the consumer protocol's keys and ListGroups; docs/groups.md "API and how
// the broker calls it"); the broker advertises exactly these.
func VersionRange(key int16) (min, max int16, ok bool) {
	r, ok := versionRanges[key]
	return r[0], r[1], ok
}

var versionRanges = map[int16][2]int16{
	8:  {0, 9}, // OffsetCommit
	9:  {0, 9}, // OffsetFetch
	11: {0, 9}, // JoinGroup
	12: {0, 4}, // Heartbeat
	13: {0, 5}, // LeaveGroup
	14: {0, 5}, // SyncGroup
	15: {0, 5}, // DescribeGroups
	16: {0, 5}, // ListGroups (v5: Apache 4.0, the group type)
	28: {0, 3}, // TxnOffsetCommit
	42: {0, 2}, // DeleteGroups
	47: {0, 0}, // OffsetDelete
	68: {0, 1}, // ConsumerGroupHeartbeat (Apache 4.0)
	69: {0, 1}, // ConsumerGroupDescribe (Apache 4.0)
}

func checkVersion(req kmsg.Request) error {
	lo, hi, ok := VersionRange(req.Key())
	if v := req.GetVersion(); !ok || v < lo || v > hi {
		return fmt.Errorf("groups: %s v%d is not served (range %d-%d)", kmsg.NameForKey(req.Key()), v, lo, hi)
	}
	return nil
}

func ms(v int32) time.Duration { return time.Duration(v) * time.Millisecond }

// JoinGroup (key 11) v0–9. v0 has no rebalance timeout (the session timeout is used); v4+
// without an instance id gets MEMBER_ID_REQUIRED on its first join (KIP-394); v5+ carries
// group.instance.id (KIP-345); v7+ answers the protocol type and a null protocol name where
// older versions get ""; v9 has SkipAssignment.
func (c *Coordinator) JoinGroup(ctx context.Context, cl Client, req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, error) {
	if err := checkVersion(req); err != nil {
		return nil, err
	}
	a := joinArgs{
		memberID:         req.MemberID,
		clientID:         cl.ID,
		clientHost:       cl.Host,
		sessionTimeout:   ms(req.SessionTimeoutMillis),
		rebalanceTimeout: ms(req.RebalanceTimeoutMillis),
		protocolType:     req.ProtocolType,
		supportSkipping:  req.Version >= 9,
	}
	if req.Version == 0 {
		a.rebalanceTimeout = a.sessionTimeout
	}
	if req.Version >= 5 && req.InstanceID != nil {
		a.instanceID = strp(*req.InstanceID)
	}
	a.requireKnownMemberID = req.Version >= 4 && a.instanceID == nil
	for _, p := range req.Protocols {
		a.protocols = append(a.protocols, protocol{name: p.Name, metadata: bytes.Clone(p.Metadata)})
	}
	res := joinError(req.MemberID, kerr.InvalidGroupID.Code)
	if req.Group != "" {
		var err error
		res, err = do(ctx, c, req.Group,
			func(g *group, w *waiter[joinResult]) { g.handleJoin(a, w) },
			func(code int16) joinResult { return joinError(a.memberID, code) })
		if err != nil {
			return nil, err
		}
	}
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode = res.code
	resp.Generation = res.generation
	resp.ProtocolType = res.protocolType
	resp.Protocol = res.protocol
	if req.Version < 7 && resp.Protocol == nil {
		resp.Protocol = strp("")
	}
	resp.LeaderID = res.leader
	resp.SkipAssignment = res.skipAssignment
	resp.MemberID = res.memberID
	for _, m := range res.members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.id, m.instanceID, m.metadata
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}

// SyncGroup (key 14) v0–5. v3+ carries the instance id; v5 requires ProtocolType and
// Protocol (else INCONSISTENT_GROUP_PROTOCOL, checked before anything else, as Apache's
// KafkaApis does) and answers them. A coordinator still loading answers
// REBALANCE_IN_PROGRESS: the rebalance's state was lost, and older clients do not expect
// COORDINATOR_LOAD_IN_PROGRESS here.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, error) {
	if err := checkVersion(req); err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if req.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil) {
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return resp, nil
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	a := syncArgs{generation: req.Generation, memberID: req.MemberID, assignments: map[string][]byte{}}
	if req.Version >= 3 && req.InstanceID != nil {
		a.instanceID = strp(*req.InstanceID)
	}
	if req.Version >= 5 {
		a.protocolType, a.protocol = strp(*req.ProtocolType), strp(*req.Protocol)
	}
	for _, as := range req.GroupAssignment {
		a.assignments[as.MemberID] = bytes.Clone(as.MemberAssignment)
	}
	res, err := do(ctx, c, req.Group,
		func(g *group, w *waiter[syncResult]) { g.handleSync(a, w) },
		func(code int16) syncResult {
			if code == kerr.CoordinatorLoadInProgress.Code {
				code = kerr.RebalanceInProgress.Code
			}
			return syncResult{code: code}
		})
	if err != nil {
		return nil, err
	}
	resp.ErrorCode = res.code
	resp.ProtocolType, resp.Protocol = res.protocolType, res.protocol
	resp.MemberAssignment = res.assignment
	return resp, nil
}

// Heartbeat (key 12) v0–4. v3+ carries the instance id. A coordinator still loading answers
// NONE ("respond blindly", as Apache).
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) (*kmsg.HeartbeatResponse, error) {
	if err := checkVersion(req); err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	a := heartbeatArgs{generation: req.Generation, memberID: req.MemberID}
	if req.Version >= 3 && req.InstanceID != nil {
		a.instanceID = strp(*req.InstanceID)
	}
	code, err := do(ctx, c, req.Group,
		func(g *group, w *waiter[int16]) { w.send(g.handleHeartbeat(a)) },
		func(code int16) int16 {
			if code == kerr.CoordinatorLoadInProgress.Code {
				return 0
			}
			return code
		})
	if err != nil {
		return nil, err
	}
	resp.ErrorCode = code
	return resp, nil
}

// LeaveGroup (key 13) v0–5. v0–2 name one member and answer one error (the top-level error,
// else that member's); v3+ remove a batch of members, each answered, and an empty member id
// with an instance id removes that static member.
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) (*kmsg.LeaveGroupResponse, error) {
	if err := checkVersion(req); err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	var ms []leaveMember
	if req.Version < 3 {
		ms = []leaveMember{{memberID: req.MemberID}}
	} else {
		for _, m := range req.Members {
			lm := leaveMember{memberID: m.MemberID}
			if m.InstanceID != nil {
				lm.instanceID = strp(*m.InstanceID)
			}
			ms = append(ms, lm)
		}
	}
	res := leaveResult{code: kerr.InvalidGroupID.Code}
	if req.Group != "" {
		var err error
		res, err = do(ctx, c, req.Group,
			func(g *group, w *waiter[leaveResult]) { w.send(g.handleLeave(ms)) },
			func(code int16) leaveResult { return leaveResult{code: code} })
		if err != nil {
			return nil, err
		}
	}
	if req.Version < 3 {
		resp.ErrorCode = res.code
		if res.code == 0 && len(res.members) == 1 {
			resp.ErrorCode = res.members[0]
		}
		return resp, nil
	}
	resp.ErrorCode = res.code
	for i, code := range res.members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = req.Members[i].MemberID, req.Members[i].InstanceID, code
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}
