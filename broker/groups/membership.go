package groups

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The classic group protocol's membership rules, after Apache 3.7's GroupCoordinator and
// GroupMetadata (docs/groups.md "State machine"). Function names follow
// Apache's where a rule lives in one of its functions, so the two can be read side by side.
// Everything here runs on the group's goroutine.

type protocol struct {
	name     string
	metadata []byte
}

type member struct {
	id               string
	instanceID       *string // group.instance.id of a static member
	clientID         string
	clientHost       string
	rebalanceTimeout time.Duration
	sessionTimeout   time.Duration
	protocolType     string
	protocols        []protocol
	assignment       []byte
	joinW            *waiter[joinResult] // a JoinGroup waiting for the rebalance
	syncW            *waiter[syncResult] // a SyncGroup waiting for the leader's assignment
	// isNew: joined in the rebalance in progress; it expires after NewMemberJoinTimeout even
	// while waiting (it has no member id to heartbeat with yet).
	isNew bool
	// deadline is when the member expires unless it heartbeats (or is waiting in a join or
	// sync, which counts as alive); zero when none is scheduled.
	deadline time.Time
}

func (m *member) metadata(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// matches: same protocols, in the same order, with the same metadata.
func (m *member) matches(ps []protocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].name != m.protocols[i].name || !bytes.Equal(ps[i].metadata, m.protocols[i].metadata) {
			return false
		}
	}
	return true
}

type joinArgs struct {
	memberID             string
	instanceID           *string
	clientID, clientHost string
	sessionTimeout       time.Duration
	rebalanceTimeout     time.Duration
	protocolType         string
	protocols            []protocol
	requireKnownMemberID bool // v4+ without an instance id: KIP-394
	supportSkipping      bool // v9+: SkipAssignment
}

type joinMember struct {
	id         string
	instanceID *string
	metadata   []byte
}

type joinResult struct {
	code           int16
	memberID       string
	generation     int32
	protocolType   *string
	protocol       *string
	leader         string
	skipAssignment bool
	members        []joinMember // the leader's only
}

func joinError(memberID string, code int16) joinResult {
	return joinResult{code: code, memberID: memberID, generation: -1}
}

type syncArgs struct {
	generation   int32
	memberID     string
	instanceID   *string
	protocolType *string
	protocol     *string
	assignments  map[string][]byte
}

type syncResult struct {
	code         int16
	protocolType *string
	protocol     *string
	assignment   []byte
}

type heartbeatArgs struct {
	generation int32
	memberID   string
	instanceID *string
}

type leaveMember struct {
	memberID   string
	instanceID *string
}

type leaveResult struct {
	code    int16
	members []int16 // per requested member, in request order
}

func strp(s string) *string { return &s }

// ---- JoinGroup ----

func (g *group) handleJoin(a joinArgs, w *waiter[joinResult]) {
	cfg := g.c.cfg
	if code := g.fenceCheck(); code != 0 {
		w.send(joinError(a.memberID, code))
		return
	}
	if a.sessionTimeout < cfg.MinSessionTimeout || a.sessionTimeout > cfg.MaxSessionTimeout {
		w.send(joinError(a.memberID, kerr.InvalidSessionTimeout.Code))
		return
	}
	if g.cg != nil {
		// A consumer group: a classic join converts it back only while it is empty
		// (docs/groups.md "Classic and consumer groups").
		if len(g.cg.members) > 0 {
			w.send(joinError(a.memberID, kerr.InconsistentGroupProtocol.Code))
			return
		}
		if code := g.convert(false); code != 0 {
			w.send(joinError(a.memberID, code))
			return
		}
	}
	unknown := a.memberID == ""
	// Only a join without member id creates a group.
	if !g.exists() {
		if !unknown {
			w.send(joinError(a.memberID, kerr.UnknownMemberID.Code))
			return
		}
		if code := g.ensureStore(); code != 0 {
			w.send(joinError(a.memberID, code))
			return
		}
		g.create()
	}
	switch {
	case !g.acceptJoiningMember(a.memberID):
		g.remove(a.memberID)
		w.send(joinError("", kerr.GroupMaxSizeReached.Code))
	case unknown:
		g.doNewMemberJoin(a, w)
	default:
		g.doCurrentMemberJoin(a, w)
	}
	if g.state == StatePreparingRebalance {
		g.maybeCompleteJoin()
	}
}

