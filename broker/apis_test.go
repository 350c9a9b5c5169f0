package broker

import (
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/coordinator"
	"github.com/paddock-dev/paddock/internal/testkit"
)

func newKgo(t *testing.T, seeds ...string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestRetries(0))
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func metadataBrokerIDs(resp *kmsg.MetadataResponse) []int32 {
	var ids []int32
	for _, b := range resp.Brokers {
		ids = append(ids, b.NodeID)
	}
	return ids
}

func TestMetadataOmitsFencedBrokerAndKeepsSelf(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.rows[2].State, tc.rows[2].Reason = v1alpha1.BrokerFenced, "NotServing"
	tc.publish(nil)

	// A real client seeded with broker 0 only ever learns brokers 0 and 1.
	cl := newKgo(t, tc.addrs[0])
	for range 3 {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(testkit.Context(t), cl)
		if err != nil {
			t.Fatalf("metadata: %v", err)
		}
		if got := metadataBrokerIDs(resp); !slices.Equal(got, []int32{0, 1}) {
			t.Fatalf("kgo metadata brokers = %v, want [0 1] (fenced 2 omitted)", got)
		}
		if resp.ClusterID == nil || *resp.ClusterID != testClusterID || resp.ControllerID != 0 {
			t.Fatalf("cluster id %v controller %d, want %s and 0", resp.ClusterID, resp.ControllerID, testClusterID)
		}
	}

	// The fenced broker itself still lists itself, at its own listener: it just answered.
	c := dialKafka(t, tc.addrs[2])
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp := roundTrip(t, c, req).(*kmsg.MetadataResponse)
	if got := metadataBrokerIDs(resp); !slices.Equal(got, []int32{0, 1, 2}) {
		t.Fatalf("fenced broker's own metadata brokers = %v, want [0 1 2]", got)
	}
	self := resp.Brokers[2]
	if self.Host != tc.rows[2].Host || self.Port != tc.rows[2].Port || self.Rack == nil || *self.Rack != "zone-0" {
		t.Fatalf("self entry %+v, want %s:%d rack zone-0", self, tc.rows[2].Host, tc.rows[2].Port)
	}
}

