package assignment

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/balance"
	"github.com/paddock-dev/paddock/internal/kafkaconfig"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// The rules the assignment reconciler decides by, apart from placement (internal/balance).
// They are pure — plain inputs, no client — and each is pinned by a table test in
// rules_test.go.

// conflicts maps each live topic that is not served because an older one claims its Kafka
// name (or a colliding one) to that older topic (topicname.Conflicts).
func conflicts(live []*kafkav1alpha1.KafkaTopic) map[string]string {
	claims := make([]topicname.Claim, len(live))
	for i, kt := range live {
		claims[i] = topicname.Claim{Object: kt.Name, Name: kt.KafkaName(), Created: kt.CreationTimestamp.Time}
	}
	return topicname.Conflicts(claims)
}

// alive is the alive set of the registry rows: Alive health, with the row epoch as the
// incarnation the restart rule compares.
func alive(rows []kafkav1alpha1.BrokerRow) []balance.Broker {
	var out []balance.Broker
	for _, row := range rows {
		if row.Health == kafkav1alpha1.BrokerAlive {
			out = append(out, balance.Broker{ID: row.ID, Incarnation: row.Epoch})
		}
	}
	return out
}

// balanceTopic is the balancer's view of a served topic: spec.partitions partitions, and its
// stored assignment as the current one. Stored entries the balancer would refuse (an index out
// of range or repeated, a negative epoch or a leader below -1: a hand-edited status) are
// dropped or clamped, so one bad status cannot stop every topic's assignment; a dropped
// partition is placed anew at epoch 1.
func balanceTopic(kt *kafkav1alpha1.KafkaTopic) balance.Topic {
	t := balance.Topic{Key: kt.Name, Partitions: kt.Spec.Partitions}
	seen := map[int32]bool{}
	for _, p := range kt.Status.Partitions {
		if p.Partition < 0 || p.Partition >= t.Partitions || seen[p.Partition] || p.LeaderEpoch < 0 {
			continue
		}
		seen[p.Partition] = true
		t.Current = append(t.Current, balance.Partition{
			Index: p.Partition, Leader: max(p.Leader, -1), Epoch: p.LeaderEpoch, Incarnation: p.LeaderIncarnation,
		})
	}
	return t
}

// partitionStatuses is the stored form of a decided assignment.
func partitionStatuses(a balance.Assignment) []kafkav1alpha1.PartitionStatus {
	out := make([]kafkav1alpha1.PartitionStatus, len(a.Partitions))
	for i, p := range a.Partitions {
		out[i] = kafkav1alpha1.PartitionStatus{Partition: p.Index, Leader: p.Leader, LeaderEpoch: p.Epoch, LeaderIncarnation: p.Incarnation}
	}
	return out
}

// unassigned is kt's stored assignment with every leader removed: each partition below
// spec.partitions keeps its epoch, so epochs never go down, and gets leader -1 (rows outside
// the count name no partition and go; the CRD refuses them anyway). A deleted topic, or one
// that lost its name to an older topic, is written this way; brokers then stop serving it.
func unassigned(kt *kafkav1alpha1.KafkaTopic) []kafkav1alpha1.PartitionStatus {
	n := max(kt.Spec.Partitions, 0)
	out := make([]kafkav1alpha1.PartitionStatus, n)
	for i := range out {
		out[i] = kafkav1alpha1.PartitionStatus{Partition: int32(i), Leader: -1}
	}
	for _, p := range kt.Status.Partitions {
		if p.Partition >= 0 && p.Partition < n {
			out[p.Partition].LeaderEpoch = max(out[p.Partition].LeaderEpoch, p.LeaderEpoch)
		}
	}
	return out
}

// topicFacts is what a topic's conditions are computed from.
type topicFacts struct {
	Generation int64
	// ClusterFound is false when spec.cluster names no live KafkaCluster.
	ClusterFound bool
	// Deleting is true once the topic has a deletionTimestamp.
	Deleting bool
	// YieldsTo is the older KafkaTopic whose Kafka name this one's collides with; "" when
	// the topic is served.
	YieldsTo, YieldsToName string
	// ConfigProblems are the spec.config entries that are not applied (topicConfigProblems).
	ConfigProblems []kafkaconfig.Problem
	// Alive is the number of alive brokers.
	Alive int
	// Leaderless is the number of partitions whose leader is not alive.
	Leaderless, Partitions int
	// Offline are the partitions whose storage failed on every alive broker.
	Offline []int32
}