// acceptJoiningMember is group.max.size: while preparing, count the members already waiting
// (so a lowered limit kicks the last rejoiners); otherwise count members.
func (g *group) acceptJoiningMember(memberID string) bool {
	max := g.c.cfg.MaxGroupSize
	switch g.state {
	case StateEmpty, StateDead:
		return true
	case StatePreparingRebalance:
		m := g.members[memberID]
		return (m != nil && m.joinW != nil) || g.numAwaiting < max
	default:
		return g.members[memberID] != nil || len(g.members) < max
	}
}

func (g *group) doNewMemberJoin(a joinArgs, w *waiter[joinResult]) {
	if !g.supportsProtocols(a.protocolType, a.protocols) {
		w.send(joinError("", kerr.InconsistentGroupProtocol.Code))
		return
	}
	prefix := a.clientID
	if a.instanceID != nil {
		prefix = *a.instanceID
	}
	newID := prefix + "-" + uuid.NewString()
	if a.instanceID != nil {
		if old, ok := g.static[*a.instanceID]; ok {
			g.updateStaticMemberAndRebalance(old, newID, a, w)
		} else {
			g.addMemberAndRebalance(a, newID, w)
		}
		return
	}
	if a.requireKnownMemberID {
		// KIP-394: hand out the id and wait (session timeout) for the member to rejoin with it.
		g.pending[newID] = g.now().Add(a.sessionTimeout)
		w.send(joinError(newID, kerr.MemberIDRequired.Code))
		return
	}
	g.addMemberAndRebalance(a, newID, w)
}

func (g *group) doCurrentMemberJoin(a joinArgs, w *waiter[joinResult]) {
	if !g.supportsProtocols(a.protocolType, a.protocols) {
		w.send(joinError(a.memberID, kerr.InconsistentGroupProtocol.Code))
		return
	}
	if _, ok := g.pending[a.memberID]; ok {
		if a.instanceID != nil {
			// Pending ids are only handed to dynamic members; Apache throws here.
			w.send(joinError(a.memberID, kerr.UnknownServerError.Code))
			return
		}
		g.addMemberAndRebalance(a, a.memberID, w)
		return
	}
	if code := g.validateCurrentMember(a.memberID, a.instanceID); code != 0 {
		w.send(joinError(a.memberID, code))
		return
	}
	m := g.members[a.memberID]
	switch g.state {
	case StatePreparingRebalance:
		g.updateMemberAndRebalance(m, a, w)
	case StateCompletingRebalance:
		if m.matches(a.protocols) {
			// The member lost our answer; give it the current generation again.
			res := g.currentJoinResult(m.id, false)
			if m.id != g.leader {
				res.members = nil
			}
			w.send(res)
		} else {
			g.updateMemberAndRebalance(m, a, w)
		}
	case StateStable:
		if m.id == g.leader || !m.matches(a.protocols) {
			// A leader's join forces a rebalance (it saw a metadata change); so does new
			// member metadata.
			g.updateMemberAndRebalance(m, a, w)
		} else {
			res := g.currentJoinResult(m.id, false)
			res.members = nil
			w.send(res)
		}
	default:
		w.send(joinError(a.memberID, kerr.UnknownMemberID.Code))
	}
}

// currentJoinResult is this generation's JoinGroup answer for memberID (with the member list,
// which callers drop for followers).
func (g *group) currentJoinResult(memberID string, skip bool) joinResult {
	return joinResult{
		memberID:       memberID,
		generation:     g.generation,
		protocolType:   g.protocolTypeOpt(),
		protocol:       g.protocolOpt(),
		leader:         g.leader,
		skipAssignment: skip,
		members:        g.currentMemberMetadata(),
	}
}

func (g *group) protocolTypeOpt() *string {
	if g.protocolType == "" {
		return nil
	}
	return strp(g.protocolType)
}

func (g *group) protocolOpt() *string {
	if g.protocol == "" {
		return nil
	}
	return strp(g.protocol)
}

