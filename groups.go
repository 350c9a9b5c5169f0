package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupsCommand is `paddock groups`: kafka-consumer-groups.sh's --list and --describe over the
// Kafka protocol, for classic and consumer (KIP-848) groups alike (docs/groups.md, "paddock
// groups").
var groupsCommand = command{"groups", "list consumer groups, or describe their partitions, offsets, lag and members", runGroups}

// groupsOptions are the flags of `paddock groups`.
type groupsOptions struct {
	bootstrap      string
	list, describe bool
	groups         []string
	allGroups      bool
	timeout        time.Duration
}

func runGroups(args []string) int {
	return groupsMain(args, os.Stdout, os.Stderr)
}

func groupsMain(args []string, stdout, stderr io.Writer) int {
	var o groupsOptions
	fs := flag.NewFlagSet("paddock groups", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.bootstrap, "bootstrap-server", "", "a broker's host:port (comma-separated for several); required")
	fs.BoolVar(&o.list, "list", false, "list every group with its type and state")
	fs.BoolVar(&o.describe, "describe", false, "describe the groups named by --group (or --all-groups): one line per partition")
	fs.Func("group", "a group to describe (repeatable)", func(s string) error { o.groups = append(o.groups, s); return nil })
	fs.BoolVar(&o.allGroups, "all-groups", false, "describe every group")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long the whole command may take")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: paddock groups --bootstrap-server HOST:PORT (--list | --describe (--group G ... | --all-groups))")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "As kafka-consumer-groups.sh: --list prints GROUP TYPE STATE; --describe prints GROUP TOPIC")
		fmt.Fprintln(stderr, "PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID per partition.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if msg := o.check(fs.Args()); msg != "" {
		fmt.Fprintln(stderr, "paddock groups: "+msg)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(o.bootstrap, ",")...), kgo.ClientID("paddock-groups"))
	if err != nil {
		fmt.Fprintf(stderr, "paddock groups: %v\n", err)
		return 1
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if o.list {
		err = listGroups(ctx, adm, stdout)
	} else {
		err = describeGroups(ctx, adm, o.groups, o.allGroups, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "paddock groups: %v\n", err)
		return 1
	}
	return 0
}

// check says what is wrong with the flags ("" when nothing is).
func (o *groupsOptions) check(rest []string) string {
	switch {
	case len(rest) > 0:
		return fmt.Sprintf("unexpected arguments %q", rest)
	case o.bootstrap == "":
		return "--bootstrap-server is required"
	case o.list == o.describe:
		return "give exactly one of --list and --describe"
	case o.describe && len(o.groups) == 0 && !o.allGroups:
		return "--describe needs --group or --all-groups"
	case o.describe && len(o.groups) > 0 && o.allGroups:
		return "give --group or --all-groups, not both"
	case o.list && (len(o.groups) > 0 || o.allGroups):
		return "--list takes no --group or --all-groups"
	}
	return ""
}

// listGroups prints every group: GROUP TYPE STATE, sorted by group.
func listGroups(ctx context.Context, adm *kadm.Client, w io.Writer) error {
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTYPE\tSTATE")
	for _, g := range listed.Sorted() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Group, dash(g.GroupType), dash(g.State))
	}
	return tw.Flush()
}

// groupMember is what the describe lines say of a partition's owner.
type groupMember struct{ id, host, client string }

// partitionLine is one line of --describe.
type partitionLine struct {
	topic     string
	partition int32
	committed int64 // -1: nothing committed
	end       int64 // -1: unknown
	owner     *groupMember
}

