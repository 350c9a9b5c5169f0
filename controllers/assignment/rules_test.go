package assignment

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/balance"
	"github.com/paddock-dev/paddock/internal/kafkaconfig"
)

func rows(healths ...kafkav1alpha1.BrokerHealth) []kafkav1alpha1.BrokerRow {
	out := make([]kafkav1alpha1.BrokerRow, len(healths))
	for i, h := range healths {
		out[i] = kafkav1alpha1.BrokerRow{ID: int32(i), Health: h, Epoch: 1}
	}
	return out
}

func TestTheCoordinatorEpochGrowsWheneverTheRegisteredOrAliveSetChanges(t *testing.T) {
	const A, D, X = kafkav1alpha1.BrokerAlive, kafkav1alpha1.BrokerDead, kafkav1alpha1.BrokerDraining
	epoch, sets := int64(0), (*kafkav1alpha1.CoordinatorBrokers)(nil)
	for _, step := range []struct {
		what string
		rows []kafkav1alpha1.BrokerRow
		want int64
	}{
		{"no broker yet: nothing to fence", nil, 0},
		{"the first brokers register", rows(A, A, A), 1},
		{"the same sets again", rows(A, A, A), 1},
		{"a row's address changes nothing", func() []kafkav1alpha1.BrokerRow { r := rows(A, A, A); r[1].Host = "x"; return r }(), 1},
		{"one dies", rows(A, D, A), 2},
		{"dead turning draining keeps the alive set", rows(A, X, A), 2},
		{"a broker that is not alive restarting changes nothing", func() []kafkav1alpha1.BrokerRow { r := rows(A, X, A); r[1].Epoch = 5; return r }(), 2},
		{"it comes back", rows(A, A, A), 3},
		{"one is deregistered", rows(A, A), 4},
		{"all gone", nil, 5},
	} {
		epoch, sets = nextCoordinatorEpoch(epoch, sets, step.rows)
		if epoch != step.want {
			t.Fatalf("%s: epoch %d, want %d", step.what, epoch, step.want)
		}
	}
}

// TestTheCoordinatorEpochGrowsWhenAnAliveBrokerRestarts: a broker killed and restarted
// before it is declared dead keeps both sets, but its new incarnation (row epoch) bumps the
// coordinator epoch, as its partitions move to the next leader epoch; the same incarnation
// again does not.
func TestTheCoordinatorEpochGrowsWhenAnAliveBrokerRestarts(t *testing.T) {
	const A = kafkav1alpha1.BrokerAlive
	epoch, sets := nextCoordinatorEpoch(0, nil, rows(A, A, A))
	restartedRows := rows(A, A, A)
	restartedRows[2].Epoch = 2
	epoch, sets = nextCoordinatorEpoch(epoch, sets, restartedRows)
	if epoch != 2 {
		t.Fatalf("after broker 2 restarted: epoch %d, want 2", epoch)
	}
	if want := []int64{1, 1, 2}; !slices.Equal(sets.AliveEpochs, want) {
		t.Fatalf("stored incarnations %v, want %v", sets.AliveEpochs, want)
	}
	if again, _ := nextCoordinatorEpoch(epoch, sets, restartedRows); again != 2 {
		t.Fatalf("the same incarnation again: epoch %d, want 2", again)
	}
	legacy := &kafkav1alpha1.CoordinatorBrokers{Registered: []int32{0, 1, 2}, Alive: []int32{0, 1, 2}}
	if e, _ := nextCoordinatorEpoch(7, legacy, rows(A, A, A)); e != 8 {
		t.Fatalf("sets stored without incarnations: epoch %d, want one bump to 8", e)
	}
}