// validateCurrentMember: an instance id must map to this member id (else FENCED_INSTANCE_ID,
// or UNKNOWN_MEMBER_ID for an unknown instance), and the member must exist.
func (g *group) validateCurrentMember(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if cur != memberID {
			return kerr.FencedInstanceID.Code
		}
	}
	if g.members[memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

func (g *group) addMemberAndRebalance(a joinArgs, id string, w *waiter[joinResult]) {
	m := &member{
		id:               id,
		instanceID:       a.instanceID,
		clientID:         a.clientID,
		clientHost:       a.clientHost,
		rebalanceTimeout: a.rebalanceTimeout,
		sessionTimeout:   a.sessionTimeout,
		protocolType:     a.protocolType,
		protocols:        a.protocols,
		isNew:            true,
	}
	// New members extend the initial delay only in generation 0 (Apache's newMemberAdded).
	if g.state == StatePreparingRebalance && g.generation == 0 {
		g.newMemberAdded = true
	}
	g.add(m, w)
	// A new member cannot heartbeat until it has its member id, and a client that gave up on
	// its JoinGroup would otherwise leave a defunct member; so its join expires.
	g.scheduleExpiry(m, g.c.cfg.NewMemberJoinTimeout)
	g.maybePrepareRebalance()
}

// updateStaticMemberAndRebalance: a known group.instance.id joined with an unknown member id
// (KIP-345). The old member id is fenced and replaced. In a Stable group whose selected
// protocol would not change there is no rebalance: the member gets the current generation
// (v9+: the leader is told so and to skip assignment; older versions get the old leader id,
// so a replaced leader does not assign for a Stable group).
func (g *group) updateStaticMemberAndRebalance(oldID, newID string, a joinArgs, w *waiter[joinResult]) {
	currentLeader := g.leader
	m := g.replaceStaticMember(*a.instanceID, oldID, newID)
	g.scheduleExpiry(m, m.sessionTimeout)
	g.updateMember(m, a.protocols, a.rebalanceTimeout, a.sessionTimeout, w)
	switch g.state {
	case StateStable:
		if g.selectProtocol() != g.protocol {
			g.maybePrepareRebalance()
			return
		}
		if a.supportSkipping {
			isLeader := g.leader == newID
			res := g.currentJoinResult(newID, isLeader)
			if !isLeader {
				res.members = nil
			}
			g.invokeJoin(m, res)
		} else {
			res := g.currentJoinResult(newID, false)
			res.members, res.leader = nil, currentLeader
			g.invokeJoin(m, res)
		}
	case StateCompletingRebalance:
		// The leader may already assign for the old member id; start over.
		g.prepareRebalance()
	case StatePreparingRebalance:
		// It simply waits with the others.
	}
}

func (g *group) updateMemberAndRebalance(m *member, a joinArgs, w *waiter[joinResult]) {
	g.updateMember(m, a.protocols, a.rebalanceTimeout, a.sessionTimeout, w)
	g.maybePrepareRebalance()
}

func (g *group) maybePrepareRebalance() {
	switch g.state {
	case StateStable, StateCompletingRebalance, StateEmpty:
		g.prepareRebalance()
	}
}

func (g *group) prepareRebalance() {
	if g.state == StateCompletingRebalance {
		g.resetAndPropagateAssignmentError(kerr.RebalanceInProgress.Code)
	}
	g.clearPendingSync()
	rt := g.rebalanceTimeout()
	if g.state == StateEmpty {
		// InitialDelayedJoin: wait for more members before the first generation.
		d := g.c.cfg.InitialRebalanceDelay
		g.joinInitial, g.joinDelay, g.joinRemaining = true, d, max(rt-d, 0)
		g.joinDeadline = g.now().Add(d)
	} else {
		g.joinInitial = false
		g.joinDeadline = g.now().Add(rt)
	}
	g.transition(StatePreparingRebalance)
	g.c.log.V(1).Info("Preparing to rebalance", "group", g.id, "generation", g.generation, "members", len(g.members))
	g.maybeCompleteJoin()
}

// maybeCompleteJoin is DelayedJoin.tryComplete: the join phase ends at once when every
// member (and no pending one) has rejoined — except during the initial delay, which always
// runs its course.
func (g *group) maybeCompleteJoin() {
	if g.state == StatePreparingRebalance && !g.joinInitial && g.hasAllMembersJoined() {
		g.onCompleteJoin()
	}
}

func (g *group) hasAllMembersJoined() bool {
	return len(g.members) == g.numAwaiting && len(g.pending) == 0
}

// onJoinDeadline: the rebalance timeout (or a step of the initial delay) passed.
func (g *group) onJoinDeadline() {
	if g.joinInitial && g.newMemberAdded && g.joinRemaining != 0 {
		g.newMemberAdded = false
		delay := min(g.c.cfg.InitialRebalanceDelay, g.joinRemaining)
		// Apache subtracts the step just finished, not the next one.
		g.joinRemaining = max(g.joinRemaining-g.joinDelay, 0)
		g.joinDelay = delay
		g.joinDeadline = g.now().Add(delay)
		return
	}
	g.onCompleteJoin()
}

func (g *group) onCompleteJoin() {
	g.joinDeadline, g.joinInitial = time.Time{}, false
	// Dynamic members that did not rejoin are dropped; static ones keep their place.
	for _, id := range append([]string(nil), g.order...) {
		if m := g.members[id]; m.joinW == nil && m.instanceID == nil {
			g.remove(id)
		}
	}
	if !g.maybeElectNewJoinedLeader() && len(g.members) > 0 {
		// Nobody rejoined (only static members that have not come back): wait another
		// rebalance timeout while their sessions expire.
		g.joinDeadline = g.now().Add(g.rebalanceTimeout())
		return
	}
	g.initNextGeneration()
	if g.state == StateEmpty {
		return
	}
	for _, id := range g.order {
		m := g.members[id]
		res := g.currentJoinResult(m.id, false)
		if m.id != g.leader {
			res.members = nil
		}
		g.invokeJoin(m, res)
		g.scheduleExpiry(m, m.sessionTimeout)
		m.isNew = false
		g.pendingSync[m.id] = struct{}{}
	}
	// DelayedSync: members that do not sync within the rebalance timeout are removed.
	g.syncDeadline, g.syncGeneration = g.now().Add(g.rebalanceTimeout()), g.generation
}

func (g *group) maybeElectNewJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if g.members[g.leader].joinW != nil {
		return true
	}
	for _, id := range g.order {
		if g.members[id].joinW != nil {
			g.leader = id
			return true
		}
	}
	return false
}

