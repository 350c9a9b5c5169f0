package groups

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// value reads a gauge's or counter's value, or a histogram's sample count.
func value(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 16)
	c.Collect(ch)
	close(ch)
	total := 0.0
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		switch {
		case d.Gauge != nil:
			total += d.Gauge.GetValue()
		case d.Counter != nil:
			total += d.Counter.GetValue()
		case d.Histogram != nil:
			total += float64(d.Histogram.GetSampleCount())
		}
	}
	return total
}

func TestMetricsCountGroupsMembersRebalancesAndCommits(t *testing.T) {
	m := NewMetrics()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.Metrics = m })
	ids, gen := e.stableGroup(e.c, "g", 2)
	e.commit(e.c, "g", ids[0], gen, map[int32]int64{0: 1})
	pending(t, e.join(e.c, joinReq(5, "g", ids[0])))

	if got := value(t, m.groups.WithLabelValues("PreparingRebalance")); got != 1 {
		t.Errorf("groups in PreparingRebalance: %v", got)
	}
	if got := value(t, m.groups.WithLabelValues("Stable")); got != 0 {
		t.Errorf("groups in Stable: %v", got)
	}
	if got := value(t, m.members); got != 2 {
		t.Errorf("members: %v", got)
	}
	if got := value(t, m.rebalances); got != 1 {
		t.Errorf("completed rebalances: %v", got)
	}
	if got := value(t, m.held); got != 1 {
		t.Errorf("coordinated: %v", got)
	}
	if got := value(t, m.takeovers.WithLabelValues("claimed")); got != 1 {
		t.Errorf("takeovers: %v", got)
	}
	if n := value(t, m.commits.WithLabelValues("ok").(prometheus.Histogram)); n != 1 {
		t.Errorf("commit latency samples: %v", n)
	}
	if got := value(t, m.epoch); got != 1 {
		t.Errorf("coordinator epoch: %v", got)
	}
	if fams, err := reg.Gather(); err != nil || len(fams) < 6 {
		t.Errorf("registry: %d families, %v", len(fams), err)
	}
	_ = e.c.Close()
	if got := value(t, m.members); got != 0 {
		t.Errorf("members after Close: %v", got)
	}
	if got := value(t, m.groups.WithLabelValues("PreparingRebalance")); got != 0 {
		t.Errorf("groups after Close: %v", got)
	}
}

func TestRequestsOutsideTheVersionRangeAreCallerErrors(t *testing.T) {
	e := newEnv(t)
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 10
	if _, err := e.c.JoinGroup(ctxT(t), Client{}, r); err == nil {
		t.Fatal("JoinGroup v10 served")
	}
	o := kmsg.NewPtrOffsetCommitRequest()
	o.Version = 10
	if _, err := e.c.OffsetCommit(ctxT(t), o); err == nil {
		t.Fatal("OffsetCommit v10 (topic ids) served")
	}
	for key, want := range map[int16][2]int16{11: {0, 9}, 14: {0, 5}, 12: {0, 4}, 13: {0, 5}, 8: {0, 9}, 9: {0, 9}, 15: {0, 5}, 16: {0, 5}, 42: {0, 2}, 47: {0, 0}, 68: {0, 1}, 69: {0, 1}} {
		if lo, hi, ok := VersionRange(key); !ok || lo != want[0] || hi != want[1] {
			t.Errorf("key %d: %d-%d %v, want Apache 3.7's (4.0's for ListGroups and the consumer protocol) %v", key, lo, hi, ok, want)
		}
	}
}

func TestEmptyGroupIDIsInvalidWhereApacheSaysSo(t *testing.T) {
	e := newEnv(t)
	l := kmsg.NewPtrLeaveGroupRequest()
	l.Version = 3
	if resp, _ := e.c.LeaveGroup(ctxT(t), l); resp.ErrorCode != 24 {
		t.Errorf("LeaveGroup: %s", codeName(resp.ErrorCode))
	}
	d := kmsg.NewPtrOffsetDeleteRequest()
	if resp, _ := e.c.OffsetDelete(ctxT(t), d); resp.ErrorCode != 24 {
		t.Errorf("OffsetDelete: %s", codeName(resp.ErrorCode))
	}
	// OffsetCommit, OffsetFetch, DescribeGroups and DeleteGroups accept "".
	if got := e.commit(e.c, "", "", -1, map[int32]int64{0: 9})[0]; got != 0 {
		t.Errorf("OffsetCommit: %s", codeName(got))
	}
	if got, code := e.fetch(e.c, "", 0); code != 0 || got[0] != 9 {
		t.Errorf("OffsetFetch: %v %s", got, codeName(code))
	}
	if d := e.describe(e.c, ""); d.ErrorCode != 0 || d.State != "Empty" {
		t.Errorf("DescribeGroups: %+v", d)
	}
}
