package groups

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// kcatRead runs `kcat -G group topic` (librdkafka's balanced consumer, offsets auto-stored
// and committed when it closes) with extra flags and parses what it printed.
func kcatRead(t *testing.T, c *cluster, group, topic string, extra ...string) []consumed {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed: run `make kcat` (hack/install-kcat.sh)")
	}
	ctx := testCtx(t)
	args := append([]string{"-b", strings.Join(c.Addrs, ","), "-q", "-f", `%p %o %s\n`,
		"-X", "auto.offset.reset=earliest", "-X", "topic.metadata.refresh.interval.ms=1000"}, extra...)
	args = append(args, "-G", group, topic)
	out, err := exec.CommandContext(ctx, "kcat", args...).Output()
	if err != nil {
		t.Fatalf("kcat %v: %v\n%s", args, err, out)
	}
	var got []consumed
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		var r consumed
		if _, err := fmt.Sscanf(line, "%d %d %s", &r.partition, &r.offset, &r.value); err != nil {
			t.Fatalf("kcat printed %q: %v", line, err)
		}
		got = append(got, r)
	}
	return got
}

// TestKcatBalancedConsumerResumesAtTheCommittedOffset: `kcat -G` reads a count of records
// of a topic produced earlier and commits on exit; a second `kcat -G -e` of the group resumes
// at the committed offsets and reads to the end of every partition (librdkafka's partition
// EOF: a fetch at the high watermark answered with empty, not null, records).
func TestKcatBalancedConsumerResumesAtTheCommittedOffset(t *testing.T) {
	c := newCluster(t, 3)
	const topic, group, partitions, perPartition = "kcat", "kcat-group", 3, 20
	c.createTopic(topic, partitions)
	c.produce(topic, partitions, perPartition)
	first := kcatRead(t, c, group, topic, "-c", "30")
	commit := c.committed(group, topic)
	second := kcatRead(t, c, group, topic, "-e")
	checkResumed(t, commit, first, second, partitions*perPartition)
}