func (g *group) initNextGeneration() {
	g.generation++
	if len(g.members) > 0 {
		g.protocol = g.selectProtocol()
		g.computeSubscribedTopics()
		g.transition(StateCompletingRebalance)
	} else {
		g.protocol = ""
		g.computeSubscribedTopics()
		g.transition(StateEmpty)
	}
	g.clearPendingSync()
}

// ---- SyncGroup ----

func (g *group) handleSync(a syncArgs, w *waiter[syncResult]) {
	if code := g.fenceCheck(); code != 0 {
		w.send(syncResult{code: code})
		return
	}
	if !g.exists() {
		w.send(syncResult{code: kerr.UnknownMemberID.Code})
		return
	}
	if code := g.validateSync(a); code != 0 {
		w.send(syncResult{code: code})
		return
	}
	m := g.members[a.memberID]
	switch g.state {
	case StateEmpty:
		w.send(syncResult{code: kerr.UnknownMemberID.Code})
	case StatePreparingRebalance:
		w.send(syncResult{code: kerr.RebalanceInProgress.Code})
	case StateCompletingRebalance:
		if m.syncW != nil {
			// A retry replaces the earlier SyncGroup (Apache leaves that one unanswered).
			m.syncW.send(syncResult{code: kerr.RebalanceInProgress.Code})
		}
		m.syncW = w
		g.removePendingSync(m.id)
		if m.id == g.leader {
			g.c.log.V(1).Info("Assignment received from the leader", "group", g.id, "generation", g.generation, "members", len(g.members))
			// Members the leader left out get an empty assignment.
			assignment := make(map[string][]byte, len(g.members))
			for _, id := range g.order {
				assignment[id] = a.assignments[id]
			}
			g.setAndPropagateAssignment(assignment)
			g.transition(StateStable)
			g.c.m.rebalanceCompleted()
		}
	case StateStable:
		g.removePendingSync(m.id)
		w.send(syncResult{protocolType: g.protocolTypeOpt(), protocol: g.protocolOpt(), assignment: m.assignment})
		g.scheduleExpiry(m, m.sessionTimeout)
	}
}