func TestMetadataSelfUsesTheListenerTheRequestArrivedOn(t *testing.T) {
	tc := newTestCluster(t, 1)
	// The row's host is what the endpoint lists; the answer must use the listener's
	// advertised endpoint instead.
	tc.rows[0].Host, tc.rows[0].Port = "10.9.9.9", 1
	tc.publish(nil)
	c := dialKafka(t, tc.addrs[0])
	resp := roundTrip(t, c, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	if len(resp.Brokers) != 1 || resp.Brokers[0].Host == "10.9.9.9" || resp.Brokers[0].Port == 1 {
		t.Fatalf("brokers %+v, want self at the listener address %s", resp.Brokers, tc.addrs[0])
	}
}

func TestMetadataTopics(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.rows[2].State = v1alpha1.BrokerFenced
	ordersID := [16]byte{1, 2, 3}
	tc.publish([]cluster.Topic{
		{Name: "orders", ID: ordersID, Partitions: []cluster.Partition{
			{Index: 0, Leader: 0, LeaderEpoch: 4},
			{Index: 1, Leader: 2, LeaderEpoch: 1}, // fenced leader
			{Index: 2, Leader: -1},                // unassigned
		}},
		{Name: "payments", Partitions: []cluster.Partition{{Index: 0, Leader: 1, LeaderEpoch: 2}}},
	})
	c := dialKafka(t, tc.addrs[0])
	topic := func(name string) kmsg.MetadataRequestTopic {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &name
		return rt
	}
	names := func(resp *kmsg.MetadataResponse) []string {
		var out []string
		for _, t := range resp.Topics {
			out = append(out, *t.Topic)
		}
		return out
	}

	for _, tt := range []struct {
		name    string
		version int16
		topics  []kmsg.MetadataRequestTopic
		want    []string
	}{
		{"null list means all topics, the internal one first", 12, nil, []string{"__consumer_offsets", "orders", "payments"}},
		{"empty list means no topic in v1+", 12, []kmsg.MetadataRequestTopic{}, nil},
		{"empty list means all topics in v0", 0, []kmsg.MetadataRequestTopic{}, []string{"__consumer_offsets", "orders", "payments"}},
		{"named topics in request order", 4, []kmsg.MetadataRequestTopic{topic("payments"), topic("orders")}, []string{"payments", "orders"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrMetadataRequest()
			req.Version, req.Topics = tt.version, tt.topics
			resp := roundTrip(t, c, req).(*kmsg.MetadataResponse)
			if got := names(resp); !slices.Equal(got, tt.want) {
				t.Fatalf("topics %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("unknown topic is UNKNOWN_TOPIC_OR_PARTITION and not created", func(t *testing.T) {
		cl := newKgo(t, tc.addrs[0])
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{topic("missing")}
		req.AllowAutoTopicCreation = true
		resp, err := req.RequestWith(testkit.Context(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("topics %+v, want one UNKNOWN_TOPIC_OR_PARTITION", resp.Topics)
		}
		if _, ok := tc.view.Snapshot().Topic("missing"); ok {
			t.Fatal("topic was created")
		}
	})

	t.Run("partition leaders not in the broker list are LEADER_NOT_AVAILABLE", func(t *testing.T) {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		req.Topics = []kmsg.MetadataRequestTopic{topic("orders")}
		resp := roundTrip(t, c, req).(*kmsg.MetadataResponse)
		ps := resp.Topics[0].Partitions
		if resp.Topics[0].TopicID != ordersID {
			t.Errorf("topic id %v, want %v", resp.Topics[0].TopicID, ordersID)
		}
		want := []struct {
			code          int16
			leader, epoch int32
		}{{0, 0, 4}, {kerr.LeaderNotAvailable.Code, -1, 1}, {kerr.LeaderNotAvailable.Code, -1, 0}}
		for i, w := range want {
			if ps[i].ErrorCode != w.code || ps[i].Leader != w.leader || ps[i].LeaderEpoch != w.epoch {
				t.Errorf("partition %d: code %d leader %d epoch %d, want %+v", i, ps[i].ErrorCode, ps[i].Leader, ps[i].LeaderEpoch, w)
			}
		}
	})

	t.Run("topic ids in v10+", func(t *testing.T) {
		byID := kmsg.NewMetadataRequestTopic()
		byID.TopicID = ordersID
		unknown := kmsg.NewMetadataRequestTopic()
		unknown.TopicID = [16]byte{9}
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		req.Topics = []kmsg.MetadataRequestTopic{byID, unknown}
		resp := roundTrip(t, c, req).(*kmsg.MetadataResponse)
		if *resp.Topics[0].Topic != "orders" || resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("topics %+v, want orders then UNKNOWN_TOPIC_ID", resp.Topics)
		}
	})
}

func TestMetadataEveryAdvertisedVersionRoundTrips(t *testing.T) {
	tc := newTestCluster(t, 2)
	tc.publish([]cluster.Topic{{Name: "t", Partitions: []cluster.Partition{{Index: 0, Leader: 1}}}})
	c := dialKafka(t, tc.addrs[0])
	for v := int16(0); v <= 13; v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		resp := roundTrip(t, c, req).(*kmsg.MetadataResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: top-level error %d (v13's KIP-1102 field), want NONE", v, resp.ErrorCode)
		}
		if len(resp.Brokers) != 2 || len(resp.Topics) != 2 || *resp.Topics[1].Topic != "t" || resp.Topics[1].Partitions[0].Leader != 1 {
			t.Fatalf("v%d: brokers %d topics %+v", v, len(resp.Brokers), resp.Topics)
		}
		if offsets := resp.Topics[0]; *offsets.Topic != "__consumer_offsets" || len(offsets.Partitions) != 50 || v >= 1 && !offsets.IsInternal {
			t.Fatalf("v%d: first topic %s with %d partitions, internal %v; want __consumer_offsets, 50, internal from v1", v, *offsets.Topic, len(offsets.Partitions), offsets.IsInternal)
		}
		if v >= 1 && resp.ControllerID != 0 {
			t.Fatalf("v%d: controller %d, want 0", v, resp.ControllerID)
		}
	}
}

// ControllerID is the lowest-id broker whose row is Serving and Alive, and every broker gives
// the same answer — the answering broker counts only when its own row qualifies.
func TestControllerIsLowestAliveServingBrokerOnEveryBroker(t *testing.T) {
	for _, tt := range []struct {
		rule string
		set  func(rows []v1alpha1.BrokerRow)
		want int32
	}{
		{"all serving and alive: the lowest id", func([]v1alpha1.BrokerRow) {}, 0},
		{"a dead broker is not the controller", func(r []v1alpha1.BrokerRow) { r[0].Health = v1alpha1.BrokerDead }, 1},
		{"a draining broker is not the controller, not even for itself", func(r []v1alpha1.BrokerRow) { r[0].Health = v1alpha1.BrokerDraining }, 1},
		{"a fenced broker is not the controller, though alive", func(r []v1alpha1.BrokerRow) { r[0].State = v1alpha1.BrokerFenced }, 1},
		{"nothing qualifies: no controller (-1)", func(r []v1alpha1.BrokerRow) {
			for i := range r {
				r[i].Health = v1alpha1.BrokerDead
			}
		}, -1},
	} {
		t.Run(tt.rule, func(t *testing.T) {
			tc := newTestCluster(t, 3)
			tt.set(tc.rows)
			tc.publish(nil)
			for id, addr := range tc.addrs {
				c := dialKafka(t, addr)
				d := roundTrip(t, c, kmsg.NewPtrDescribeClusterRequest()).(*kmsg.DescribeClusterResponse)
				mreq := kmsg.NewPtrMetadataRequest()
				mreq.Version = 12
				m := roundTrip(t, c, mreq).(*kmsg.MetadataResponse)
				if d.ControllerID != tt.want || m.ControllerID != tt.want {
					t.Errorf("broker %d says controller %d (DescribeCluster) / %d (Metadata), want %d", id, d.ControllerID, m.ControllerID, tt.want)
				}
			}
		})
	}
}

func describeClusterIDs(resp *kmsg.DescribeClusterResponse) (ids []int32, fenced []int32) {
	for _, b := range resp.Brokers {
		ids = append(ids, b.NodeID)
		if b.IsFenced {
			fenced = append(fenced, b.NodeID)
		}
	}
	return ids, fenced
}

func TestDescribeClusterFencedVisibility(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.rows[1].State = v1alpha1.BrokerFenced
	tc.publish(nil)
	c := dialKafka(t, tc.addrs[0])
	for _, tt := range []struct {
		name          string
		version       int16
		includeFenced bool
		wantIDs       []int32
		wantFenced    []int32
	}{
		{"v0 never shows a fenced broker", 0, false, []int32{0, 2}, nil},
		{"v1 never shows a fenced broker", 1, false, []int32{0, 2}, nil},
		{"v2 without IncludeFencedBrokers omits it", 2, false, []int32{0, 2}, nil},
		{"v2 with IncludeFencedBrokers lists it as fenced", 2, true, []int32{0, 1, 2}, []int32{1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.Version, req.IncludeFencedBrokers = tt.version, tt.includeFenced
			resp := roundTrip(t, c, req).(*kmsg.DescribeClusterResponse)
			ids, fenced := describeClusterIDs(resp)
			if !slices.Equal(ids, tt.wantIDs) || !slices.Equal(fenced, tt.wantFenced) {
				t.Fatalf("brokers %v fenced %v, want %v fenced %v", ids, fenced, tt.wantIDs, tt.wantFenced)
			}
			if resp.ErrorCode != 0 || resp.ClusterID != testClusterID || resp.ClusterAuthorizedOperations != -2147483648 {
				t.Fatalf("error %d cluster %q ops %d", resp.ErrorCode, resp.ClusterID, resp.ClusterAuthorizedOperations)
			}
		})
	}

	t.Run("kgo sends v2 with the flag", func(t *testing.T) {
		cl := newKgo(t, tc.addrs[2])
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeFencedBrokers = true
		resp, err := req.RequestWith(testkit.Context(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		ids, fenced := describeClusterIDs(resp)
		if resp.Version != 2 || !slices.Equal(ids, []int32{0, 1, 2}) || !slices.Equal(fenced, []int32{1}) {
			t.Fatalf("v%d brokers %v fenced %v", resp.Version, ids, fenced)
		}
		if resp.Brokers[1].Host != tc.rows[1].Host || resp.Brokers[1].Port != tc.rows[1].Port || *resp.Brokers[1].Rack != "zone-1" {
			t.Fatalf("fenced broker entry %+v, want its row's endpoint and rack", resp.Brokers[1])
		}
	})
}

func TestDescribeClusterSelfNeverFenced(t *testing.T) {
	tc := newTestCluster(t, 2)
	tc.rows[1].State, tc.rows[1].Health = v1alpha1.BrokerFenced, v1alpha1.BrokerDead
	tc.publish(nil)
	c := dialKafka(t, tc.addrs[1])
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeFencedBrokers = true
	resp := roundTrip(t, c, req).(*kmsg.DescribeClusterResponse)
	ids, fenced := describeClusterIDs(resp)
	if !slices.Equal(ids, []int32{0, 1}) || len(fenced) != 0 {
		t.Fatalf("brokers %v fenced %v, want [0 1] with none fenced", ids, fenced)
	}
}

func TestDescribeClusterEndpointTypes(t *testing.T) {
	tc := newTestCluster(t, 2)
	c := dialKafka(t, tc.addrs[0])
	for _, tt := range []struct {
		name     string
		typ      int8
		wantCode int16
	}{
		{"brokers are served", 1, 0},
		{"controllers are MISMATCHED_ENDPOINT_TYPE", 2, kerr.MismatchedEndpointType.Code},
		{"type 0 is UNSUPPORTED_ENDPOINT_TYPE", 0, kerr.UnsupportedEndpointType.Code},
		{"type 7 is UNSUPPORTED_ENDPOINT_TYPE", 7, kerr.UnsupportedEndpointType.Code},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.Version, req.EndpointType = 1, tt.typ
			resp := roundTrip(t, c, req).(*kmsg.DescribeClusterResponse)
			if resp.ErrorCode != tt.wantCode {
				t.Fatalf("error code %d, want %d", resp.ErrorCode, tt.wantCode)
			}
			if tt.wantCode != 0 && (len(resp.Brokers) != 0 || resp.ErrorMessage == nil) {
				t.Fatalf("error answer has brokers %v / message %v; want no brokers and a message", resp.Brokers, resp.ErrorMessage)
			}
			// As Apache answers: an error answer is the response's defaults plus the error —
			// no cluster id, endpoint type 1, no controller.
			if tt.wantCode != 0 && (resp.ClusterID != "" || resp.EndpointType != 1 || resp.ControllerID != -1) {
				t.Fatalf("error answer carries cluster id %q, endpoint type %d, controller %d; want \"\", 1, -1",
					resp.ClusterID, resp.EndpointType, resp.ControllerID)
			}
			if tt.wantCode == 0 && (resp.ClusterID != testClusterID || resp.EndpointType != 1) {
				t.Fatalf("answer carries cluster id %q, endpoint type %d", resp.ClusterID, resp.EndpointType)
			}
			if tt.wantCode == 0 && len(resp.Brokers) != 2 {
				t.Fatalf("brokers %v, want 2", resp.Brokers)
			}
		})
	}
}

func TestDescribeClusterAuthorizedOperationsWhenRequested(t *testing.T) {
	tc := newTestCluster(t, 1)
	c := dialKafka(t, tc.addrs[0])
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeClusterAuthorizedOperations = true
	resp := roundTrip(t, c, req).(*kmsg.DescribeClusterResponse)
	if resp.ClusterAuthorizedOperations != clusterAuthorizedOps {
		t.Fatalf("ops %b, want %b", resp.ClusterAuthorizedOperations, clusterAuthorizedOps)
	}
}

func TestFindCoordinatorFollowsTheRuleAndHealth(t *testing.T) {
	tc := newTestCluster(t, 3)
	c := dialKafka(t, tc.addrs[0])
	groups := []string{"orders-app", "billing", "audit", "a", "foobar", ""}
	registered := []int32{0, 1, 2}

	check := func(t *testing.T, alive []int32) {
		t.Helper()
		for v := int16(0); v <= 4; v++ {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version = v
			var got []kmsg.FindCoordinatorResponseCoordinator
			if v >= 4 {
				req.CoordinatorKeys = groups
				got = roundTrip(t, c, req).(*kmsg.FindCoordinatorResponse).Coordinators
			} else {
				for _, g := range groups {
					req.CoordinatorKey = g
					r := roundTrip(t, c, req).(*kmsg.FindCoordinatorResponse)
					got = append(got, kmsg.FindCoordinatorResponseCoordinator{Key: g, NodeID: r.NodeID, Host: r.Host, Port: r.Port, ErrorCode: r.ErrorCode})
				}
			}
			for i, g := range groups {
				want, _ := coordinator.Pick(g, coordinator.DefaultPartitions, registered, alive)
				row := tc.rows[want]
				if got[i].ErrorCode != 0 || got[i].NodeID != want || got[i].Host != row.Host || got[i].Port != row.Port || got[i].Key != g {
					t.Fatalf("v%d group %q: got %+v, want broker %d at %s:%d", v, g, got[i], want, row.Host, row.Port)
				}
			}
		}
	}
	check(t, []int32{0, 1, 2})

	// Broker 1 starts draining: the groups it coordinated move, the others stay.
	tc.rows[1].Health = v1alpha1.BrokerDraining
	tc.publish(nil)
	check(t, []int32{0, 2})

	// A real client follows the same answer.
	cl := newKgo(t, tc.addrs[2])
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = "billing"
	resp, err := req.RequestWith(testkit.Context(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := coordinator.Pick("billing", coordinator.DefaultPartitions, registered, []int32{0, 2})
	if resp.NodeID != want && (len(resp.Coordinators) == 0 || resp.Coordinators[0].NodeID != want) {
		t.Fatalf("kgo FindCoordinator %+v, want broker %d", resp, want)
	}
}

func TestFindCoordinatorErrors(t *testing.T) {
	tc := newTestCluster(t, 2)
	c := dialKafka(t, tc.addrs[0])
	for _, tt := range []struct {
		name     string
		keyType  int8
		wantCode int16
	}{
		{"unknown key types are INVALID_REQUEST", 5, kerr.InvalidRequest.Code},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version, req.CoordinatorType, req.CoordinatorKeys = 4, tt.keyType, []string{"x", "y"}
			resp := roundTrip(t, c, req).(*kmsg.FindCoordinatorResponse)
			for _, co := range resp.Coordinators {
				if co.ErrorCode != tt.wantCode || co.NodeID != -1 {
					t.Fatalf("coordinator %+v, want code %d node -1", co, tt.wantCode)
				}
			}
			if len(resp.Coordinators) != 2 {
				t.Fatalf("%d coordinators, want 2", len(resp.Coordinators))
			}
		})
	}
	t.Run("nothing alive is COORDINATOR_NOT_AVAILABLE", func(t *testing.T) {
		for i := range tc.rows {
			tc.rows[i].Health = v1alpha1.BrokerDead
		}
		tc.publish(nil)
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey = 3, "g"
		resp := roundTrip(t, c, req).(*kmsg.FindCoordinatorResponse)
		if resp.ErrorCode != kerr.CoordinatorNotAvailable.Code || resp.NodeID != -1 {
			t.Fatalf("resp %+v, want COORDINATOR_NOT_AVAILABLE", resp)
		}
	})
}

func TestApiVersionsAdvertisesExactlyTheHandlerTable(t *testing.T) {
	tc := newTestCluster(t, 1)
	c := dialKafka(t, tc.addrs[0])
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	resp := roundTrip(t, c, req).(*kmsg.ApiVersionsResponse)
	type kr struct{ key, min, max int16 }
	var got []kr
	for _, k := range resp.ApiKeys {
		got = append(got, kr{k.ApiKey, k.MinVersion, k.MaxVersion})
	}
	// Apache 3.7's ranges (docs/wire.md, "Keys and versions") for every key served;
	// DescribeCluster goes to v2 and Metadata to 13 (Apache 4.0's), DescribeTopicPartitions
	// is Apache 3.8's, Produce starts at 3 and Fetch at 4 (record batches v2 only:
	// docs/dataplane.md, "Record batch v2").
	// The group APIs (8, 9, 11–16, 28, 42, 47, 68, 69) are broker/groups' ranges, Apache 3.7's
	// but for Apache 4.0's consumer protocol (68, 69) and ListGroups v5; ApiVersions is 4.0's.
	// The SASL keys (17, 36) are served on every listener (a listener without SASL answers
	// SaslHandshake with ILLEGAL_SASL_STATE).
	want := []kr{{0, 3, 10}, {1, 4, 16}, {2, 0, 8}, {3, 0, 13}, {8, 0, 9}, {9, 0, 9}, {10, 0, 4}, {11, 0, 9}, {12, 0, 4}, {13, 0, 5},
		{14, 0, 5}, {15, 0, 5}, {16, 0, 5}, {17, 0, 1}, {18, 0, 4}, {19, 0, 7}, {20, 0, 6}, {21, 0, 2}, {22, 0, 4}, {23, 0, 4}, {24, 0, 4}, {25, 0, 3}, {26, 0, 3}, {27, 0, 1}, {28, 0, 3}, {29, 0, 3}, {30, 0, 3}, {31, 0, 3}, {32, 0, 4}, {33, 0, 2},
		{35, 0, 4}, {36, 0, 2}, {37, 0, 3}, {42, 0, 2}, {44, 0, 1}, {47, 0, 0}, {48, 0, 1}, {49, 0, 1}, {50, 0, 0}, {51, 0, 0}, {60, 0, 2}, {61, 0, 0}, {65, 0, 0}, {66, 0, 0}, {68, 0, 1}, {69, 0, 1}, {75, 0, 0}}
	if !slices.Equal(got, want) || resp.ErrorCode != 0 {
		t.Fatalf("api keys %v (error %d), want %v", got, resp.ErrorCode, want)
	}
}

// group.version is finalized at 1 so clients that check it use the consumer protocol;
// SupportedFeatures lists it (minimum level 0) only from v4, as Apache 4.0 does.
func TestApiVersionsAdvertisesTheGroupVersionFeature(t *testing.T) {
	tc := newTestCluster(t, 1)
	c := dialKafka(t, tc.addrs[0])
	for _, v := range []int16{3, 4} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		resp := roundTrip(t, c, req).(*kmsg.ApiVersionsResponse)
		if len(resp.FinalizedFeatures) != 1 || resp.FinalizedFeatures[0].Name != "group.version" || resp.FinalizedFeatures[0].MaxVersionLevel != 1 ||
			resp.FinalizedFeaturesEpoch < 0 {
			t.Fatalf("v%d finalized features %+v (epoch %d), want group.version 1", v, resp.FinalizedFeatures, resp.FinalizedFeaturesEpoch)
		}
		wantSupported := 0
		if v == 4 {
			wantSupported = 1
		}
		if len(resp.SupportedFeatures) != wantSupported || v == 4 && (resp.SupportedFeatures[0].MinVersion != 0 || resp.SupportedFeatures[0].MaxVersion != 1) {
			t.Fatalf("v%d supported features %+v", v, resp.SupportedFeatures)
		}
	}
}

func TestApiVersionsAboveMaxAnswersV0UnsupportedVersion(t *testing.T) {
	tc := newTestCluster(t, 1)
	c := dialKafka(t, tc.addrs[0])
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 5
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	if _, err := c.Write(appendRequestFrame(nil, req, 41)); err != nil {
		t.Fatal(err)
	}
	body, err := readResponseFrame(c, 41)
	if err != nil {
		t.Fatal(err)
	}
	v0 := kmsg.NewPtrApiVersionsResponse() // Version 0: the body must decode as v0
	if err := v0.ReadFrom(body); err != nil {
		t.Fatalf("answer is not a v0 ApiVersions body: %v", err)
	}
	if v0.ErrorCode != kerr.UnsupportedVersion.Code || len(v0.ApiKeys) != 1 ||
		v0.ApiKeys[0].ApiKey != 18 || v0.ApiKeys[0].MinVersion != 0 || v0.ApiKeys[0].MaxVersion != 4 {
		t.Fatalf("answer %+v, want UNSUPPORTED_VERSION with key 18 0-4", v0)
	}
	// The client retries lower on the same connection.
	req.Version = 4
	if resp := roundTrip(t, c, req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("v3 retry: %+v", resp)
	}
}

// Every broker is listed at the address it advertises on the listener the request came in
// on, not only the answering one: here the second listener advertises pod IPs (the loopback
// address the test can dial) while the first advertises pod DNS names.
func TestAnswersGiveEveryBrokerTheAddressOfTheRequestsListener(t *testing.T) {
	podDNS := testListener{name: "internal", host: func(i int) string {
		return "c-broker-" + strconv.Itoa(i) + ".c-brokers.kafka.svc.cluster.local"
	}}
	podIP := testListener{name: "external"}
	tc := newTestClusterWith(t, 3, podDNS, podIP)
	want := func(l, id int) (string, int32) {
		a := tc.rows[id].Listeners[l]
		return a.Host, a.Port
	}
	checkAt := func(t *testing.T, l int, got []endpoint) {
		t.Helper()
		if len(got) != 3 {
			t.Fatalf("brokers %+v, want 3", got)
		}
		for _, b := range got {
			if host, port := want(l, int(b.id)); b.host != host || b.port != port {
				t.Errorf("broker %d at %s:%d, want %s:%d", b.id, b.host, b.port, host, port)
			}
		}
	}
	for l, name := range []string{"internal", "external"} {
		c := dialKafka(t, tc.listenerAddrs[l][0])
		t.Run(name+": Metadata", func(t *testing.T) {
			resp := roundTrip(t, c, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
			var got []endpoint
			for _, b := range resp.Brokers {
				got = append(got, endpoint{id: b.NodeID, host: b.Host, port: b.Port})
			}
			checkAt(t, l, got)
		})
		t.Run(name+": DescribeCluster", func(t *testing.T) {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.IncludeFencedBrokers = true
			resp := roundTrip(t, c, req).(*kmsg.DescribeClusterResponse)
			var got []endpoint
			for _, b := range resp.Brokers {
				got = append(got, endpoint{id: b.NodeID, host: b.Host, port: b.Port})
			}
			checkAt(t, l, got)
		})
		t.Run(name+": FindCoordinator", func(t *testing.T) {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version = 4
			for g := range 30 {
				req.CoordinatorKeys = append(req.CoordinatorKeys, "group-"+strconv.Itoa(g))
			}
			resp := roundTrip(t, c, req).(*kmsg.FindCoordinatorResponse)
			seen := map[int32]bool{}
			for _, co := range resp.Coordinators {
				seen[co.NodeID] = true
				if host, port := want(l, int(co.NodeID)); co.ErrorCode != 0 || co.Host != host || co.Port != port {
					t.Errorf("group %s: broker %d at %s:%d (code %d), want %s:%d", co.Key, co.NodeID, co.Host, co.Port, co.ErrorCode, host, port)
				}
			}
			if len(seen) < 2 {
				t.Fatalf("30 groups all on %v: the test does not reach another broker", seen)
			}
		})
	}
}

// A broker the registry has no address for on this listener (it heartbeats, but its address
// is not known yet) is left out of Metadata and DescribeCluster, and FindCoordinator answers
// COORDINATOR_NOT_AVAILABLE for its groups rather than name a broker nobody can reach.
func TestBrokerWithoutAnAddressIsNeverAdvertised(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.rows[2].Listeners, tc.rows[2].Host, tc.rows[2].Port = nil, "", 0
	tc.publish(nil)
	c := dialKafka(t, tc.addrs[0])

	meta := roundTrip(t, c, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	if got := metadataBrokerIDs(meta); !slices.Equal(got, []int32{0, 1}) {
		t.Errorf("Metadata brokers %v, want [0 1]", got)
	}
	dreq := kmsg.NewPtrDescribeClusterRequest()
	dreq.IncludeFencedBrokers = true
	if ids, _ := describeClusterIDs(roundTrip(t, c, dreq).(*kmsg.DescribeClusterResponse)); !slices.Equal(ids, []int32{0, 1}) {
		t.Errorf("DescribeCluster brokers %v, want [0 1]", ids)
	}

	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 4
	for g := range 60 {
		req.CoordinatorKeys = append(req.CoordinatorKeys, "group-"+strconv.Itoa(g))
	}
	resp := roundTrip(t, c, req).(*kmsg.FindCoordinatorResponse)
	onTwo := 0
	for _, co := range resp.Coordinators {
		want, _ := coordinator.Pick(co.Key, coordinator.DefaultPartitions, []int32{0, 1, 2}, []int32{0, 1, 2})
		switch {
		case want == 2:
			onTwo++
			if co.ErrorCode != kerr.CoordinatorNotAvailable.Code || co.NodeID != -1 || co.Host != "" {
				t.Errorf("group %s of the address-less broker: %+v, want COORDINATOR_NOT_AVAILABLE", co.Key, co)
			}
		case co.ErrorCode != 0 || co.NodeID != want:
			t.Errorf("group %s: %+v, want broker %d", co.Key, co, want)
		}
	}
	if onTwo == 0 {
		t.Fatal("no group of 60 lives on broker 2: the test does not reach the rule")
	}
}

// A broker without a group coordinator (no data directory) answers every group API as
// broker/groups does before its first view — COORDINATOR_NOT_AVAILABLE, so a client looks
// for the coordinator again — on one connection that stays open throughout.
func TestGroupAPIsWithoutACoordinatorAnswerCoordinatorNotAvailable(t *testing.T) {
	tc := newTestCluster(t, 1)
	tc.publish([]cluster.Topic{{Name: "t", Partitions: []cluster.Partition{{Index: 0, Leader: 0}}}})
	c := dialKafka(t, tc.addrs[0])
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group = 8, "g"
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType, join.SessionTimeoutMillis = 9, "g", "consumer", 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	for _, tt := range []struct {
		req  kmsg.Request
		code func(kmsg.Response) int16
	}{
		{join, func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }},
		{&kmsg.SyncGroupRequest{Version: 5, Group: "g", ProtocolType: strptr("consumer"), Protocol: strptr("range")},
			func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode }},
		{&kmsg.HeartbeatRequest{Version: 4, Group: "g"}, func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode }},
		{&kmsg.LeaveGroupRequest{Version: 5, Group: "g"}, func(r kmsg.Response) int16 { return r.(*kmsg.LeaveGroupResponse).ErrorCode }},
		{commit, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode }},
		{&kmsg.OffsetFetchRequest{Version: 8, Groups: []kmsg.OffsetFetchRequestGroup{{Group: "g"}}},
			func(r kmsg.Response) int16 { return r.(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode }},
		{&kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"g"}},
			func(r kmsg.Response) int16 { return r.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode }},
		{&kmsg.ListGroupsRequest{Version: 4}, func(r kmsg.Response) int16 { return r.(*kmsg.ListGroupsResponse).ErrorCode }},
		{&kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"g"}},
			func(r kmsg.Response) int16 { return r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode }},
		{&kmsg.OffsetDeleteRequest{Version: 0, Group: "g"}, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetDeleteResponse).ErrorCode }},
	} {
		if got := tt.code(roundTrip(t, c, tt.req)); got != kerr.CoordinatorNotAvailable.Code {
			t.Errorf("%s: error %d, want COORDINATOR_NOT_AVAILABLE", kmsg.NameForKey(tt.req.Key()), got)
		}
	}
}