// topicConfigProblems are the entries of a topic's spec.config (topic) that are not applied
// in a cluster whose spec.config is cluster (nil without a cluster): each entry that fails
// its own check, then the rules between keys on the effective values — a
// min.compaction.lag.ms above max.compaction.lag.ms, which the brokers refuse with
// INVALID_CONFIG and resolve to the default lags. The same rules as CreateTopics and the
// AlterConfigs APIs.
func topicConfigProblems(topic, cluster map[string]string) []kafkaconfig.Problem {
	return append(kafkaconfig.CheckTopicConfig(topic), kafkaconfig.TopicConflicts(topic, cluster)...)
}

// readyCondition is True when every partition has an alive leader.
func readyCondition(f topicFacts) metav1.Condition {
	c := metav1.Condition{Type: kafkav1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: f.Generation}
	switch {
	case f.Deleting:
		c.Reason, c.Message = kafkav1alpha1.ReasonDeleting, "the topic is being deleted and no longer served"
	case !f.ClusterFound:
		c.Reason, c.Message = kafkav1alpha1.ReasonClusterNotFound, "spec.cluster names no KafkaCluster in this namespace"
	case f.YieldsTo != "":
		c.Reason, c.Message = kafkav1alpha1.ReasonTopicNameConflict, fmt.Sprintf("KafkaTopic %s serves Kafka topic %s", f.YieldsTo, f.YieldsToName)
	case f.Alive == 0:
		c.Reason, c.Message = kafkav1alpha1.ReasonNoAliveBrokers, "no broker is alive; the partition leaders are kept as they were"
	case f.Leaderless > 0:
		c.Reason, c.Message = kafkav1alpha1.ReasonLeadersNotAlive, fmt.Sprintf("%d of %d partitions have no alive leader", f.Leaderless, f.Partitions)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, kafkav1alpha1.ReasonLeadersAlive
		c.Message = fmt.Sprintf("all %d partitions have an alive leader", f.Partitions)
	}
	return c
}

// degradedCondition is True when the topic cannot be served as asked and a human must act.
func degradedCondition(f topicFacts) metav1.Condition {
	c := metav1.Condition{Type: kafkav1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, ObservedGeneration: f.Generation}
	switch {
	case f.Deleting:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, kafkav1alpha1.ReasonDeleting, "the topic is being deleted"
	case !f.ClusterFound:
		c.Reason, c.Message = kafkav1alpha1.ReasonClusterNotFound, "spec.cluster names no KafkaCluster in this namespace"
	case f.YieldsTo != "":
		c.Reason = kafkav1alpha1.ReasonTopicNameConflict
		c.Message = fmt.Sprintf("the older KafkaTopic %s already claims Kafka topic %s (names differing only in '.' and '_' collide); this one is not served", f.YieldsTo, f.YieldsToName)
	case len(f.ConfigProblems) > 0:
		c.Reason = kafkav1alpha1.ReasonInvalidConfig
		c.Message = "not applied: " + kafkaconfig.Summary(f.ConfigProblems)
	case f.Alive == 0:
		c.Reason, c.Message = kafkav1alpha1.ReasonNoAliveBrokers, "no broker is alive; the partition leaders are kept as they were"
	case len(f.Offline) > 0:
		c.Reason = kafkav1alpha1.ReasonPartitionsFailed
		c.Message = fmt.Sprintf("the storage of partitions %v failed on every alive broker; they stay offline until a broker forgets a failure (10 minutes) or another broker joins", f.Offline)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected, "nothing is wrong"
	}
	return c
}

// failures are the failed partitions the registry rows announce, as the balancer takes them:
// by served topic (the topic whose status.topicID the announcement names), so a failure of a
// deleted or re-created topic changes nothing.
func failures(rows []kafkav1alpha1.BrokerRow, served []*kafkav1alpha1.KafkaTopic) []balance.Failure {
	byID := map[string]string{}
	for _, kt := range served {
		if kt.Status.TopicID != "" {
			byID[kt.Status.TopicID] = kt.Name
		}
	}
	var out []balance.Failure
	for _, row := range rows {
		for _, f := range row.FailedPartitions {
			if key, ok := byID[f.TopicID]; ok {
				out = append(out, balance.Failure{Topic: key, Index: f.Partition, Broker: row.ID, Epoch: f.Epoch, Failures: f.Failures})
			}
		}
	}
	return out
}