func (g *group) validateSync(a syncArgs) int16 {
	if code := g.validateCurrentMember(a.memberID, a.instanceID); code != 0 {
		return code
	}
	if a.generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	if a.protocolType != nil && (g.protocolType == "" || *a.protocolType != g.protocolType) {
		return kerr.InconsistentGroupProtocol.Code
	}
	if a.protocol != nil && (g.protocol == "" || *a.protocol != g.protocol) {
		return kerr.InconsistentGroupProtocol.Code
	}
	return 0
}

func (g *group) setAndPropagateAssignment(assignment map[string][]byte) {
	for _, id := range g.order {
		g.members[id].assignment = assignment[id]
	}
	g.propagateAssignment(0)
}

func (g *group) resetAndPropagateAssignmentError(code int16) {
	for _, id := range g.order {
		g.members[id].assignment = nil
	}
	g.propagateAssignment(code)
}

func (g *group) propagateAssignment(code int16) {
	for _, id := range g.order {
		m := g.members[id]
		res := syncResult{code: code, assignment: m.assignment}
		if code == 0 {
			res.protocolType, res.protocol = g.protocolTypeOpt(), g.protocolOpt()
		}
		if g.invokeSync(m, res) {
			// The member's session restarts when it gets its answer: it could not heartbeat
			// usefully while it waited.
			g.scheduleExpiry(m, m.sessionTimeout)
		}
	}
}

func (g *group) removePendingSync(id string) {
	delete(g.pendingSync, id)
	if len(g.pendingSync) == 0 {
		g.syncDeadline = time.Time{}
	}
}

func (g *group) clearPendingSync() {
	clear(g.pendingSync)
	if g.pendingSync == nil {
		g.pendingSync = map[string]struct{}{}
	}
	g.syncDeadline = time.Time{}
}

func (g *group) onSyncDeadline() {
	g.syncDeadline = time.Time{}
	if g.syncGeneration != g.generation {
		return
	}
	switch g.state {
	case StateCompletingRebalance, StateStable:
		if len(g.pendingSync) == 0 {
			return
		}
		for _, id := range append([]string(nil), g.order...) {
			if _, ok := g.pendingSync[id]; ok {
				g.remove(id)
			}
		}
		g.c.log.V(1).Info("Members did not sync in time; rebalancing", "group", g.id, "generation", g.generation)
		g.prepareRebalance()
	}
}

// ---- Heartbeat ----

func (g *group) handleHeartbeat(a heartbeatArgs) int16 {
	if !g.exists() {
		return kerr.UnknownMemberID.Code
	}
	if code := g.validateCurrentMember(a.memberID, a.instanceID); code != 0 {
		return code
	}
	if a.generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m := g.members[a.memberID]
	switch g.state {
	case StateCompletingRebalance, StateStable:
		g.scheduleExpiry(m, m.sessionTimeout)
		return 0
	case StatePreparingRebalance:
		g.scheduleExpiry(m, m.sessionTimeout)
		return kerr.RebalanceInProgress.Code
	default:
		return kerr.UnknownMemberID.Code
	}
}

// scheduleExpiry is Apache's completeAndScheduleNextExpiration: the member proved alive; it
// expires timeout from now — unless it is waiting in a JoinGroup or SyncGroup (and not new),
// which keeps it alive until it is answered.
func (g *group) scheduleExpiry(m *member, timeout time.Duration) {
	if !m.isNew && (m.joinW != nil || m.syncW != nil) {
		m.deadline = time.Time{}
		return
	}
	m.deadline = g.now().Add(timeout)
}

func (g *group) onMemberDeadline(m *member) {
	m.deadline = time.Time{}
	if m.isNew || (m.joinW == nil && m.syncW == nil) {
		g.c.log.V(1).Info("Member session expired", "group", g.id, "member", m.id)
		g.removeMemberAndUpdateGroup(m)
	}
}

func (g *group) onPendingDeadline(id string) {
	if _, ok := g.pending[id]; ok {
		g.removePendingMemberAndUpdateGroup(id)
	}
}

// ---- LeaveGroup ----