// describeGroups prints, per group, a line per partition it has committed or has assigned.
func describeGroups(ctx context.Context, adm *kadm.Client, names []string, all bool, w io.Writer) error {
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	if all {
		names = listed.Groups()
	}
	slices.Sort(names)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
	var notes []string
	for _, name := range names {
		lg, ok := listed[name]
		if !ok {
			notes = append(notes, fmt.Sprintf("Consumer group '%s' does not exist.", name))
			continue
		}
		lines, members, err := groupLines(ctx, adm, lg)
		if err != nil {
			return err
		}
		if members == 0 {
			notes = append(notes, fmt.Sprintf("Consumer group '%s' has no active members.", name))
		}
		for _, l := range lines {
			id, host, client := "-", "-", "-"
			if l.owner != nil {
				id, host, client = l.owner.id, l.owner.host, l.owner.client
			}
			committed, end, lag := "-", "-", "-"
			if l.committed >= 0 {
				committed = strconv.FormatInt(l.committed, 10)
			}
			if l.end >= 0 {
				end = strconv.FormatInt(l.end, 10)
			}
			if l.committed >= 0 && l.end >= 0 {
				lag = strconv.FormatInt(max(l.end-l.committed, 0), 10)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", name, l.topic, l.partition, committed, end, lag, id, host, client)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	return nil
}

// groupLines gathers one group's partitions: its members' assignments (ConsumerGroupDescribe
// for a consumer group, DescribeGroups for a classic one), its committed offsets, and the
// partitions' end offsets. It also returns how many members the group has.
func groupLines(ctx context.Context, adm *kadm.Client, lg kadm.ListedGroup) ([]partitionLine, int, error) {
	owners := map[string]map[int32]*groupMember{}
	own := func(topic string, p int32, m *groupMember) {
		if owners[topic] == nil {
			owners[topic] = map[int32]*groupMember{}
		}
		owners[topic][p] = m
	}
	members := 0
	if lg.GroupType == "consumer" {
		d, err := adm.DescribeConsumerGroups(ctx, lg.Group)
		if err == nil {
			err = d[lg.Group].Err
		}
		if err != nil {
			return nil, 0, fmt.Errorf("describe consumer group %s: %w", lg.Group, err)
		}
		for _, m := range d[lg.Group].Members {
			gm := &groupMember{m.MemberID, m.ClientHost, m.ClientID}
			members++
			for topic, ps := range m.Assignment {
				for p := range ps {
					own(topic, p, gm)
				}
			}
		}
	} else {
		d, err := adm.DescribeGroups(ctx, lg.Group)
		if err == nil {
			err = d[lg.Group].Err
		}
		if err != nil {
			return nil, 0, fmt.Errorf("describe group %s: %w", lg.Group, err)
		}
		for _, m := range d[lg.Group].Members {
			gm := &groupMember{m.MemberID, m.ClientHost, m.ClientID}
			members++
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range a.Topics {
					for _, p := range t.Partitions {
						own(t.Topic, p, gm)
					}
				}
			}
		}
	}
	offsets, err := adm.FetchOffsets(ctx, lg.Group)
	if err != nil {
		return nil, 0, fmt.Errorf("fetch offsets of %s: %w", lg.Group, err)
	}
	type key struct {
		topic string
		p     int32
	}
	lines := map[key]*partitionLine{}
	line := func(topic string, p int32) *partitionLine {
		k := key{topic, p}
		if lines[k] == nil {
			lines[k] = &partitionLine{topic: topic, partition: p, committed: -1, end: -1}
		}
		return lines[k]
	}
	offsets.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			line(o.Topic, o.Partition).committed = o.At
		}
	})
	for topic, ps := range owners {
		for p, m := range ps {
			line(topic, p).owner = m
		}
	}
	var topics []string
	for k := range lines {
		if !slices.Contains(topics, k.topic) {
			topics = append(topics, k.topic)
		}
	}
	if len(topics) > 0 {
		ends, err := adm.ListEndOffsets(ctx, topics...)
		if err != nil {
			return nil, 0, fmt.Errorf("list end offsets: %w", err)
		}
		ends.Each(func(o kadm.ListedOffset) {
			if l, ok := lines[key{o.Topic, o.Partition}]; ok && o.Err == nil {
				l.end = o.Offset
			}
		})
	}
	out := make([]partitionLine, 0, len(lines))
	for _, l := range lines {
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b partitionLine) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	return out, members, nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
