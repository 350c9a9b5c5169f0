package groups

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupOperations is the authorized-operations bitfield of a GROUP resource when everything is
// allowed (paddock has no ACLs): READ (3), DELETE (6), DESCRIBE (8).
const groupOperations = 1<<3 | 1<<6 | 1<<8

// DescribeGroups (key 15) v0–5. An unknown group answers NONE with state Dead; only a Stable
// group shows its protocol and the members' metadata and assignments; v3+ may ask for the
// authorized operations (all of a group's, as paddock has no ACLs); v4+ show instance ids.
// An empty group id is allowed.
func (c *Coordinator) DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) (*kmsg.DescribeGroupsResponse, error) {
	if err := checkVersion(req); err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		res, err := do(ctx, c, id,
			func(g *group, w *waiter[describeResult]) { w.send(g.handleDescribe()) },
			func(code int16) describeResult { return describeResult{code: code} })
		if err != nil {
			return nil, err
		}
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = id, res.code
		if res.code == 0 {
			rg.State, rg.ProtocolType, rg.Protocol = res.state, res.protocolType, res.protocol
			for _, m := range res.members {
				rm := kmsg.NewDescribeGroupsResponseGroupMember()
				rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
				rm.ProtocolMetadata, rm.MemberAssignment = m.metadata, m.assignment
				rg.Members = append(rg.Members, rm)
			}
			if req.Version >= 3 && req.IncludeAuthorizedOperations {
				rg.AuthorizedOperations = groupOperations
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// ListGroups (key 16) v0–5: the groups this coordinator holds, Dead ones excepted; v4 may
// filter by state names (a classic group's exactly, as Apache's classic coordinator compares
// them; a consumer group's case-insensitively, as Apache 4.0 does); v5 (Apache 4.0) answers
// each group's type and may filter by types ("classic", "consumer", case-insensitive). While
// a group is still loading the list comes with COORDINATOR_LOAD_IN_PROGRESS, as Apache answers
// while a partition of __consumer_offsets loads.
func (c *Coordinator) ListGroups(_ context.Context, req *kmsg.ListGroupsRequest) (*kmsg.ListGroupsResponse, error) {
	if err := checkVersion(req); err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	c.mu.Lock()
	if c.closed || c.owns == nil {
		c.mu.Unlock()
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	var gs []*group
	for id, g := range c.groups {
		if c.owns(id) {
			gs = append(gs, g)
		}
	}
	c.mu.Unlock()
	var filter, types []string
	if req.Version >= 4 {
		filter = req.StatesFilter
	}
	if req.Version >= 5 {
		types = req.TypesFilter
	}
	loading := c.scans.Load() > 0
	for _, g := range gs {
		select {
		case <-g.loaded:
		default:
			loading = true
			continue
		}
		ov := g.overview.Load()
		if g.loadErr != nil || ov == nil || ov.State == StateDead.String() {
			continue
		}
		if !listed(ov, filter, types) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = ov.Group, ov.ProtocolType, ov.State, ov.Type
		resp.Groups = append(resp.Groups, lg)
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	if loading {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
	}
	return resp, nil
}

// listed applies ListGroups' filters to a group.
func listed(ov *Overview, states, types []string) bool {
	if len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return strings.EqualFold(t, ov.Type) }) {
		return false
	}
	if len(states) == 0 {
		return true
	}
	if ov.Type == TypeConsumer {
		return slices.ContainsFunc(states, func(s string) bool { return strings.EqualFold(s, ov.State) })
	}
	return slices.Contains(states, ov.State)
}

// DeleteGroups (key 42) v0–2: each distinct group once, in request order. An Empty group is
// deleted with its offsets (durably); a group with members is NON_EMPTY_GROUP; an unknown one
// GROUP_ID_NOT_FOUND. An empty group id is allowed.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) (*kmsg.DeleteGroupsResponse, error) {
	if err := checkVersion(req); err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	seen := map[string]bool{}
	for _, id := range req.Groups {
		if seen[id] {
			continue
		}
		seen[id] = true
		code, err := do(ctx, c, id,
			func(g *group, w *waiter[int16]) { w.send(g.handleDeleteGroup()) },
			func(code int16) int16 { return code })
		if err != nil {
			return nil, err
		}
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = id, code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
