package groups

type describeMember struct {
	id, clientID, clientHost string
	instanceID               *string
	metadata, assignment     []byte
}

type describeResult struct {
	code         int16 // a status error (not coordinator, loading); the rest is then empty
	state        string
	protocolType string
	protocol     string
	members      []describeMember
}

// handleDescribe is Apache's GroupMetadata.summary: a group that does not exist, or is a
// consumer group, is Dead; only a Stable group shows its protocol and each member's metadata
// and assignment.
func (g *group) handleDescribe() describeResult {
	if !g.exists() || g.cg != nil {
		// A consumer group is described by ConsumerGroupDescribe; DescribeGroups v0–5 sees
		// it as Apache 4.0 does a group that is not classic: Dead.
		return describeResult{state: StateDead.String()}
	}
	res := describeResult{state: g.state.String(), protocolType: g.protocolType}
	stable := g.state == StateStable
	if stable {
		res.protocol = g.protocol
	}
	for _, id := range g.order {
		m := g.members[id]
		dm := describeMember{id: m.id, clientID: m.clientID, clientHost: m.clientHost, instanceID: m.instanceID}
		if stable {
			dm.metadata, dm.assignment = m.metadata(g.protocol), m.assignment
		}
		res.members = append(res.members, dm)
	}
	return res
}