func (g *group) handleLeave(ms []leaveMember) leaveResult {
	res := leaveResult{members: make([]int16, len(ms))}
	if !g.exists() {
		for i := range res.members {
			res.members[i] = kerr.UnknownMemberID.Code
		}
		return res
	}
	for i, lm := range ms {
		switch {
		case lm.memberID == "":
			// Administrative removal of a static member by instance id.
			var cur string
			ok := false
			if lm.instanceID != nil {
				cur, ok = g.static[*lm.instanceID]
			}
			if !ok {
				res.members[i] = kerr.UnknownMemberID.Code
				continue
			}
			g.removeMemberAndUpdateGroup(g.members[cur])
		case g.isPending(lm.memberID):
			g.removePendingMemberAndUpdateGroup(lm.memberID)
		default:
			if code := g.validateCurrentMember(lm.memberID, lm.instanceID); code != 0 {
				res.members[i] = code
				continue
			}
			g.removeMemberAndUpdateGroup(g.members[lm.memberID])
		}
	}
	return res
}

func (g *group) isPending(id string) bool { _, ok := g.pending[id]; return ok }

func (g *group) removeMemberAndUpdateGroup(m *member) {
	// A new member may time out while its join waits; it learns UNKNOWN_MEMBER_ID and
	// retries if it is still there.
	g.invokeJoin(m, joinError("", kerr.UnknownMemberID.Code))
	g.remove(m.id)
	switch g.state {
	case StateStable, StateCompletingRebalance:
		g.maybePrepareRebalance()
	case StatePreparingRebalance:
		g.maybeCompleteJoin()
	}
}

func (g *group) removePendingMemberAndUpdateGroup(id string) {
	g.remove(id)
	if g.state == StatePreparingRebalance {
		g.maybeCompleteJoin()
	}
}

// ---- the member table (GroupMetadata) ----

func (g *group) add(m *member, w *waiter[joinResult]) {
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.members[m.id] = m
	g.order = append(g.order, m.id)
	g.incSupported(m)
	m.joinW = w
	if w != nil {
		g.numAwaiting++
	}
	delete(g.pending, m.id)
	g.c.m.membersDelta(1)
}

// remove drops a member (or pending member) with no further consequence; callers decide
// whether that rebalances. A waiting JoinGroup or SyncGroup of the member is answered
// UNKNOWN_MEMBER_ID (Apache leaves such a request unanswered; answering it is what a retry
// would get).
func (g *group) remove(id string) {
	if m, ok := g.members[id]; ok {
		g.decSupported(m)
		if m.joinW != nil {
			g.numAwaiting--
			m.joinW.send(joinError("", kerr.UnknownMemberID.Code))
			m.joinW = nil
		}
		if m.syncW != nil {
			m.syncW.send(syncResult{code: kerr.UnknownMemberID.Code})
			m.syncW = nil
		}
		if m.instanceID != nil {
			delete(g.static, *m.instanceID)
		}
		delete(g.members, id)
		for i, o := range g.order {
			if o == id {
				g.order = append(g.order[:i], g.order[i+1:]...)
				break
			}
		}
		g.c.m.membersDelta(-1)
	}
	if g.leader == id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
	delete(g.pending, id)
	delete(g.pendingSync, id)
}

func (g *group) replaceStaticMember(instanceID, oldID, newID string) *member {
	m := g.members[oldID]
	// Fence a duplicate of the old member that waits in a join or sync.
	g.invokeJoin(m, joinError(oldID, kerr.FencedInstanceID.Code))
	g.invokeSync(m, syncResult{code: kerr.FencedInstanceID.Code})
	delete(g.members, oldID)
	m.id = newID
	g.members[newID] = m
	for i, o := range g.order {
		if o == oldID {
			g.order[i] = newID
		}
	}
	if g.leader == oldID {
		g.leader = newID
	}
	g.static[instanceID] = newID
	return m
}

func (g *group) updateMember(m *member, ps []protocol, rebalanceTimeout, sessionTimeout time.Duration, w *waiter[joinResult]) {
	g.decSupported(m)
	m.protocols = ps
	g.incSupported(m)
	m.rebalanceTimeout, m.sessionTimeout = rebalanceTimeout, sessionTimeout
	switch {
	case w != nil && m.joinW == nil:
		g.numAwaiting++
	case w == nil && m.joinW != nil:
		g.numAwaiting--
	case w != nil && m.joinW != nil:
		// A retried JoinGroup replaces the earlier one (Apache leaves that one unanswered).
		m.joinW.send(joinError(m.id, kerr.RebalanceInProgress.Code))
	}
	m.joinW = w
}

