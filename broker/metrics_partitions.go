package broker

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMetricsPartitionLimit is --metrics-partition-limit's default: enough for every
// partition of a typical cluster, few enough that one broker's scrape stays small.
const DefaultMetricsPartitionLimit = 1000

// groupStatsTimeout bounds the calls a scrape makes to the group goroutines: a group busy
// past it is left out of that scrape rather than holding it.
const groupStatsTimeout = 2 * time.Second

// The per-partition and per-group series are computed at scrape time from what the broker
// holds — the partition logs it leads and the groups it coordinates — so nothing on the
// request path maintains them, and a partition or group that moved away leaves no stale
// series behind.
var (
	partitionLabels      = []string{"topic", "partition"}
	groupPartitionLabels = []string{"group", "topic", "partition"}

	descPartitions = prometheus.NewDesc("paddock_broker_partitions",
		"Partitions the view gives this broker, by state: takingOver, serving, fenced (claimed at a newer epoch), failed (a storage error took it offline here).",
		[]string{"state"}, nil)
	descStorageHealthy = prometheus.NewDesc("paddock_broker_storage_healthy",
		"1 while the data volume takes writes; 0 while the volume probe that follows a storage error fails.", nil, nil)
	descLogStart = prometheus.NewDesc("paddock_partition_log_start_offset",
		"First readable offset of a partition this broker serves.", partitionLabels, nil)
	descHighWatermark = prometheus.NewDesc("paddock_partition_high_watermark",
		"High watermark of a partition this broker serves: offsets below it are durable and readable.", partitionLabels, nil)
	descLogEnd = prometheus.NewDesc("paddock_partition_log_end_offset",
		"Offset the next batch of a partition this broker serves will get.", partitionLabels, nil)
	descLogBytes = prometheus.NewDesc("paddock_partition_size_bytes",
		"Record-batch bytes kept by a partition this broker serves, over all its segments.", partitionLabels, nil)
	descSegments = prometheus.NewDesc("paddock_partition_segments",
		"Segment files of a partition this broker serves.", partitionLabels, nil)
	descLeaderEpoch = prometheus.NewDesc("paddock_partition_leader_epoch",
		"Leader epoch at which this broker serves the partition.", partitionLabels, nil)
	descLogBytesTotal = prometheus.NewDesc("paddock_broker_log_size_bytes",
		"Record-batch bytes kept by every partition this broker serves (not bounded by --metrics-partition-limit).", nil, nil)
	descDirtyRatio = prometheus.NewDesc("paddock_partition_cleaner_dirty_ratio",
		"Dirty share of the cleanable bytes of a compacted partition this broker serves: the cleaner cleans it above min.cleanable.dirty.ratio.", partitionLabels, nil)
	descCleanerLag = prometheus.NewDesc("paddock_partition_cleaner_lag_seconds",
		"How long the oldest uncleaned record of a compacted partition this broker serves has waited (0 when nothing is dirty); max.compaction.lag.ms bounds it.", partitionLabels, nil)
	descUncleanable = prometheus.NewDesc("paddock_partition_uncleanable",
		"1 when the cleaner's last pass on a compacted partition this broker serves failed (the offset map is too small, a batch does not decode): see the broker's log; retried every 10 minutes.", partitionLabels, nil)
	descCleanerPasses = prometheus.NewDesc("paddock_cleaner_passes_total",
		"Cleaning passes this broker's log cleaner swapped in.", nil, nil)
	descCleanerFailures = prometheus.NewDesc("paddock_cleaner_failures_total",
		"Cleaning passes that failed (the partition is retried later; paddock_partition_uncleanable says which).", nil, nil)
	descCleanerRead = prometheus.NewDesc("paddock_cleaner_read_bytes_total",
		"Segment bytes the log cleaner read (the dirty section twice: to map its keys, then to clean it).", nil, nil)
	descCleanerWritten = prometheus.NewDesc("paddock_cleaner_written_bytes_total",
		"Bytes of cleaned segment copies the log cleaner wrote.", nil, nil)
	descCleanerRemoved = prometheus.NewDesc("paddock_cleaner_removed_records_total",
		"Records the log cleaner removed: superseded, keyless, aborted, and tombstones past their delete horizon.", nil, nil)
	descDropped = prometheus.NewDesc("paddock_broker_metrics_series_dropped",
		"Partitions (kind=partition) and group partitions (kind=group_partition) left out of the per-partition series by --metrics-partition-limit.",
		[]string{"kind"}, nil)

	descGroupState = prometheus.NewDesc("paddock_group_state",
		"1 for the state a group this broker coordinates is in (Empty, PreparingRebalance, CompletingRebalance, Stable).",
		[]string{"group", "state"}, nil)
	descGroupMembers = prometheus.NewDesc("paddock_group_members",
		"Members of a group this broker coordinates.", []string{"group"}, nil)
	descGroupCommitted = prometheus.NewDesc("paddock_group_committed_offset",
		"Committed offset of a group on one partition, shown by the group's coordinator.", groupPartitionLabels, nil)
	descGroupLag = prometheus.NewDesc("paddock_group_lag",
		"High watermark minus the committed offset, for the partitions whose leader is the group's coordinator (the only log ends it knows without asking); paddock:group_lag:records covers every partition.",
		groupPartitionLabels, nil)
)