func TestAnUnassignedTopicKeepsEveryEpochAndLeadsNothing(t *testing.T) {
	kt := &kafkav1alpha1.KafkaTopic{Spec: kafkav1alpha1.KafkaTopicSpec{Partitions: 3}, Status: kafkav1alpha1.KafkaTopicStatus{
		Partitions: []kafkav1alpha1.PartitionStatus{{Partition: 0, Leader: 1, LeaderEpoch: 4, LeaderIncarnation: 2}, {Partition: 3, Leader: 2, LeaderEpoch: 7}},
	}}
	got := unassigned(kt)
	// Partition 3 is no partition of a 3-partition topic: it goes.
	want := []kafkav1alpha1.PartitionStatus{{Partition: 0, Leader: -1, LeaderEpoch: 4}, {Partition: 1, Leader: -1}, {Partition: 2, Leader: -1}}
	if len(got) != len(want) {
		t.Fatalf("unassigned = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("partition %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestAHandEditedStatusCannotStopTheAssignment(t *testing.T) {
	kt := &kafkav1alpha1.KafkaTopic{Spec: kafkav1alpha1.KafkaTopicSpec{Partitions: 2}, Status: kafkav1alpha1.KafkaTopicStatus{
		Partitions: []kafkav1alpha1.PartitionStatus{
			{Partition: 0, Leader: 1, LeaderEpoch: 3}, {Partition: 0, Leader: 2, LeaderEpoch: 9}, // repeated
			{Partition: 5, Leader: 1}, {Partition: -1}, // out of range
			{Partition: 1, Leader: -7, LeaderEpoch: 2}, // leader below -1
		},
	}}
	kt.Name = "t"
	in := balance.Input{Topics: []balance.Topic{balanceTopic(kt)}, Alive: []balance.Broker{{ID: 1}, {ID: 2}}}
	res, err := balance.Assign(in)
	if err != nil {
		t.Fatalf("Assign refused the cleaned-up input: %v", err)
	}
	a, _ := res.Topic("t")
	if a.Partitions[0].Epoch != 3 || a.Partitions[1].Epoch != 3 {
		t.Errorf("partitions %+v: want partition 0 kept at epoch 3 (the first entry) and partition 1 placed at epoch 3", a.Partitions)
	}
}

func TestTopicConditions(t *testing.T) {
	bad := kafkaconfig.CheckTopicConfig(map[string]string{"cleanup.policy": "shred"})
	for _, tt := range []struct {
		rule                  string
		f                     topicFacts
		ready, readyReason    string
		degraded, degradedWhy string
		messageMentions       string
	}{
		{"every partition led by an alive broker is ready", topicFacts{ClusterFound: true, Alive: 3, Partitions: 6},
			"True", kafkav1alpha1.ReasonLeadersAlive, "False", kafkav1alpha1.ReasonAsExpected, "6 partitions"},
		{"partitions without an alive leader are not ready", topicFacts{ClusterFound: true, Alive: 3, Partitions: 6, Leaderless: 2},
			"False", kafkav1alpha1.ReasonLeadersNotAlive, "False", kafkav1alpha1.ReasonAsExpected, "2 of 6"},
		{"no alive broker: not ready and degraded", topicFacts{ClusterFound: true, Partitions: 6, Leaderless: 6},
			"False", kafkav1alpha1.ReasonNoAliveBrokers, "True", kafkav1alpha1.ReasonNoAliveBrokers, "kept"},
		{"an invalid config is degraded, the topic still served", topicFacts{ClusterFound: true, Alive: 1, Partitions: 1, ConfigProblems: bad},
			"True", kafkav1alpha1.ReasonLeadersAlive, "True", kafkav1alpha1.ReasonInvalidConfig, "cleanup policy"},
		{"a younger topic with a colliding name is not served", topicFacts{ClusterFound: true, Alive: 1, YieldsTo: "a-b", YieldsToName: "a.b"},
			"False", kafkav1alpha1.ReasonTopicNameConflict, "True", kafkav1alpha1.ReasonTopicNameConflict, "a-b"},
		{"a topic of no cluster", topicFacts{},
			"False", kafkav1alpha1.ReasonClusterNotFound, "True", kafkav1alpha1.ReasonClusterNotFound, "no KafkaCluster"},
		{"a deleted topic", topicFacts{ClusterFound: true, Deleting: true},
			"False", kafkav1alpha1.ReasonDeleting, "False", kafkav1alpha1.ReasonDeleting, "deleted"},
	} {
		t.Run(tt.rule, func(t *testing.T) {
			tt.f.Generation = 4
			r, d := readyCondition(tt.f), degradedCondition(tt.f)
			if string(r.Status) != tt.ready || r.Reason != tt.readyReason || string(d.Status) != tt.degraded || d.Reason != tt.degradedWhy {
				t.Fatalf("Ready %s/%s, Degraded %s/%s; want %s/%s, %s/%s", r.Status, r.Reason, d.Status, d.Reason, tt.ready, tt.readyReason, tt.degraded, tt.degradedWhy)
			}
			if !strings.Contains(r.Message+" "+d.Message, tt.messageMentions) {
				t.Errorf("messages %q / %q do not mention %q", r.Message, d.Message, tt.messageMentions)
			}
			for _, c := range []metav1.Condition{r, d} {
				if c.ObservedGeneration != 4 {
					t.Errorf("%s observedGeneration %d, want 4", c.Type, c.ObservedGeneration)
				}
			}
		})
	}
}

func TestTheEventNamesTheFirstMovesAndCountsTheRest(t *testing.T) {
	var moves []balance.Move
	for i := range int32(10) {
		moves = append(moves, balance.Move{Partition: i, From: -1, To: i % 3, Epoch: 1, Reason: balance.ReasonUnassigned})
	}
	msg := movesMessage(moves)
	if !strings.HasPrefix(msg, "10 partition(s)") || !strings.Contains(msg, "0: none→0 epoch 1 (Unassigned)") || !strings.HasSuffix(msg, "and 2 more") {
		t.Errorf("message %q", msg)
	}
}

func TestTopicConfigProblemsAreTheEntriesThenTheRulesBetweenKeysInTheCluster(t *testing.T) {
	for _, tt := range []struct {
		rule           string
		topic, cluster map[string]string
		want           []string // problem keys
	}{
		{"a compacted topic is fine", map[string]string{"cleanup.policy": "compact"}, nil, nil},
		{"an entry that fails its check", map[string]string{"cleanup.policy": ""}, nil, []string{"cleanup.policy"}},
		{"the topic's own lags conflict", map[string]string{"min.compaction.lag.ms": "2", "max.compaction.lag.ms": "1"}, nil,
			[]string{"min.compaction.lag.ms"}},
		{"the topic's min lag above its cluster's max", map[string]string{"min.compaction.lag.ms": "2"},
			map[string]string{"log.cleaner.max.compaction.lag.ms": "1"}, []string{"min.compaction.lag.ms"}},
		{"without a cluster only the topic's values and the defaults count", map[string]string{"min.compaction.lag.ms": "2"}, nil, nil},
		{"a bad entry and a conflict", map[string]string{"segment.ms": "0", "max.compaction.lag.ms": "1"},
			map[string]string{"log.cleaner.min.compaction.lag.ms": "5"}, []string{"segment.ms", "min.compaction.lag.ms"}},
	} {
		var keys []string
		for _, p := range topicConfigProblems(tt.topic, tt.cluster) {
			keys = append(keys, p.Key)
		}
		if !slices.Equal(keys, tt.want) {
			t.Errorf("%s: problems %v, want %v", tt.rule, keys, tt.want)
		}
	}
}

// A partition's uncleanable report comes from its leader when the leader announces it (an old
// leader's last beat may still name it after a move), is kept to the topic the id names and
// the partitions it has, and a partition is reported once while it stays listed.
func TestAnUncleanableReportIsTheLeadersAndIsNewOncePerAppearance(t *testing.T) {
	const id, other = "AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAAAAAAAAAAg"
	kt := &kafkav1alpha1.KafkaTopic{}
	kt.Name, kt.Spec.Partitions, kt.Status.TopicID = "changelog", 3, id
	kt.Status.Partitions = []kafkav1alpha1.PartitionStatus{{Partition: 0, Leader: 1}, {Partition: 1, Leader: 2}, {Partition: 2, Leader: 0}}
	say := func(broker int32, us ...kafkav1alpha1.UncleanablePartition) kafkav1alpha1.BrokerRow {
		return kafkav1alpha1.BrokerRow{ID: broker, Health: kafkav1alpha1.BrokerAlive, UncleanablePartitions: us}
	}
	u := func(topic string, p int32, c kafkav1alpha1.UncleanableCause) kafkav1alpha1.UncleanablePartition {
		return kafkav1alpha1.UncleanablePartition{TopicID: topic, Partition: p, Cause: c}
	}
	const F, M, B = kafkav1alpha1.CauseFailed, kafkav1alpha1.CauseOffsetMapTooSmall, kafkav1alpha1.CauseCorruptBatch
	got := uncleanableByTopic([]kafkav1alpha1.BrokerRow{
		say(0, u(id, 1, F), u(id, 0, F), u(other, 2, F), u(id, 7, F)), // 0 no longer leads 1 or 0; 7 is past the topic's partitions
		say(1, u(id, 0, M)), // the leader of 0
		say(2, u(id, 1, B)), // the leader of 1
	}, []*kafkav1alpha1.KafkaTopic{kt})
	want := []kafkav1alpha1.UncleanablePartitionStatus{{Partition: 0, Broker: 1, Cause: M}, {Partition: 1, Broker: 2, Cause: B}}
	if len(got) != 1 || !slices.Equal(got["changelog"], want) {
		t.Fatalf("uncleanableByTopic = %+v, want changelog: %+v", got, want)
	}
	// Broker 0 alone names partition 1 (its leader says nothing): the report stands.
	got = uncleanableByTopic([]kafkav1alpha1.BrokerRow{say(0, u(id, 1, F))}, []*kafkav1alpha1.KafkaTopic{kt})
	if !slices.Equal(got["changelog"], []kafkav1alpha1.UncleanablePartitionStatus{{Partition: 1, Broker: 0, Cause: F}}) {
		t.Fatalf("a report only a former leader makes = %+v, want it kept", got)
	}

	before := []kafkav1alpha1.UncleanablePartitionStatus{{Partition: 0, Broker: 1, Cause: F}}
	if n := newlyUncleanable(before, want); !slices.Equal(n, want[1:]) {
		t.Fatalf("newlyUncleanable = %+v, want only partition 1 (0 was listed, with another cause)", n)
	}
	if n := newlyUncleanable(want, want); n != nil {
		t.Fatalf("newlyUncleanable of an unchanged list = %+v, want none", n)
	}
	for _, c := range []kafkav1alpha1.UncleanableCause{M, B, F} {
		msg := uncleanableMessage(kafkav1alpha1.UncleanablePartitionStatus{Partition: 4, Broker: 2, Cause: c})
		if !strings.Contains(msg, "partition 4") || !strings.Contains(msg, "broker 2") || !strings.Contains(msg, "still serves") ||
			(c == M) != strings.Contains(msg, "log.cleaner.dedupe.buffer.size") {
			t.Errorf("the %s message %q does not say where, that it serves, and (only for the map) what to raise", c, msg)
		}
	}
}
