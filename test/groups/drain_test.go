package groups

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestADrainingCoordinatorHandsItsGroupOver: a kgo member of a group whose coordinator is
// broker 2 reads half of a topic and commits; broker 2 gets SIGTERM and its row turns
// Draining. The real assignment reconciler moves its partitions and bumps the coordinator
// epoch; broker 2 exits only once it coordinates nothing (a clean drain), and the same
// member, following the group to its new coordinator, reads the rest and commits there —
// the committed offsets never went backwards. The drain and hand-over times are printed.
func TestADrainingCoordinatorHandsItsGroupOver(t *testing.T) {
	c := newCluster(t, 3)
	const topic, partitions, perPartition = "drain", 3, 20
	c.createTopic(topic, partitions)
	c.produce(topic, partitions, perPartition)
	group := groupCoordinatedBy("drain", 2)
	ctx := testCtx(t)
	cl := c.Kgo(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Balancers(kgo.RangeBalancer()), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	read := map[string]bool{}
	// poll reads until the member has read until distinct records (at least one more poll),
	// then commits; a failed commit goes to refused.
	poll := func(until int, refused func(error)) {
		for first := true; first || len(read) < until; first = false {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d distinct records of %d: %v", len(read), until, ctx.Err())
			}
			fs.EachRecord(func(r *kgo.Record) { read[string(r.Value)] = true })
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			refused(err)
		}
	}
	poll(partitions*perPartition/2, func(err error) { t.Fatalf("commit: %v", err) })
	before := c.committed(group, topic)

	start := time.Now()
	c.Drain(2)
	err, exited := c.WaitExit(2)
	if !exited || err != nil {
		t.Fatalf("broker 2's drain: exited %v, err %v", exited, err)
	}
	drained := time.Since(start)
	// Membership lives in the coordinator's memory (docs/groups.md, "Deviations from Apache
	// 3.7"): the new coordinator does not know the member, so its first commit there may be
	// refused (UNKNOWN_MEMBER_ID, as Apache answers an unknown member); kgo rejoins, resumes at
	// the committed offsets and commits again.
	refused := 0
	for {
		poll(partitions*perPartition, func(err error) {
			refused++
			t.Logf("commit after the move: %v (the member rejoins)", err)
		})
		if done := c.committed(group, topic); len(done) == partitions && done[0] == perPartition && done[1] == perPartition && done[2] == perPartition {
			break
		}
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
	}
	after := c.committed(group, topic)
	t.Logf("broker 2 drained and exited %v after SIGTERM; the member had read the rest and committed on the new coordinator %v after it (%d commits refused meanwhile)", drained, time.Since(start), refused)
	for p := range int32(partitions) {
		if after[p] < before[p] || after[p] != perPartition {
			t.Errorf("partition %d: committed %d before the drain, %d after; want it to grow to %d", p, before[p], after[p], perPartition)
		}
	}
}