// stateCollector is the broker's scrape-time series: its partitions, its groups, its volume,
// its certificate.
type stateCollector struct{ b *Broker }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPartitions, descStorageHealthy, descLogStart, descHighWatermark, descLogEnd,
		descLogBytes, descSegments, descLeaderEpoch, descLogBytesTotal, descDropped,
		descDirtyRatio, descCleanerLag, descUncleanable, descCleanerPasses, descCleanerFailures, descCleanerRead, descCleanerWritten, descCleanerRemoved,
		descGroupState, descGroupMembers, descGroupCommitted, descGroupLag, descCertificateExpiry} {
		ch <- d
	}
	describeVolume(ch)
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	limit := c.b.Config.MetricsPartitionLimit
	switch {
	case limit == 0:
		limit = DefaultMetricsPartitionLimit
	case limit < 0:
		limit = 0
	}
	hw := c.collectPartitions(ch, limit)
	dropped := c.collectGroups(ch, limit, hw)
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.GaugeValue, float64(dropped), "group_partition")
	if c.b.Config.DataDir != "" {
		collectVolume(ch, c.b.Config.DataDir)
	}
	c.collectCertificates(ch)
}

// topicPartition names a partition by topic name, as the group offsets do.
type topicPartition struct {
	topic     string
	partition int32
}

type ledPartition struct {
	key topicPartition
	l   *leader
}

// collectPartitions sends the partition series and returns the high watermark of every
// partition served here, for the groups' lag.
func (c stateCollector) collectPartitions(ch chan<- prometheus.Metric, limit int) map[topicPartition]int64 {
	p := c.b.partitions.Load()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	healthy := 0.0
	if p.StorageHealthy() {
		healthy = 1
	}
	gauge(descStorageHealthy, healthy)
	var led []ledPartition
	if p != nil {
		p.mu.RLock()
		for key, l := range p.led {
			led = append(led, ledPartition{key: topicPartition{l.topic, key.index}, l: l})
		}
		p.mu.RUnlock()
	}
	slices.SortFunc(led, func(a, b ledPartition) int { return compareTopicPartition(a.key, b.key) })
	counts := map[leaderPhase]int{}
	hw := map[topicPartition]int64{}
	var total int64
	shown, dropped := 0, 0
	for _, e := range led {
		counts[e.l.phase]++
		if e.l.phase != phaseServing {
			continue
		}
		s, err := e.l.log.Stats()
		if err != nil {
			continue // stopped since the table was read: the next scrape shows its new phase
		}
		hw[e.key] = s.HighWatermark
		total += s.Bytes
		if shown >= limit {
			dropped++
			continue
		}
		shown++
		labels := []string{e.key.topic, strconv.Itoa(int(e.key.partition))}
		gauge(descLogStart, float64(s.LogStart), labels...)
		gauge(descHighWatermark, float64(s.HighWatermark), labels...)
		gauge(descLogEnd, float64(s.LogEnd), labels...)
		gauge(descLogBytes, float64(s.Bytes), labels...)
		gauge(descSegments, float64(s.Segments), labels...)
		gauge(descLeaderEpoch, float64(e.l.epoch), labels...)
		if cs, ok := e.l.log.CompactionStats(); ok {
			gauge(descDirtyRatio, cs.DirtyRatio, labels...)
			gauge(descCleanerLag, cs.Lag.Seconds(), labels...)
			bad := 0.0
			if p.cleaner.Uncleanable(e.l.log) != nil {
				bad = 1
			}
			gauge(descUncleanable, bad, labels...)
		}
	}
	if p != nil {
		cs := p.cleaner.Stats()
		for _, c := range []struct {
			d *prometheus.Desc
			v int64
		}{{descCleanerPasses, cs.Passes}, {descCleanerFailures, cs.Failures}, {descCleanerRead, cs.BytesRead}, {descCleanerWritten, cs.BytesWritten}, {descCleanerRemoved, cs.RecordsRemoved}} {
			ch <- prometheus.MustNewConstMetric(c.d, prometheus.CounterValue, float64(c.v))
		}
	}
	for _, ph := range []leaderPhase{phaseTakingOver, phaseServing, phaseFenced, phaseFailed} {
		gauge(descPartitions, float64(counts[ph]), ph.String())
	}
	gauge(descLogBytesTotal, float64(total))
	gauge(descDropped, float64(dropped), "partition")
	return hw
}

// collectGroups sends the series of every group this broker coordinates. Lag is known only
// where the coordinator leads the partition too: the log end of a partition led elsewhere
// would take a request (or a read of another leader's files), and a guess would be worse
// than none. The recording rule paddock:group_lag:records joins every leader's high
// watermark with the committed offsets instead (docs/metrics.md, "Consumer lag").
// It returns how many group partitions the limit left out.
func (c stateCollector) collectGroups(ch chan<- prometheus.Metric, limit int, hw map[topicPartition]int64) int {
	co := c.b.groups.Coordinator()
	if co == nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupStatsTimeout)
	defer cancel()
	shown, dropped := 0, 0
	for _, g := range co.Stats(ctx) {
		ch <- prometheus.MustNewConstMetric(descGroupState, prometheus.GaugeValue, 1, g.Group, g.State)
		ch <- prometheus.MustNewConstMetric(descGroupMembers, prometheus.GaugeValue, float64(g.Members), g.Group)
		for _, o := range g.Offsets {
			if shown >= limit {
				dropped++
				continue
			}
			shown++
			labels := []string{g.Group, o.Topic, strconv.Itoa(int(o.Partition))}
			ch <- prometheus.MustNewConstMetric(descGroupCommitted, prometheus.GaugeValue, float64(o.Offset), labels...)
			if end, ok := hw[topicPartition{o.Topic, o.Partition}]; ok {
				ch <- prometheus.MustNewConstMetric(descGroupLag, prometheus.GaugeValue, float64(max(end-o.Offset, 0)), labels...)
			}
		}
	}
	return dropped
}

func compareTopicPartition(a, b topicPartition) int {
	if c := strings.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return int(a.partition - b.partition)
}