func (g *group) invokeJoin(m *member, res joinResult) {
	if m.joinW == nil {
		return
	}
	m.joinW.send(res)
	m.joinW = nil
	g.numAwaiting--
}

func (g *group) invokeSync(m *member, res syncResult) bool {
	if m.syncW == nil {
		return false
	}
	m.syncW.send(res)
	m.syncW = nil
	return true
}

func (g *group) incSupported(m *member) {
	for _, p := range m.protocols {
		g.supported[p.name]++
	}
}

func (g *group) decSupported(m *member) {
	for _, p := range m.protocols {
		g.supported[p.name]--
	}
}

// supportsProtocols: a member may join an Empty group with any non-empty protocol type and at
// least one protocol; otherwise its type must be the group's and one of its protocols must be
// supported by every current member.
func (g *group) supportsProtocols(protocolType string, ps []protocol) bool {
	if g.state == StateEmpty {
		return protocolType != "" && len(ps) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range ps {
		if g.supported[p.name] == len(g.members) {
			return true
		}
	}
	return false
}

// selectProtocol: each member votes for the first protocol of its list that every member
// supports; most votes wins. Apache breaks ties by hash-map order; we break them by the
// order in which members (in join order) first voted for them.
func (g *group) selectProtocol() string {
	votes := map[string]int{}
	var first []string
	for _, id := range g.order {
		m := g.members[id]
		for _, p := range m.protocols {
			if g.supported[p.name] == len(g.members) {
				if votes[p.name] == 0 {
					first = append(first, p.name)
				}
				votes[p.name]++
				break
			}
		}
	}
	best := ""
	for _, name := range first {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

func (g *group) currentMemberMetadata() []joinMember {
	out := make([]joinMember, 0, len(g.order))
	for _, id := range g.order {
		m := g.members[id]
		out = append(out, joinMember{id: m.id, instanceID: m.instanceID, metadata: m.metadata(g.protocol)})
	}
	return out
}

// computeSubscribedTopics: for a "consumer" group, the union of the topics its members
// subscribe to, read from the subscription's version-0 prefix as Apache does. If any member's
// metadata does not parse, the group counts as subscribed to everything.
func (g *group) computeSubscribedTopics() {
	g.subscribed, g.subscribedKnown = nil, false
	if g.protocolType != "consumer" {
		return
	}
	if len(g.members) == 0 {
		g.subscribedKnown = true
		return
	}
	if g.protocol == "" {
		return
	}
	set := map[string]struct{}{}
	for _, m := range g.members {
		topics, ok := parseSubscriptionTopics(m.metadata(g.protocol))
		if !ok {
			return
		}
		for _, t := range topics {
			set[t] = struct{}{}
		}
	}
	g.subscribed, g.subscribedKnown = set, true
}

func (g *group) isSubscribedToTopic(topic string) bool {
	if g.cg != nil {
		return g.consumerSubscribes(topic)
	}
	if !g.subscribedKnown {
		return true
	}
	_, ok := g.subscribed[topic]
	return ok
}

// parseSubscriptionTopics reads ConsumerProtocolSubscription's version-0 prefix: int16
// version (≥ 0), topics as an int32-counted array of int16-length strings, then the nullable
// user data. Later fields (owned partitions, rack, generation) are ignored.
func parseSubscriptionTopics(b []byte) ([]string, bool) {
	if len(b) < 6 || int16(binary.BigEndian.Uint16(b)) < 0 {
		return nil, false
	}
	n := int32(binary.BigEndian.Uint32(b[2:]))
	b = b[6:]
	if n < 0 || int(n) > len(b)/2 {
		return nil, false
	}
	topics := make([]string, 0, n)
	for range n {
		if len(b) < 2 {
			return nil, false
		}
		l := int16(binary.BigEndian.Uint16(b))
		b = b[2:]
		if l < 0 || int(l) > len(b) {
			return nil, false
		}
		topics = append(topics, string(b[:l]))
		b = b[l:]
	}
	if len(b) < 4 {
		return nil, false
	}
	if ul := int32(binary.BigEndian.Uint32(b)); ul > 0 && int(ul) > len(b)-4 {
		return nil, false
	}
	return topics, true
}