// uncleanableByTopic is what the registry rows announce of compacted partitions their
// brokers cannot clean, by served topic (the topic whose status.topicID an entry names) and
// sorted by partition: one entry a partition — its leader's when the leader announces it
// (after a move the old leader's announcement may linger for a beat), else the lowest
// broker's — and only partitions the topic has.
func uncleanableByTopic(rows []kafkav1alpha1.BrokerRow, served []*kafkav1alpha1.KafkaTopic) map[string][]kafkav1alpha1.UncleanablePartitionStatus {
	byID := map[string]*kafkav1alpha1.KafkaTopic{}
	for _, kt := range served {
		if kt.Status.TopicID != "" {
			byID[kt.Status.TopicID] = kt
		}
	}
	out := map[string][]kafkav1alpha1.UncleanablePartitionStatus{}
	for _, row := range rows {
		for _, u := range row.UncleanablePartitions {
			kt, ok := byID[u.TopicID]
			if !ok || u.Partition >= kt.Spec.Partitions {
				continue
			}
			e := kafkav1alpha1.UncleanablePartitionStatus{Partition: u.Partition, Broker: row.ID, Cause: u.Cause}
			list := out[kt.Name]
			i := slices.IndexFunc(list, func(v kafkav1alpha1.UncleanablePartitionStatus) bool { return v.Partition == u.Partition })
			switch {
			case i < 0:
				out[kt.Name] = append(list, e)
			case leaderOf(kt, u.Partition) == row.ID || leaderOf(kt, u.Partition) != list[i].Broker && row.ID < list[i].Broker:
				list[i] = e
			}
		}
	}
	for _, list := range out {
		slices.SortFunc(list, func(a, b kafkav1alpha1.UncleanablePartitionStatus) int { return int(a.Partition) - int(b.Partition) })
	}
	return out
}

// leaderOf is the leader kt's status names for partition p, or -1.
func leaderOf(kt *kafkav1alpha1.KafkaTopic, p int32) int32 {
	for _, ps := range kt.Status.Partitions {
		if ps.Partition == p {
			return ps.Leader
		}
	}
	return -1
}

// newlyUncleanable is the entries of now whose partition was not in before: each gets one
// Warning Event, so a partition that stays uncleanable is reported once.
func newlyUncleanable(before, now []kafkav1alpha1.UncleanablePartitionStatus) []kafkav1alpha1.UncleanablePartitionStatus {
	var out []kafkav1alpha1.UncleanablePartitionStatus
	for _, u := range now {
		if !slices.ContainsFunc(before, func(b kafkav1alpha1.UncleanablePartitionStatus) bool { return b.Partition == u.Partition }) {
			out = append(out, u)
		}
	}
	return out
}

// uncleanableMessage is the PartitionUncleanable Event's message: where, why, and what fixes it.
func uncleanableMessage(u kafkav1alpha1.UncleanablePartitionStatus) string {
	const still = "the partition still serves, but its uncleaned section grows until a pass succeeds (retried every 10 minutes)"
	switch u.Cause {
	case kafkav1alpha1.CauseOffsetMapTooSmall:
		return fmt.Sprintf("partition %d cannot be compacted on broker %d: one of its batches has more keys than the cleaner's offset map holds; "+
			"raise log.cleaner.dedupe.buffer.size in the KafkaCluster's spec.config; %s", u.Partition, u.Broker, still)
	case kafkav1alpha1.CauseCorruptBatch:
		return fmt.Sprintf("partition %d cannot be compacted on broker %d: a stored batch's records do not decode (the broker's log names its offset); %s",
			u.Partition, u.Broker, still)
	}
	return fmt.Sprintf("partition %d cannot be compacted on broker %d: its cleaning pass failed (the broker's log says why); %s", u.Partition, u.Broker, still)
}

// offlineOf is the partitions of topic key among offline.
func offlineOf(offline []balance.PartitionRef, key string) []int32 {
	var out []int32
	for _, p := range offline {
		if p.Topic == key {
			out = append(out, p.Partition)
		}
	}
	return out
}

// failureMessage is the Event message of one failed partition's new epoch.
func failureMessage(m balance.Move) string {
	if m.From == m.To {
		return fmt.Sprintf("partition %d failed on broker %d; taken over again there at epoch %d (its first failure there)", m.Partition, m.From, m.Epoch)
	}
	if m.From < 0 {
		return fmt.Sprintf("partition %d failed; given to broker %d at epoch %d", m.Partition, m.To, m.Epoch)
	}
	return fmt.Sprintf("partition %d failed on broker %d again; moved to broker %d at epoch %d", m.Partition, m.From, m.To, m.Epoch)
}

