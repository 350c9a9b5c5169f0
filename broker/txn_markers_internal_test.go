package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/txn"
)

func TestBrokersTalkOnTheInternalListenerTheyCanAuthenticateOnBest(t *testing.T) {
	l := func(name string, typ v1alpha1.ListenerType, tls bool, auth v1alpha1.ListenerAuthenticationType) cluster.ListenerSpec {
		return cluster.ListenerSpec{Name: name, Type: typ, TLS: tls, Authentication: auth}
	}
	for _, tt := range []struct {
		name string
		ls   []cluster.ListenerSpec
		want string // "" none
	}{
		{"no authentication first", []cluster.ListenerSpec{l("scram", "", true, v1alpha1.AuthenticationScramSHA512), l("mtls", "", true, v1alpha1.AuthenticationTLS), l("open", "", false, "")}, "open"},
		{"then mutual TLS", []cluster.ListenerSpec{l("scram", "", true, v1alpha1.AuthenticationScramSHA512), l("mtls", v1alpha1.ListenerInternal, true, v1alpha1.AuthenticationTLS)}, "mtls"},
		{"then SASL over TLS", []cluster.ListenerSpec{l("clear-scram", "", false, v1alpha1.AuthenticationScramSHA512), l("scram", "", true, v1alpha1.AuthenticationScramSHA256)}, "scram"},
		{"never SASL without TLS", []cluster.ListenerSpec{l("clear-scram", "", false, v1alpha1.AuthenticationScramSHA512), l("clear-plain", "", false, v1alpha1.AuthenticationPlain)}, ""},
		{"never an external listener", []cluster.ListenerSpec{l("outside", v1alpha1.ListenerNodePort, false, ""), l("lb", v1alpha1.ListenerLoadBalancer, true, v1alpha1.AuthenticationTLS)}, ""},
		{"nothing", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := brokerListener(tt.ls)
			if ok != (tt.want != "") || got.Name != tt.want {
				t.Fatalf("brokerListener = %q, %v; want %q", got.Name, ok, tt.want)
			}
		})
	}
}

func TestMarkersOfOneDecisionGoInOneEntryAndTheirAnswersComeBackByPartition(t *testing.T) {
	ms := []txn.Marker{
		{Topic: "a", Partition: 0, ProducerID: 7, ProducerEpoch: 1, Commit: true, CoordinatorEpoch: 3},
		{Topic: "b", Partition: 2, ProducerID: 7, ProducerEpoch: 1, Commit: true, CoordinatorEpoch: 3},
		{Topic: "a", Partition: 1, ProducerID: 7, ProducerEpoch: 1, Commit: true, CoordinatorEpoch: 3},
		{Topic: "a", Partition: 0, ProducerID: 9, ProducerEpoch: 0, Commit: false, CoordinatorEpoch: 3},
	}
	req, index := markersRequest(ms)
	if len(req.Markers) != 2 || len(req.Markers[0].Topics) != 2 || !slices.Equal(req.Markers[0].Topics[0].Partitions, []int32{0, 1}) ||
		req.Markers[1].ProducerID != 9 || req.Markers[1].Committed {
		t.Fatalf("request %+v: want one entry per decision, partitions grouped by topic", req.Markers)
	}
	// An answer in another order (Apache's is keyed by producer id), one partition missing.
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	entry := func(pid int64, topic string, parts map[int32]int16) kmsg.WriteTxnMarkersResponseMarker {
		m := kmsg.NewWriteTxnMarkersResponseMarker()
		m.ProducerID = pid
		rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
		rt.Topic = topic
		for p, code := range parts {
			rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		m.Topics = append(m.Topics, rt)
		return m
	}
	resp.Markers = append(resp.Markers, entry(9, "a", map[int32]int16{0: 47}), entry(7, "a", map[int32]int16{1: 0, 0: 0}))
	got := markerCodes(resp, index, len(ms))
	if want := []int16{0, 6, 0, 47}; !slices.Equal(got, want) {
		t.Fatalf("codes %v, want %v (the unanswered marker retried as NOT_LEADER_OR_FOLLOWER)", got, want)
	}
}

func TestAMarkerGoesToThePartitionsLeaderAndNowhereForADeletedTopic(t *testing.T) {
	view := cluster.NewMemoryView(cluster.Snapshot{
		Topics:             []cluster.Topic{{Name: "t", Partitions: []cluster.Partition{{Index: 0, Leader: 2}, {Index: 1, Leader: -1}}}},
		CoordinatorEpoch:   3,
		CoordinatorBrokers: &v1alpha1.CoordinatorBrokers{Registered: []int32{0, 1, 2}, Alive: []int32{0, 1, 2}},
	})
	s := view.Snapshot()
	for _, tt := range []struct {
		topic     string
		partition int32
		leader    int32
		ok        bool
	}{
		{"t", 0, 2, true},
		{"t", 1, -1, false},                  // no leader now: wait
		{"t", 2, txn.PartitionGone, true},    // past the partition count
		{"gone", 0, txn.PartitionGone, true}, // deleted topic
		{txn.OffsetsTopic, 4, 1, true},       // the coordinator rule: slot 4 % 3
		{txn.OffsetsTopic, 50, txn.PartitionGone, true},
	} {
		if l, ok := markerLeader(s, tt.topic, tt.partition); l != tt.leader || ok != tt.ok {
			t.Errorf("markerLeader(%s, %d) = %d, %v; want %d, %v", tt.topic, tt.partition, l, ok, tt.leader, tt.ok)
		}
	}
}
