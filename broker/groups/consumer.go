package groups

import (
	"cmp"
	"regexp"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The consumer group protocol (KIP-848, Apache 4.0's GroupMetadataManager, ConsumerGroup and
// CurrentAssignmentBuilder; docs/groups.md "The consumer protocol"). The coordinator owns the
// assignment: a member heartbeats its subscription and the partitions it owns, and gets back its
// member epoch and its assignment. Everything here runs on the group's goroutine.
//
// Epochs: the group epoch grows with every change of membership, subscription or subscribed
// topics' partitions; the target assignment is computed for it (the assignment epoch); each
// member converges on its target at its own pace and takes the assignment epoch once it has.
//
// The safety rule (never two owners): a partition is in at most one member's owned set —
// assigned, or being revoked — at any time (consumerState.owners). A member whose target no
// longer has a partition keeps its epoch and is sent only what it keeps; until a heartbeat of
// it no longer lists the partition, the partition stays its own and is given to nobody else
// (UNREVOKED_PARTITIONS). A member whose target has a partition another member still owns takes
// the new epoch with the rest and gets that partition once it is released
// (UNRELEASED_PARTITIONS).

// memberState is a consumer-protocol member's reconciliation state (Apache's MemberState).
type memberState int8

const (
	memberStable memberState = iota
	memberUnrevoked
	memberUnreleased
)

var memberStateNames = [...]string{"STABLE", "UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS"}

func (s memberState) String() string { return memberStateNames[s] }

// leftStaticEpoch is the epoch of a static member that left with epoch -2: it keeps its
// partitions until its session ends, for its instance's next member to take over.
const leftStaticEpoch = -2

// cmember is one consumer-protocol member.
type cmember struct {
	id                   string
	instanceID, rackID   *string
	clientID, clientHost string
	rebalanceTimeout     time.Duration
	names                []string // subscribed topic names, sorted
	regex                string   // subscribed regular expression ("" none), as sent
	// mayDescribe is the DESCRIBE check of its latest heartbeat's principal (nil: every
	// topic); regexMatch is what its expression resolves to for it: the group's matches of
	// regex (regexTopics) that mayDescribe allows, computed for regexFor at regexGen.
	mayDescribe          func(topic string) bool
	regexMatch           []string
	regexFor             string
	regexGen             uint64
	assignor             string // the server assignor it asks for ("" none)
	epoch, previousEpoch int32
	// leftEpoch is a static member's epoch before it left (epoch is then leftStaticEpoch).
	leftEpoch int32
	state     memberState
	assigned  pset // owned: given to it and not being revoked
	revoking  pset // owned: to be revoked before anyone else gets them
	sessionAt time.Time
	revokeAt  time.Time // a revocation's rebalance timeout; zero when none is pending
}

// consumerState is a consumer-protocol group's membership and assignment. A group holds one
// while it is a consumer group (group.cg), nil while it is classic.
type consumerState struct {
	epoch, assignmentEpoch int32
	members                map[string]*cmember
	order                  []string          // member ids in join order
	static                 map[string]string // instance id → member id
	target                 map[string]pset   // member id → target assignment (assignmentEpoch)
	owners                 map[tpid]string   // partition → the member owning it
	// subscribed is what the target assignment was computed over: subscribed topic name →
	// id and partition count. A change bumps the group epoch.
	subscribed map[string]assignTopic
	// regexTopics caches each subscribed regular expression's matching topic names, as of
	// regexAt (refreshed every Config.RegexRefresh, and when a new expression arrives).
	regexTopics map[string][]string
	regexAt     time.Time
	regexGen    uint64 // bumped at each resolution of regexTopics
	assignor    string // the assignor of the current target assignment
}

func newConsumerState() *consumerState {
	return &consumerState{
		members:     map[string]*cmember{},
		static:      map[string]string{},
		target:      map[string]pset{},
		owners:      map[tpid]string{},
		subscribed:  map[string]assignTopic{},
		regexTopics: map[string][]string{},
	}
}

// ConsumerState is a consumer group's state as ListGroups and ConsumerGroupDescribe name it.
func (cs *consumerState) stateName() string {
	switch {
	case len(cs.members) == 0:
		return "Empty"
	case cs.epoch > cs.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range cs.members {
		if m.state != memberStable || m.epoch != cs.assignmentEpoch {
			return "Reconciling"
		}
	}
	return "Stable"
}

// cgHeartbeat is one ConsumerGroupHeartbeat, decoded and validated (api_consumer.go).
type cgHeartbeat struct {
	memberID             string
	epoch                int32
	instanceID, rackID   *string
	rebalanceTimeout     int32    // -1: unchanged
	names                []string // nil: unchanged
	regex                *string  // nil: unchanged
	assignor             *string  // nil: unchanged
	owned                pset     // nil: unchanged (not sent)
	unresolvedOwned      bool     // owned named a topic id we do not know
	clientID, clientHost string
	mayDescribe          func(topic string) bool // Client.MayDescribeTopic
	full                 bool                    // every non-optional field set: the answer carries the assignment
}

type cgResult struct {
	code       int16
	message    string
	memberID   string
	epoch      int32
	interval   time.Duration
	assignment pset // nil: not sent (unchanged)
}

func cgError(code int16, msg string) cgResult { return cgResult{code: code, message: msg} }

// handleConsumerHeartbeat is Apache's consumerGroupHeartbeat: join (epoch 0), heartbeat, or
// leave (-1, or -2 for a static member).
func (g *group) handleConsumerHeartbeat(a cgHeartbeat) cgResult {
	if code := g.fenceCheck(); code != 0 {
		return cgError(code, "")
	}
	if a.epoch < 0 {
		return g.consumerLeave(a)
	}
	if res, ok := g.consumerGroupFor(a); !ok {
		return res
	}
	cs := g.cg
	epoch := cs.epoch
	m, res, ok := g.consumerMemberFor(a)
	if !ok {
		return res
	}
	before := m.assigned
	changed := g.updateConsumerMember(m, a)
	now := g.now()
	m.sessionAt = now.Add(g.c.cfg.ConsumerSessionTimeout)
	// One bump for whatever this heartbeat changed (a new member, its subscription, the
	// subscribed topics).
	if refreshed := g.refreshSubscriptions(now); (refreshed || changed) && cs.epoch == epoch {
		g.bumpConsumerEpoch()
	}
	g.maybeAssign()
	owned := a.owned
	if a.epoch == 0 {
		owned = pset{} // a joining member owns nothing (validated)
	}
	g.reconcile(m, owned)
	res = cgResult{memberID: m.id, epoch: m.epoch, interval: g.c.cfg.ConsumerHeartbeatInterval}
	if a.epoch == 0 || a.full || a.unresolvedOwned || !before.equal(m.assigned) {
		res.assignment = m.assigned
	}
	g.c.log.V(1).Info("Consumer heartbeat", "group", g.id, "member", m.id, "epoch", m.epoch, "groupEpoch", cs.epoch,
		"state", m.state.String(), "assigned", len(m.assigned), "revoking", len(m.revoking))
	return res
}

// consumerGroupFor makes sure the group is a consumer group a member may join or heartbeat
// to: an empty classic group is converted by a join; any other classic group is
// GROUP_ID_NOT_FOUND ("not a consumer group"; Apache's answer under the migration policy
// "disabled", docs/groups.md "Classic and consumer groups").
func (g *group) consumerGroupFor(a cgHeartbeat) (cgResult, bool) {
	switch {
	case g.cg != nil && (g.exists() || a.epoch == 0):
	case g.cg != nil:
		return cgError(kerr.GroupIDNotFound.Code, "Group "+g.id+" does not exist."), false
	case a.epoch != 0 && !g.exists():
		return cgError(kerr.GroupIDNotFound.Code, "Group "+g.id+" does not exist."), false
	case a.epoch != 0, len(g.members) > 0 || len(g.pending) > 0:
		return cgError(kerr.GroupIDNotFound.Code, "Group "+g.id+" is not a consumer group."), false
	default:
		if !g.exists() {
			if code := g.ensureStore(); code != 0 {
				return cgError(code, ""), false
			}
		}
		if code := g.convert(true); code != 0 {
			return cgError(code, ""), false
		}
	}
	if !g.exists() {
		g.create()
	}
	return cgResult{}, true
}

// convert turns an empty group into a consumer group (toConsumer) or back into a classic one,
// durably: the next coordinator loads it as what it is. It answers the error code of a storage
// failure, or 0.
func (g *group) convert(toConsumer bool) int16 {
	if g.st != nil {
		if err := g.st.append(groupTypePayload(toConsumer)); err != nil {
			g.fail(err)
			return errorCode(err)
		}
	}
	if toConsumer {
		g.becomeConsumer()
		g.c.log.V(1).Info("Group converted to the consumer protocol", "group", g.id)
	} else {
		g.dropConsumer()
		g.c.log.V(1).Info("Group converted to the classic protocol", "group", g.id)
	}
	return 0
}

// becomeConsumer makes the (empty, classic) group a consumer group in memory: it leaves the
// classic state gauge; publish counts it by its consumer state.
func (g *group) becomeConsumer() {
	g.c.m.groupState(g.state, -1)
	g.cg = newConsumerState()
	g.protocolType = "consumer"
}

// dropConsumer makes an empty consumer group classic again in memory (a classic join, or
// DeleteGroups).
func (g *group) dropConsumer() {
	g.c.m.consumerGroupState(g.pubConsumer, "")
	g.pubConsumer = ""
	g.cg = nil
	g.c.m.groupState(-1, g.state)
}

// consumerMemberFor finds (or, for a join, creates) the heartbeat's member, with Apache's
// member and epoch checks.
func (g *group) consumerMemberFor(a cgHeartbeat) (*cmember, cgResult, bool) {
	cs := g.cg
	if a.epoch == 0 {
		return g.consumerJoin(a)
	}
	m := cs.members[a.memberID]
	if m == nil {
		return nil, cgError(kerr.UnknownMemberID.Code, "Member "+a.memberID+" is not a member of group "+g.id+"."), false
	}
	if a.instanceID != nil {
		switch cur, ok := cs.static[*a.instanceID]; {
		case !ok:
			return nil, cgError(kerr.UnknownMemberID.Code, "Instance id "+*a.instanceID+" is unknown."), false
		case cur != a.memberID:
			return nil, cgError(kerr.FencedInstanceID.Code, "Instance id "+*a.instanceID+" belongs to another member."), false
		}
	}
	// Apache's throwIfMemberEpochIsInvalid: a newer epoch than ours is fenced; an older one is
	// accepted only if it is the previous epoch and the member owns a subset of what it has
	// now (its answer with the new epoch was lost).
	if a.epoch > m.epoch || a.epoch < m.epoch && (a.epoch != m.previousEpoch || a.owned == nil || len(a.owned.minus(m.assigned)) > 0) {
		return nil, cgError(kerr.FencedMemberEpoch.Code, "The consumer group member has a smaller member epoch than expected."), false
	}
	return m, cgResult{}, true
}

// consumerJoin is a heartbeat with epoch 0: a new member, a known member rejoining (it
// abandoned what it owned), or a static member's new incarnation taking its instance's place.
func (g *group) consumerJoin(a cgHeartbeat) (*cmember, cgResult, bool) {
	cs := g.cg
	id := a.memberID
	if id == "" { // v0: the coordinator names the member
		id = uuid.NewString()
	}
	if a.instanceID != nil {
		if oldID, ok := cs.static[*a.instanceID]; ok && oldID != id {
			old := cs.members[oldID]
			if old.epoch != leftStaticEpoch {
				return nil, cgError(kerr.UnreleasedInstanceID.Code, "Static member "+oldID+" with instance id "+*a.instanceID+" is still in the group."), false
			}
			return g.replaceStaticConsumer(old, id), cgResult{}, true
		}
	}
	if m := cs.members[id]; m != nil {
		if m.epoch == leftStaticEpoch { // the same incarnation comes back
			m.epoch = m.leftEpoch
		}
		return m, cgResult{}, true
	}
	if len(cs.members) >= g.c.cfg.ConsumerMaxSize {
		return nil, cgError(kerr.GroupMaxSizeReached.Code, "The consumer group has reached its maximum capacity."), false
	}
	m := &cmember{id: id, assigned: pset{}, revoking: pset{}}
	if a.instanceID != nil {
		m.instanceID = strp(*a.instanceID)
		cs.static[*a.instanceID] = id
	}
	if len(cs.members) == 0 {
		g.recordEmptySince(0)
	}
	cs.members[id] = m
	cs.order = append(cs.order, id)
	g.c.m.membersDelta(1)
	g.bumpConsumerEpoch()
	return m, cgResult{}, true
}

// replaceStaticConsumer gives a static member that left (-2) a new member id: it keeps its
// epoch and its partitions, so its instance resumes without a rebalance.
func (g *group) replaceStaticConsumer(old *cmember, newID string) *cmember {
	cs := g.cg
	delete(cs.members, old.id)
	if t, ok := cs.target[old.id]; ok {
		delete(cs.target, old.id)
		cs.target[newID] = t
	}
	for p, owner := range cs.owners {
		if owner == old.id {
			cs.owners[p] = newID
		}
	}
	for i, id := range cs.order {
		if id == old.id {
			cs.order[i] = newID
		}
	}
	old.id, old.epoch = newID, old.leftEpoch
	cs.members[newID] = old
	cs.static[*old.instanceID] = newID
	g.c.log.V(1).Info("Static member replaced", "group", g.id, "instance", *old.instanceID, "member", newID)
	return old
}

// updateConsumerMember applies what the heartbeat says of the member and reports whether its
// subscription changed (which bumps the group epoch).
func (g *group) updateConsumerMember(m *cmember, a cgHeartbeat) bool {
	m.clientID, m.clientHost, m.mayDescribe = a.clientID, a.clientHost, a.mayDescribe
	if a.rackID != nil {
		m.rackID = strp(*a.rackID)
	}
	if a.rebalanceTimeout >= 0 {
		m.rebalanceTimeout = ms(a.rebalanceTimeout)
	}
	changed := false
	if a.names != nil {
		names := slices.Clone(a.names)
		slices.Sort(names)
		names = slices.Compact(names)
		changed = !slices.Equal(names, m.names)
		m.names = names
	}
	if a.regex != nil && *a.regex != m.regex {
		m.regex, changed = *a.regex, true
		if _, ok := g.cg.regexTopics[m.regex]; m.regex != "" && !ok {
			g.cg.regexAt = time.Time{} // resolve the new expression now
		}
	}
	if a.assignor != nil && *a.assignor != m.assignor {
		m.assignor, changed = *a.assignor, true
	}
	return changed
}

// consumerLeave is a heartbeat with epoch -1 (leave) or -2 (a static member leaving for now).
func (g *group) consumerLeave(a cgHeartbeat) cgResult {
	cs := g.cg
	if cs == nil || !g.exists() {
		return cgError(kerr.GroupIDNotFound.Code, "Group "+g.id+" is not a consumer group.")
	}
	var m *cmember
	if a.instanceID != nil {
		id, ok := cs.static[*a.instanceID]
		if !ok {
			return cgError(kerr.UnknownMemberID.Code, "Instance id "+*a.instanceID+" is unknown.")
		}
		if id != a.memberID {
			return cgError(kerr.FencedInstanceID.Code, "Instance id "+*a.instanceID+" belongs to another member.")
		}
		m = cs.members[id]
	} else if m = cs.members[a.memberID]; m == nil {
		return cgError(kerr.UnknownMemberID.Code, "Member "+a.memberID+" is not a member of group "+g.id+".")
	}
	res := cgResult{memberID: m.id, epoch: a.epoch, interval: g.c.cfg.ConsumerHeartbeatInterval}
	if a.epoch == leftStaticEpoch {
		if m.epoch != leftStaticEpoch {
			m.leftEpoch, m.epoch = m.epoch, leftStaticEpoch
		}
		g.c.log.V(1).Info("Static member left for now", "group", g.id, "member", m.id, "instance", *m.instanceID)
		return res
	}
	g.removeConsumer(m, "left")
	return res
}

// removeConsumer drops a member (it left, its session expired, or it did not revoke within its
// rebalance timeout): its partitions are free for their next owners at once.
func (g *group) removeConsumer(m *cmember, why string) {
	cs := g.cg
	for p := range m.assigned {
		delete(cs.owners, p)
	}
	for p := range m.revoking {
		delete(cs.owners, p)
	}
	delete(cs.members, m.id)
	delete(cs.target, m.id)
	if m.instanceID != nil && cs.static[*m.instanceID] == m.id {
		delete(cs.static, *m.instanceID)
	}
	if i := slices.Index(cs.order, m.id); i >= 0 {
		cs.order = slices.Delete(cs.order, i, i+1)
	}
	g.c.m.membersDelta(-1)
	g.c.log.V(1).Info("Consumer member removed", "group", g.id, "member", m.id, "why", why)
	g.bumpConsumerEpoch()
	if len(cs.members) == 0 {
		g.emptySince = g.now()
		g.recordEmptySince(g.emptySince.UnixMilli())
	}
	g.maybeAssign()
}

func (g *group) bumpConsumerEpoch() { g.cg.epoch++ }

// refreshSubscriptions re-reads the subscribed topics (and, every RegexRefresh, the regular
// expressions' matches and what each member may DESCRIBE of them) and reports whether they
// changed since the target assignment was computed: a topic created, deleted, re-created or
// grown, or a member's expression resolving to other topics for it.
func (g *group) refreshSubscriptions(now time.Time) bool {
	cs := g.cg
	if now.Sub(cs.regexAt) >= g.c.cfg.RegexRefresh || cs.regexAt.After(now) {
		g.resolveRegexes()
		cs.regexAt = now
	}
	if g.filterRegexMatches() {
		return true
	}
	cur := g.subscribedTopics()
	if len(cur) != len(cs.subscribed) {
		return true
	}
	for name, t := range cur {
		if cs.subscribed[name] != t {
			return true
		}
	}
	return false
}

// resolveRegexes matches every member's regular expression against the topics (RE2, the
// whole name, as Apache 4.0 does).
func (g *group) resolveRegexes() {
	cs := g.cg
	res := map[string][]string{}
	var names []string
	for _, m := range cs.members {
		if m.regex == "" {
			continue
		}
		if _, done := res[m.regex]; done {
			continue
		}
		re, err := compileSubscription(m.regex)
		if err != nil {
			res[m.regex] = nil // validated when it arrived; cannot happen
			continue
		}
		if names == nil {
			names = g.c.cfg.Topics.TopicNames()
		}
		var match []string
		for _, n := range names {
			if re.MatchString(n) {
				match = append(match, n)
			}
		}
		res[m.regex] = match
	}
	cs.regexTopics = res
	cs.regexGen++
}

// filterRegexMatches resolves each member's expression for it: the group's matches it may
// DESCRIBE (Apache 4.0 resolves a group's expression with the principal of the heartbeat
// that triggered the resolution; each member's own principal is stricter: a member never
// gets a topic it may not describe because another member may). Only a member whose
// expression or the group's matches changed since its last resolution is looked at, so an
// ACL change takes effect at the next RegexRefresh. It reports whether any member's
// resolution changed.
func (g *group) filterRegexMatches() bool {
	cs := g.cg
	changed := false
	for _, m := range cs.members {
		if m.regex == "" {
			m.regexMatch, m.regexFor = nil, ""
			continue
		}
		if m.regexFor == m.regex && m.regexGen == cs.regexGen {
			continue
		}
		match := cs.regexTopics[m.regex]
		if m.mayDescribe != nil {
			match = slices.DeleteFunc(slices.Clone(match), func(t string) bool { return !m.mayDescribe(t) })
		}
		changed = changed || !slices.Equal(match, m.regexMatch)
		m.regexMatch, m.regexFor, m.regexGen = match, m.regex, cs.regexGen
	}
	return changed
}

// compileSubscription compiles a subscribed regular expression to match whole topic names.
func compileSubscription(expr string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + expr + `)$`)
}

// memberTopics is the topic names m subscribes to: its names and its expression's matches
// that it may DESCRIBE (filterRegexMatches).
func (g *group) memberTopics(m *cmember) []string {
	if m.regex == "" || m.regexFor != m.regex {
		return m.names
	}
	return append(slices.Clone(m.names), m.regexMatch...)
}

// subscribedTopics is every topic some member subscribes to that exists with an id.
func (g *group) subscribedTopics() map[string]assignTopic {
	out := map[string]assignTopic{}
	for _, m := range g.cg.members {
		for _, name := range g.memberTopics(m) {
			if _, done := out[name]; done {
				continue
			}
			if id, n, ok := g.c.cfg.Topics.Topic(name); ok && id != ([16]byte{}) && n > 0 {
				out[name] = assignTopic{id: id, name: name, partitions: n}
			}
		}
	}
	return out
}

// maybeAssign computes the target assignment for the group epoch when it is behind:
// Apache's updateTargetAssignment, with the assignor most members ask for (ties and none: the
// first configured).
func (g *group) maybeAssign() {
	cs := g.cg
	if cs.epoch <= cs.assignmentEpoch {
		return
	}
	cs.subscribed = g.subscribedTopics()
	topics := make([]assignTopic, 0, len(cs.subscribed))
	for _, t := range cs.subscribed {
		topics = append(topics, t)
	}
	slices.SortFunc(topics, func(a, b assignTopic) int { return cmp.Compare(a.name, b.name) })
	members := make([]assignMember, 0, len(cs.order))
	for _, id := range cs.order {
		m := cs.members[id]
		am := assignMember{id: id, key: id, subscribed: map[[16]byte]bool{}, current: cs.target[id]}
		if m.instanceID != nil {
			am.key = *m.instanceID
		}
		for _, name := range g.memberTopics(m) {
			if t, ok := cs.subscribed[name]; ok {
				am.subscribed[t.id] = true
			}
		}
		members = append(members, am)
	}
	a := g.preferredAssignor()
	cs.target = a.assign(members, topics)
	cs.assignor = a.name
	cs.assignmentEpoch = cs.epoch
	g.c.log.V(1).Info("Target assignment computed", "group", g.id, "epoch", cs.epoch, "assignor", a.name,
		"members", len(members), "topics", len(topics))
}

func (g *group) preferredAssignor() *assignor {
	votes := map[string]int{}
	for _, m := range g.cg.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best := g.c.cfg.ConsumerAssignors[0]
	for _, name := range g.c.cfg.ConsumerAssignors {
		if votes[name] > votes[best] {
			best = name
		}
	}
	return assignorByName(best)
}

// reconcile moves a member towards its target assignment (Apache's CurrentAssignmentBuilder).
// owned is what the member says it owns (nil: it did not say).
func (g *group) reconcile(m *cmember, owned pset) {
	cs := g.cg
	if m.epoch == leftStaticEpoch {
		return
	}
	switch m.state {
	case memberStable:
		if m.epoch == cs.assignmentEpoch {
			return
		}
	case memberUnrevoked:
		if owned == nil || len(owned.and(m.revoking)) > 0 {
			return // still owns partitions it must give up
		}
		for p := range m.revoking {
			delete(cs.owners, p)
		}
		m.revoking, m.revokeAt = pset{}, time.Time{}
	case memberUnreleased:
	}
	g.nextAssignment(m)
}

// nextAssignment is CurrentAssignmentBuilder.computeNextAssignment: keep what the target
// keeps; if something must be revoked, stay at the epoch and revoke it first; otherwise take
// the assignment epoch and every partition of the target nobody else owns.
func (g *group) nextAssignment(m *cmember) {
	cs := g.cg
	target := cs.target[m.id]
	if target == nil {
		target = pset{}
	}
	kept := m.assigned.and(target)
	if revoke := m.assigned.minus(target); len(revoke) > 0 {
		m.assigned = kept
		for p := range revoke {
			m.revoking[p] = struct{}{}
		}
		m.state = memberUnrevoked
		m.revokeAt = g.now().Add(m.rebalanceTimeout)
		return
	}
	held := false
	for p := range target.minus(kept) {
		if owner, ok := cs.owners[p]; ok && owner != m.id {
			held = true
			continue
		}
		cs.owners[p] = m.id
		kept[p] = struct{}{}
	}
	m.assigned = kept
	m.state, m.revokeAt = memberStable, time.Time{}
	if held {
		m.state = memberUnreleased
	}
	if m.epoch != cs.assignmentEpoch {
		m.previousEpoch, m.epoch = m.epoch, cs.assignmentEpoch
	}
}

// ---- deadlines ----

// consumerDeadlines offers each member's session expiry and revocation timeout to consider.
func (g *group) consumerDeadlines(consider func(time.Time, func())) {
	if g.cg == nil {
		return
	}
	for _, id := range g.cg.order {
		m := g.cg.members[id]
		consider(m.sessionAt, func() { g.removeConsumer(m, "session timeout") })
		consider(m.revokeAt, func() { g.removeConsumer(m, "rebalance timeout: partitions not revoked") })
	}
}

// ---- ConsumerGroupDescribe ----

type cgDescribeMember struct {
	id, clientID, clientHost string
	instanceID, rackID       *string
	epoch                    int32
	names                    []string
	regex                    *string
	assigned, target         pset
}

type cgDescribeResult struct {
	code                   int16
	message                string
	state                  string
	epoch, assignmentEpoch int32
	assignor               string
	members                []cgDescribeMember
}

// handleConsumerDescribe is Apache's consumerGroupDescribe: a group that is not a consumer
// group (or does not exist) is GROUP_ID_NOT_FOUND.
func (g *group) handleConsumerDescribe() cgDescribeResult {
	cs := g.cg
	if cs == nil || !g.exists() {
		return cgDescribeResult{code: kerr.GroupIDNotFound.Code, message: "Group " + g.id + " is not a consumer group."}
	}
	res := cgDescribeResult{state: cs.stateName(), epoch: cs.epoch, assignmentEpoch: cs.assignmentEpoch, assignor: cs.assignor}
	if res.assignor == "" {
		res.assignor = g.c.cfg.ConsumerAssignors[0]
	}
	for _, id := range cs.order {
		m := cs.members[id]
		dm := cgDescribeMember{id: m.id, clientID: m.clientID, clientHost: m.clientHost, instanceID: m.instanceID, rackID: m.rackID,
			epoch: m.epoch, names: m.names, assigned: m.assigned, target: cs.target[id]}
		if m.regex != "" {
			dm.regex = strp(m.regex)
		}
		res.members = append(res.members, dm)
	}
	return res
}

// ---- offsets ----

// validateConsumerCommit is Apache 4.0's ConsumerGroup.validateOffsetCommit: with no members, a
// commit without an epoch (an admin client's, or a consumer's without group management) is
// accepted; otherwise the member must exist, commit with OffsetCommit v9 or later, and give
// its current member epoch (STALE_MEMBER_EPOCH otherwise).
func (g *group) validateConsumerCommit(memberID string, epoch int32, version int16) int16 {
	cs := g.cg
	if epoch < 0 && len(cs.members) == 0 {
		return 0
	}
	m := cs.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case version < 9:
		return kerr.UnsupportedVersion.Code
	case epoch != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// validateConsumerFetch is Apache 4.0's ConsumerGroup.validateOffsetFetch: a fetch naming no
// member and no epoch is an admin client's; a member's must give its current epoch.
func (g *group) validateConsumerFetch(memberID *string, epoch int32) int16 {
	if memberID == nil && epoch < 0 {
		return 0
	}
	var m *cmember
	if memberID != nil {
		m = g.cg.members[*memberID]
	}
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case epoch != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// consumerSubscribes reports whether a member subscribes to topic, by name or expression (for
// OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC and offset expiry).
func (g *group) consumerSubscribes(topic string) bool {
	for _, m := range g.cg.members {
		if _, ok := slices.BinarySearch(m.names, topic); ok {
			return true
		}
		if m.regex != "" {
			if re, err := compileSubscription(m.regex); err == nil && re.MatchString(topic) {
				return true
			}
		}
	}
	return false
}