// leaderless counts the partitions whose leader is not in the alive set.
func leaderless(parts []kafkav1alpha1.PartitionStatus, aliveSet []balance.Broker) int {
	n := 0
	for _, p := range parts {
		if !slices.ContainsFunc(aliveSet, func(b balance.Broker) bool { return b.ID == p.Leader }) {
			n++
		}
	}
	return n
}

// setConditions sets the topic's Ready and Degraded conditions from f.
func setConditions(st *kafkav1alpha1.KafkaTopicStatus, f topicFacts) {
	meta.SetStatusCondition(&st.Conditions, readyCondition(f))
	meta.SetStatusCondition(&st.Conditions, degradedCondition(f))
}

// coordinatorBrokers are the registered and alive ids of the rows, sorted, with the alive
// brokers' incarnations (row epochs) in the same order.
func coordinatorBrokers(rows []kafkav1alpha1.BrokerRow) kafkav1alpha1.CoordinatorBrokers {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b kafkav1alpha1.BrokerRow) int { return cmp.Compare(a.ID, b.ID) })
	var cb kafkav1alpha1.CoordinatorBrokers
	for _, row := range rows {
		cb.Registered = append(cb.Registered, row.ID)
		if row.Health == kafkav1alpha1.BrokerAlive {
			cb.Alive = append(cb.Alive, row.ID)
			cb.AliveEpochs = append(cb.AliveEpochs, row.Epoch)
		}
	}
	return cb
}

// nextCoordinatorEpoch is the coordinator epoch for the brokers the rows give: the stored
// epoch when the stored sets and incarnations are the same, else one more (docs/coordinator.md,
// "The coordinator epoch": bumped, never lowered, whenever the registered or alive set changes).
// No sets stored counts as empty sets, so a cluster gets epoch 1 when its first broker
// registers.
//
// An alive broker whose incarnation changed — it restarted (kill -9, a container restart)
// before the registry declared it dead — bumps the epoch too, as a restarted leader keeps its
// partitions at the next leader epoch (leaderIncarnation): the group fences still hold the
// epoch its old process claimed them at, which the new process may not claim again
// (docs/groups.md, "Takeover"), so without a bump its groups would answer NOT_COORDINATOR
// until some other change.
func nextCoordinatorEpoch(epoch int64, stored *kafkav1alpha1.CoordinatorBrokers, rows []kafkav1alpha1.BrokerRow) (int64, *kafkav1alpha1.CoordinatorBrokers) {
	now := coordinatorBrokers(rows)
	var before kafkav1alpha1.CoordinatorBrokers
	if stored != nil {
		before = *stored
	}
	if slices.Equal(before.Registered, now.Registered) && slices.Equal(before.Alive, now.Alive) &&
		!restarted(before, now) {
		return epoch, stored
	}
	return epoch + 1, &now
}

// restarted reports whether an alive broker of both sets runs another incarnation now.
// Stored sets without incarnations (written before they were recorded) count as restarted:
// one extra bump after an upgrade, which is always safe.
func restarted(before, now kafkav1alpha1.CoordinatorBrokers) bool {
	if len(before.AliveEpochs) != len(before.Alive) {
		return true
	}
	for i, id := range now.Alive {
		if j := slices.Index(before.Alive, id); j >= 0 && before.AliveEpochs[j] != now.AliveEpochs[i] {
			return true
		}
	}
	return false
}

// movesMessage is the note of the Event recorded for a topic's leader changes: how many
// changed, and the first few, each with its reason.
func movesMessage(moves []balance.Move) string {
	const listed = 8
	parts := make([]string, 0, min(len(moves), listed))
	for _, m := range moves[:min(len(moves), listed)] {
		parts = append(parts, fmt.Sprintf("%d: %s→%d epoch %d (%s)", m.Partition, leaderName(m.From), m.To, m.Epoch, m.Reason))
	}
	msg := fmt.Sprintf("%d partition(s) got a new leader or epoch: %s", len(moves), strings.Join(parts, ", "))
	if len(moves) > listed {
		msg += fmt.Sprintf(" and %d more", len(moves)-listed)
	}
	return msg
}

func leaderName(id int32) string {
	if id < 0 {
		return "none"
	}
	return fmt.Sprint(id)
}

// byName orders topics by object name, so every reconcile walks them in the same order.
func byName(a, b *kafkav1alpha1.KafkaTopic) int { return cmp.Compare(a.Name, b.Name) }
