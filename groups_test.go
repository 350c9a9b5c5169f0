package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/broker/groups"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// groupsRun runs `paddock groups args...` and returns its exit code and output.
func groupsRun(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := groupsMain(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// fields splits output into lines of whitespace-separated fields.
func fields(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// `paddock groups` answers as kafka-consumer-groups.sh does: --list names each group with its
// type and state; --describe has a line per partition the group committed or owns, with the
// committed offset, the log end, the lag and the owning member (a consumer-protocol member
// here), and says when a group has no active members.
func TestPaddockGroupsListsAndDescribesClassicAndConsumerGroups(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 1, GroupConfig: func(cfg *groups.Config) {
		cfg.InitialRebalanceDelay = 100 * time.Millisecond
		cfg.ConsumerHeartbeatInterval = 200 * time.Millisecond
	}})
	c.CreateTopic("t", 2, nil)
	ctx := testkit.Context(t)
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: "t", Partition: int32(i % 2), Value: []byte(fmt.Sprint(i))})
	}
	if err := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(c.Client())
	idle := kadm.Offsets{}
	idle.Add(kadm.Offset{Topic: "t", Partition: 0, At: 3, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "idle", idle); err != nil {
		t.Fatal(err)
	}
	live, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumerGroup("live"), kgo.ConsumeTopics("t"),
		kgo.ServerSideBalancer(), kgo.ClientID("reader"), kgo.FetchMaxWait(200*time.Millisecond), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(live.Close)
	read := 0
	for read < 20 {
		fs := live.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of 20: %v", read, err)
		}
		read += fs.NumRecords()
	}
	if err := live.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	bootstrap := c.Addrs()[0]

	var out string
	testkit.Eventually(t, "both groups listed, the consumer group Stable", func() bool {
		var code int
		code, out, _ = groupsRun("--bootstrap-server", bootstrap, "--list")
		return code == 0 && strings.Contains(out, "live") && regexp.MustCompile(`(?m)^live +consumer +Stable$`).MatchString(out)
	})
	if want := [][]string{{"GROUP", "TYPE", "STATE"}, {"idle", "classic", "Empty"}, {"live", "consumer", "Stable"}}; fmt.Sprint(fields(out)) != fmt.Sprint(want) {
		t.Fatalf("--list:\n%s\nwant rows %v", out, want)
	}

	code, out, errOut := groupsRun("--bootstrap-server", bootstrap, "--describe", "--group", "live", "--group", "idle", "--group", "nope")
	if code != 0 {
		t.Fatalf("--describe: exit %d: %s", code, errOut)
	}
	t.Logf("paddock groups --describe:\n%s", out)
	rows := fields(out)
	member := rows[2][6]
	want := [][]string{
		{"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"},
		{"idle", "t", "0", "3", "10", "7", "-", "-", "-"},
		{"live", "t", "0", "10", "10", "0", member, rows[2][7], "reader"},
		{"live", "t", "1", "10", "10", "0", member, rows[2][7], "reader"},
		{"Consumer", "group", "'idle'", "has", "no", "active", "members."},
		{"Consumer", "group", "'nope'", "does", "not", "exist."},
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) || member == "-" {
		t.Fatalf("--describe:\n%s\nwant rows %v", out, want)
	}

	for _, bad := range [][]string{
		{"--list"},
		{"--bootstrap-server", bootstrap},
		{"--bootstrap-server", bootstrap, "--list", "--describe"},
		{"--bootstrap-server", bootstrap, "--describe"},
		{"--bootstrap-server", bootstrap, "--describe", "--group", "g", "--all-groups"},
		{"--bootstrap-server", bootstrap, "--list", "extra"},
	} {
		if code, out, errOut := groupsRun(bad...); code != 2 || out != "" || !strings.Contains(errOut, "paddock groups") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and a message", bad, code, out, errOut)
		}
	}
}
