package broker

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/internal/recordbatch"
	"github.com/paddock-dev/paddock/internal/acl"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// aclBroker is a running Broker with one listener without authentication (every client is
// User:ANONYMOUS), spec.authorization set (or not), topics "t" (led here, with a KafkaTopic)
// and "d" (a KafkaTopic to delete), its admin writes going to a fake API server, and
// User:ANONYMOUS's ACLs set by the test.
type aclBroker struct {
	addr  string
	rules []v1alpha1.ACLRule // User:ANONYMOUS's, as last granted
	sec   *cluster.MemorySecurity
	kube  client.Client
	view  *cluster.MemoryView
	snap  cluster.Snapshot // the view's state, as last set
}

var (
	aclTopicT = cluster.Topic{Name: "t", ID: [16]byte{7}, Object: "c.t", UID: "uid-t", Generation: 1,
		Partitions: []cluster.Partition{{Index: 0, Leader: 0, LeaderEpoch: 1}}}
	aclTopicD = cluster.Topic{Name: "d", ID: [16]byte{8}, Object: "c.d", UID: "uid-d", Generation: 1,
		Partitions: []cluster.Partition{{Index: 0, Leader: 0, LeaderEpoch: 1}}}
)

func startACLBroker(t *testing.T, authorization bool) *aclBroker {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var objects []client.Object
	for _, tp := range []cluster.Topic{aclTopicT, aclTopicD} {
		kt := &v1alpha1.KafkaTopic{}
		kt.Name, kt.Namespace, kt.UID, kt.Generation = tp.Object, "kafka", types.UID(tp.UID), 1
		kt.Spec.Cluster, kt.Spec.TopicName, kt.Spec.Partitions = "c", tp.Name, 1
		objects = append(objects, kt)
	}
	ab := &aclBroker{sec: &cluster.MemorySecurity{}, kube: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...).Build()}
	ab.sec.Set(cluster.SecuritySnapshot{Users: map[string]cluster.User{}})
	cfg := Config{
		Cluster: "c", Listeners: []cluster.ListenerSpec{{Name: "plain", Port: 0, Host: "127.0.0.1", Type: v1alpha1.ListenerInternal}},
		HealthPort: testkit.FreePort(t), BindAddress: "127.0.0.1", DataDir: t.TempDir(), DrainTimeout: time.Second,
		Identity: cluster.Identity{ID: 0, Pod: "c-broker-0", UID: "u0", Namespace: "kafka"},
	}
	snap := cluster.Snapshot{ClusterID: testClusterID, Topics: []cluster.Topic{aclTopicD, aclTopicT}, Authorization: authorization,
		CoordinatorEpoch: 1, CoordinatorBrokers: &v1alpha1.CoordinatorBrokers{Registered: []int32{0}, Alive: []int32{0}}}
	view := cluster.NewMemoryView(snap)
	b := NewBroker(cfg, view, testr.New(t))
	b.Security, b.Admin = ab.sec, &cluster.Admin{Client: ab.kube, Namespace: "kafka", Cluster: "c"}
	listening := make(chan struct{})
	b.OnListening = func(kafka []net.Addr, _ net.Addr) { ab.addr = kafka[0].String(); close(listening) }
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() { result <- b.Run(ctx, make(chan os.Signal)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-result; !errors.Is(err, context.Canceled) {
			t.Errorf("broker stopped with %v, want the context's cancellation", err)
		}
	})
	select {
	case <-listening:
	case err := <-result:
		t.Fatalf("broker stopped at start: %v", err)
	}
	_, port, _ := net.SplitHostPort(ab.addr)
	snap.Brokers = []v1alpha1.BrokerRow{{ID: 0, State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive,
		Listeners: []v1alpha1.ListenerAddress{{Name: "plain", Host: "127.0.0.1", Port: int32(atoiOrZero(port))}}}}
	view.Set(snap)
	ab.view, ab.snap = view, snap
	testkit.Eventually(t, "the partitions taken over", b.CaughtUp)
	// The coordinator loads its offsets partitions: wait until a commit goes through.
	ab.asSuper(func() {
		testkit.Eventually(t, "the group coordinator serving", func() bool {
			return ab.commit(t, "warmup") == 0
		})
	})
	return ab
}

// grant sets User:ANONYMOUS's ACLs (none: nil).
func (ab *aclBroker) grant(rules ...v1alpha1.ACLRule) {
	ab.rules = rules
	ab.set(rules)
}

func (ab *aclBroker) set(rules []v1alpha1.ACLRule) {
	ab.sec.Set(cluster.SecuritySnapshot{Users: map[string]cluster.User{
		anonymous: {Name: "anonymous", Principal: anonymous, ACLs: rules},
	}})
}

// everyone sets the KafkaCluster's spec.authorization.acls: the rules of User:*.
func (ab *aclBroker) everyone(rules ...v1alpha1.ACLRule) {
	ab.snap.EveryoneACLs = rules
	ab.view.Set(ab.snap)
}

// asSuper runs f with User:ANONYMOUS allowed everything (to set up or look at the state a
// refused request must not change), then puts the granted rules back.
func (ab *aclBroker) asSuper(f func()) {
	ab.set([]v1alpha1.ACLRule{allow(v1alpha1.ACLTopic, "*", acl.OpAll), allow(v1alpha1.ACLGroup, "*", acl.OpAll),
		allow(v1alpha1.ACLCluster, "", acl.OpAll), allow(v1alpha1.ACLTransactionalID, "*", acl.OpAll)})
	defer ab.set(ab.rules)
	f()
}

// request sends req on a new connection and returns the answer.
func (ab *aclBroker) request(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	return roundTrip(t, dialKafka(t, ab.addr), req)
}

// commit commits offset 1 of t/0 for group as a simple consumer; its partition's code.
func (ab *aclBroker) commit(t *testing.T, group string) int16 {
	req := latest(kmsg.NewPtrOffsetCommitRequest())
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return ab.request(t, req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// txnCommit sends a TxnOffsetCommit of t/0 for group under transactional id "tx"; its
// partition's code.
func (ab *aclBroker) txnCommit(t *testing.T, group string) int16 {
	req := latest(kmsg.NewPtrTxnOffsetCommitRequest())
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "tx", group, 7, 0, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return ab.request(t, req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// noPendingOffset fails t when group has a pending transactional offset of t/0 (an
// OffsetFetch with require_stable, as a super user).
func (ab *aclBroker) noPendingOffset(t *testing.T, group string) {
	ab.asSuper(func() {
		req := latest(kmsg.NewPtrOffsetFetchRequest())
		req.RequireStable = true
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = group
		g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
		req.Groups = append(req.Groups, g)
		resp := ab.request(t, req).(*kmsg.OffsetFetchResponse)
		if code := resp.Groups[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Errorf("the refused TxnOffsetCommit left a pending offset: %s", kerr.ErrorForCode(code))
		}
	})
}

// committed is group's committed offset of t/0 (-1: none), read as a super user.
func (ab *aclBroker) committed(t *testing.T, group string) int64 {
	var off int64 = -1
	ab.asSuper(func() {
		req := latest(kmsg.NewPtrOffsetFetchRequest())
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = group
		req.Groups = append(req.Groups, g)
		resp := ab.request(t, req).(*kmsg.OffsetFetchResponse)
		for _, tp := range resp.Groups[0].Topics {
			if tp.Topic == "t" {
				off = tp.Partitions[0].Offset
			}
		}
	})
	return off
}

// endOffsets are t/0's log start and end offsets, read as a super user.
func (ab *aclBroker) endOffsets(t *testing.T) (start, end int64) {
	ab.asSuper(func() {
		for i, ts := range []int64{-2, -1} {
			req := latest(kmsg.NewPtrListOffsetsRequest())
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = ts
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			off := ab.request(t, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset
			if i == 0 {
				start = off
			} else {
				end = off
			}
		}
	})
	return start, end
}

// kafkaTopic is the KafkaTopic object name in the fake API server (nil: none).
func (ab *aclBroker) kafkaTopic(t *testing.T, name string) *v1alpha1.KafkaTopic {
	t.Helper()
	kt := &v1alpha1.KafkaTopic{}
	if err := ab.kube.Get(context.Background(), client.ObjectKey{Namespace: "kafka", Name: name}, kt); err != nil {
		return nil
	}
	return kt
}

// kafkaUser is KafkaUser name in the fake API server (nil: none).
func (ab *aclBroker) kafkaUser(t *testing.T, name string) *v1alpha1.KafkaUser {
	t.Helper()
	u := &v1alpha1.KafkaUser{}
	if err := ab.kube.Get(context.Background(), client.ObjectKey{Namespace: "kafka", Name: name}, u); err != nil {
		return nil
	}
	return u
}

// ensureUser makes KafkaUser name of cluster c in the fake API server have exactly rules.
func (ab *aclBroker) ensureUser(t *testing.T, name string, rules ...v1alpha1.ACLRule) {
	t.Helper()
	ab.ensureUserOf(t, name, "c", rules...)
}

// ensureUserOf is ensureUser for a KafkaUser of cluster.
func (ab *aclBroker) ensureUserOf(t *testing.T, name, cluster string, rules ...v1alpha1.ACLRule) {
	t.Helper()
	u := ab.kafkaUser(t, name)
	if u == nil {
		u = &v1alpha1.KafkaUser{}
		u.Name, u.Namespace, u.Spec.Cluster = name, "kafka", cluster
		if rules != nil {
			u.Spec.Authorization = &v1alpha1.UserAuthorization{ACLs: rules}
		}
		if err := ab.kube.Create(context.Background(), u); err != nil {
			t.Fatal(err)
		}
		return
	}
	u.Spec.Authorization = &v1alpha1.UserAuthorization{ACLs: rules}
	if err := ab.kube.Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

// createACL asks CreateAcls for one literal ALLOW of op on the resource for principal, from
// any host; the result's code.
func createACL(t *testing.T, ab *aclBroker, principal string, typ kmsg.ACLResourceType, name string, op kmsg.ACLOperation) int16 {
	req := latest(kmsg.NewPtrCreateACLsRequest())
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = typ, name, kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, c)
	return ab.request(t, req).(*kmsg.CreateACLsResponse).Results[0].ErrorCode
}

func allow(typ v1alpha1.ACLResourceType, name string, ops ...v1alpha1.ACLOperation) v1alpha1.ACLRule {
	return v1alpha1.ACLRule{Type: v1alpha1.ACLAllow, Resource: v1alpha1.ACLResource{Type: typ, Name: name, PatternType: v1alpha1.ACLLiteral}, Operations: ops, Host: "*"}
}

// latest sets req to the newest version the broker serves.
func latest[R kmsg.Request](req R) R {
	req.SetVersion(apis[req.Key()].max)
	return req
}

// aclCase is one row of the matrix: a request of key, sent with base granted (what reaching
// the check needs) and then with base and needs; the first must answer refused where Apache
// puts it and change nothing (unchanged), the second must not be refused.
type aclCase struct {
	name      string
	key       int16
	base      []v1alpha1.ACLRule
	needs     []v1alpha1.ACLRule
	refused   int16
	send      func(t *testing.T, ab *aclBroker) int16
	unchanged func(t *testing.T, ab *aclBroker)
}

func topicRule(op v1alpha1.ACLOperation) []v1alpha1.ACLRule {
	return []v1alpha1.ACLRule{allow(v1alpha1.ACLTopic, "t", op)}
}
func groupRule(group string, op v1alpha1.ACLOperation) []v1alpha1.ACLRule {
	return []v1alpha1.ACLRule{allow(v1alpha1.ACLGroup, group, op)}
}
func clusterRule(op v1alpha1.ACLOperation) []v1alpha1.ACLRule {
	return []v1alpha1.ACLRule{allow(v1alpha1.ACLCluster, "", op)}
}

var (
	topicAuth   = kerr.TopicAuthorizationFailed.Code
	groupAuth   = kerr.GroupAuthorizationFailed.Code
	clusterAuth = kerr.ClusterAuthorizationFailed.Code
	txnAuth     = kerr.TransactionalIDAuthorizationFailed.Code
)

func aclMatrix() []aclCase {
	return []aclCase{
		{name: "Produce needs WRITE on the topic", key: 0, needs: topicRule(acl.OpWrite), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrProduceRequest())
				req.Acks, req.TimeoutMillis = -1, 5000
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = "t"
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Records = recordbatch.Plain([]byte("v")).Bytes()
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return ab.request(t, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
			},
			unchanged: func(t *testing.T, ab *aclBroker) {
				if _, end := ab.endOffsets(t); end != 0 {
					t.Errorf("the refused produce was written: end offset %d", end)
				}
			}},
		{name: "Fetch needs READ on the topic", key: 1, needs: topicRule(acl.OpRead), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrFetchRequest())
				req.MaxBytes, req.MaxWaitMillis = 1<<20, 0
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = "t", aclTopicT.ID
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.PartitionMaxBytes = 1 << 20
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return ab.request(t, req).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
			}},
		{name: "ListOffsets needs DESCRIBE on the topic", key: 2, needs: topicRule(acl.OpDescribe), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrListOffsetsRequest())
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = "t"
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Timestamp = -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return ab.request(t, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
			}},
		{name: "Metadata of a named topic needs DESCRIBE on it", key: 3, needs: topicRule(acl.OpDescribe), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrMetadataRequest())
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = strptr("t")
				req.Topics = append(req.Topics, rt)
				mt := ab.request(t, req).(*kmsg.MetadataResponse).Topics[0]
				if mt.ErrorCode == topicAuth && (mt.TopicID != [16]byte{} || len(mt.Partitions) != 0) {
					t.Errorf("refused topic disclosed: id %x, %d partitions", mt.TopicID, len(mt.Partitions))
				}
				return mt.ErrorCode
			}},
		{name: "Metadata auto-creation needs CREATE on the cluster", key: 3,
			base: []v1alpha1.ACLRule{allow(v1alpha1.ACLTopic, "auto", acl.OpDescribe)}, needs: clusterRule(acl.OpCreate), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrMetadataRequest())
				req.AllowAutoTopicCreation = true
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = strptr("auto")
				req.Topics = append(req.Topics, rt)
				return ab.request(t, req).(*kmsg.MetadataResponse).Topics[0].ErrorCode
			},
			unchanged: func(t *testing.T, ab *aclBroker) {
				time.Sleep(100 * time.Millisecond) // an auto-creation runs in the background
				if ab.kafkaTopic(t, "c.auto") != nil {
					t.Error("the refused auto-creation created the topic")
				}
			}},
		{name: "OffsetCommit needs READ on the group", key: 8, base: topicRule(acl.OpRead), needs: groupRule("g1", acl.OpRead), refused: groupAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return ab.commit(t, "g1") },
			unchanged: func(t *testing.T, ab *aclBroker) {
				if off := ab.committed(t, "g1"); off != -1 {
					t.Errorf("the refused commit was committed: offset %d", off)
				}
			}},
		{name: "OffsetCommit needs READ on the topic", key: 8, base: groupRule("g2", acl.OpRead), needs: topicRule(acl.OpRead), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return ab.commit(t, "g2") },
			unchanged: func(t *testing.T, ab *aclBroker) {
				if off := ab.committed(t, "g2"); off != -1 {
					t.Errorf("the refused commit was committed: offset %d", off)
				}
			}},
		{name: "TxnOffsetCommit needs WRITE on the transactional id", key: 28,
			base: append(topicRule(acl.OpRead), groupRule("tg1", acl.OpRead)...), needs: []v1alpha1.ACLRule{allow(v1alpha1.ACLTransactionalID, "tx", acl.OpWrite)},
			refused: txnAuth, send: func(t *testing.T, ab *aclBroker) int16 { return ab.txnCommit(t, "tg1") },
			unchanged: func(t *testing.T, ab *aclBroker) { ab.noPendingOffset(t, "tg1") }},
		{name: "TxnOffsetCommit needs READ on the group", key: 28,
			base: append(topicRule(acl.OpRead), allow(v1alpha1.ACLTransactionalID, "tx", acl.OpWrite)), needs: groupRule("tg2", acl.OpRead),
			refused: groupAuth, send: func(t *testing.T, ab *aclBroker) int16 { return ab.txnCommit(t, "tg2") },
			unchanged: func(t *testing.T, ab *aclBroker) { ab.noPendingOffset(t, "tg2") }},
		{name: "TxnOffsetCommit needs READ on the topic", key: 28,
			base: append(groupRule("tg3", acl.OpRead), allow(v1alpha1.ACLTransactionalID, "tx", acl.OpWrite)), needs: topicRule(acl.OpRead),
			refused: topicAuth, send: func(t *testing.T, ab *aclBroker) int16 { return ab.txnCommit(t, "tg3") },
			unchanged: func(t *testing.T, ab *aclBroker) { ab.noPendingOffset(t, "tg3") }},
		{name: "OffsetFetch needs DESCRIBE on the group", key: 9, base: topicRule(acl.OpDescribe), needs: groupRule("warmup", acl.OpDescribe), refused: groupAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return offsetFetch(t, ab, "warmup", true) }},
		{name: "OffsetFetch needs DESCRIBE on the topic", key: 9, base: groupRule("warmup", acl.OpDescribe), needs: topicRule(acl.OpDescribe), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return offsetFetch(t, ab, "warmup", false) }},
		{name: "FindCoordinator needs DESCRIBE on the group", key: 10, needs: groupRule("g", acl.OpDescribe), refused: groupAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrFindCoordinatorRequest())
				req.CoordinatorKeys = []string{"g"}
				return ab.request(t, req).(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode
			}},
		{name: "FindCoordinator needs DESCRIBE on the transactional id", key: 10, needs: []v1alpha1.ACLRule{allow(v1alpha1.ACLTransactionalID, "tx", acl.OpDescribe)}, refused: txnAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrFindCoordinatorRequest())
				req.CoordinatorKeys, req.CoordinatorType = []string{"tx"}, coordinatorTypeTransaction
				return ab.request(t, req).(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode
			}},
		{name: "JoinGroup needs READ on the group", key: 11, needs: groupRule("j", acl.OpRead), refused: groupAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrJoinGroupRequest())
				req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = "j", 10000, 10000, "consumer"
				p := kmsg.NewJoinGroupRequestProtocol()
				p.Name, p.Metadata = "range", []byte{}
				req.Protocols = append(req.Protocols, p)
				return ab.request(t, req).(*kmsg.JoinGroupResponse).ErrorCode
			},
			unchanged: func(t *testing.T, ab *aclBroker) {
				if groupListed(t, ab, "j") {
					t.Error("the refused join made the group")
				}
			}},
		{name: "Heartbeat needs READ on the group", key: 12, needs: groupRule("g", acl.OpRead), refused: groupAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrHeartbeatRequest())
				req.Group, req.Generation, req.MemberID = "g", 1, "m"
				return ab.request(t, req).(*kmsg.HeartbeatResponse).ErrorCode
			}},
		{name: "LeaveGroup needs READ on the group", key: 13, needs: groupRule("g", acl.OpRead), refused: groupAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrLeaveGroupRequest())
				req.Group = "g"
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID = "m"
				req.Members = append(req.Members, m)
				return ab.request(t, req).(*kmsg.LeaveGroupResponse).ErrorCode
			}},
		{name: "SyncGroup needs READ on the group", key: 14, needs: groupRule("g", acl.OpRead), refused: groupAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrSyncGroupRequest())
				req.Group, req.Generation, req.MemberID, req.ProtocolType, req.Protocol = "g", 1, "m", strptr("consumer"), strptr("range")
				return ab.request(t, req).(*kmsg.SyncGroupResponse).ErrorCode
			}},
		{name: "DescribeGroups needs DESCRIBE on the group", key: 15, needs: groupRule("warmup", acl.OpDescribe), refused: groupAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrDescribeGroupsRequest())
				req.Groups = []string{"warmup"}
				return ab.request(t, req).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode
			}},
		{name: "ListGroups lists only the groups it may DESCRIBE", key: 16, needs: groupRule("warmup", acl.OpDescribe), refused: groupAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				if groupListed(t, ab, "warmup") {
					return 0
				}
				return groupAuth // not listed: the refusal ListGroups makes
			}},
		{name: "ListGroups lists every group with DESCRIBE on the cluster", key: 16, needs: clusterRule(acl.OpDescribe), refused: groupAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				if groupListed(t, ab, "warmup") {
					return 0
				}
				return groupAuth
			}},
		{name: "CreateTopics needs CREATE on the cluster", key: 19, needs: clusterRule(acl.OpCreate), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return createTopic(t, ab, "new1") },
			unchanged: func(t *testing.T, ab *aclBroker) {
				if ab.kafkaTopic(t, "c.new1") != nil {
					t.Error("the refused create made the KafkaTopic")
				}
			}},
		{name: "CreateTopics needs CREATE on the topic (or the cluster)", key: 19, needs: []v1alpha1.ACLRule{allow(v1alpha1.ACLTopic, "new2", acl.OpCreate)}, refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return createTopic(t, ab, "new2") },
			unchanged: func(t *testing.T, ab *aclBroker) {
				if ab.kafkaTopic(t, "c.new2") != nil {
					t.Error("the refused create made the KafkaTopic")
				}
			}},
		{name: "DeleteTopics needs DELETE on the topic", key: 20, needs: []v1alpha1.ACLRule{allow(v1alpha1.ACLTopic, "d", acl.OpDelete)}, refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrDeleteTopicsRequest())
				req.TimeoutMillis = 100
				rt := kmsg.NewDeleteTopicsRequestTopic()
				rt.Topic = strptr("d")
				req.Topics = append(req.Topics, rt)
				return ab.request(t, req).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode
			},
			unchanged: func(t *testing.T, ab *aclBroker) {
				if ab.kafkaTopic(t, "c.d") == nil {
					t.Error("the refused delete deleted the KafkaTopic")
				}
			}},
		{name: "DeleteRecords needs DELETE on the topic", key: 21, needs: topicRule(acl.OpDelete), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrDeleteRecordsRequest())
				req.TimeoutMillis = 5000
				rt := kmsg.NewDeleteRecordsRequestTopic()
				rt.Topic = "t"
				rp := kmsg.NewDeleteRecordsRequestTopicPartition()
				rp.Offset = -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return ab.request(t, req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode
			},
			unchanged: func(t *testing.T, ab *aclBroker) {
				if start, _ := ab.endOffsets(t); start != 0 {
					t.Errorf("the refused delete moved the log start to %d", start)
				}
			}},
		{name: "InitProducerId without an id needs IDEMPOTENT_WRITE on the cluster", key: 22, needs: clusterRule(acl.OpIdempotentWrite), refused: clusterAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return initProducerID(t, ab, nil) }},
		{name: "InitProducerId without an id: or WRITE on some topic", key: 22, needs: []v1alpha1.ACLRule{allow(v1alpha1.ACLTopic, "any", acl.OpWrite)}, refused: clusterAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return initProducerID(t, ab, nil) }},
		{name: "InitProducerId with an id needs WRITE on it", key: 22, needs: []v1alpha1.ACLRule{allow(v1alpha1.ACLTransactionalID, "tx", acl.OpWrite)}, refused: txnAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return initProducerID(t, ab, strptr("tx")) }},
		{name: "OffsetForLeaderEpoch needs DESCRIBE on the topic", key: 23, needs: topicRule(acl.OpDescribe), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrOffsetForLeaderEpochRequest())
				req.ReplicaID = -1
				rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
				rt.Topic = "t"
				rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return ab.request(t, req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
			}},
		{name: "DescribeAcls needs DESCRIBE on the cluster", key: 29, needs: clusterRule(acl.OpDescribe), refused: clusterAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrDescribeACLsRequest())
				req.ResourceType, req.ResourcePatternType, req.Operation, req.PermissionType = 1, 1, 1, 1
				return ab.request(t, req).(*kmsg.DescribeACLsResponse).ErrorCode
			}},
		{name: "CreateAcls needs ALTER on the cluster", key: 30, needs: clusterRule(acl.OpAlter), refused: clusterAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				return createACL(t, ab, "User:alice", kmsg.ACLResourceTypeTopic, "t", kmsg.ACLOperationRead)
			},
			unchanged: func(t *testing.T, ab *aclBroker) {
				if u := ab.kafkaUser(t, "alice"); u != nil {
					t.Errorf("the refused CreateAcls wrote KafkaUser alice: %+v", u.Spec)
				}
			}},
		{name: "DeleteAcls needs ALTER on the cluster", key: 31, needs: clusterRule(acl.OpAlter), refused: clusterAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				ab.ensureUser(t, "bob", allow(v1alpha1.ACLTopic, "t", acl.OpRead))
				req := latest(kmsg.NewPtrDeleteACLsRequest())
				f := kmsg.NewDeleteACLsRequestFilter()
				f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				f.Principal = strptr("User:bob")
				req.Filters = append(req.Filters, f)
				return ab.request(t, req).(*kmsg.DeleteACLsResponse).Results[0].ErrorCode
			},
			unchanged: func(t *testing.T, ab *aclBroker) {
				if u := ab.kafkaUser(t, "bob"); u == nil || u.Spec.Authorization == nil || len(u.Spec.Authorization.ACLs) != 1 {
					t.Errorf("the refused DeleteAcls changed KafkaUser bob: %+v", u)
				}
			}},
		{name: "DescribeConfigs of a topic needs DESCRIBE_CONFIGS on it", key: 32, needs: topicRule(acl.OpDescribeConfigs), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				return describeConfigs(t, ab, kmsg.ConfigResourceTypeTopic, "t")
			}},
		{name: "DescribeConfigs of a broker needs DESCRIBE_CONFIGS on the cluster", key: 32, needs: clusterRule(acl.OpDescribeConfigs), refused: clusterAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				return describeConfigs(t, ab, kmsg.ConfigResourceTypeBroker, "0")
			}},
		{name: "AlterConfigs of a topic needs ALTER_CONFIGS on it", key: 33, needs: topicRule(acl.OpAlterConfigs), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrAlterConfigsRequest())
				r := kmsg.NewAlterConfigsRequestResource()
				r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
				c := kmsg.NewAlterConfigsRequestResourceConfig()
				c.Name, c.Value = "retention.ms", strptr("1000")
				r.Configs = append(r.Configs, c)
				req.Resources = append(req.Resources, r)
				return ab.request(t, req).(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode
			},
			unchanged: unchangedConfig("1000")},
		{name: "AlterConfigs of a broker needs ALTER_CONFIGS on the cluster", key: 33, needs: clusterRule(acl.OpAlterConfigs), refused: clusterAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrAlterConfigsRequest())
				r := kmsg.NewAlterConfigsRequestResource()
				r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
				req.Resources = append(req.Resources, r)
				return ab.request(t, req).(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode
			}},
		{name: "DescribeLogDirs needs DESCRIBE on the cluster", key: 35, needs: clusterRule(acl.OpDescribe), refused: clusterAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				resp := ab.request(t, latest(kmsg.NewPtrDescribeLogDirsRequest())).(*kmsg.DescribeLogDirsResponse)
				if resp.ErrorCode == clusterAuth && len(resp.Dirs) != 0 {
					t.Errorf("refused answer lists %d directories", len(resp.Dirs))
				}
				return resp.ErrorCode
			}},
		{name: "DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster", key: 48, needs: clusterRule(acl.OpDescribeConfigs), refused: clusterAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				return ab.request(t, latest(kmsg.NewPtrDescribeClientQuotasRequest())).(*kmsg.DescribeClientQuotasResponse).ErrorCode
			}},
		{name: "AlterClientQuotas needs ALTER_CONFIGS on the cluster", key: 49, needs: clusterRule(acl.OpAlterConfigs), refused: clusterAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrAlterClientQuotasRequest())
				req.Entries = append(req.Entries, quotaEntry(userEntity("quser"), quotaOp("producer_byte_rate", 1024, false)))
				return ab.request(t, req).(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode
			},
			unchanged: func(t *testing.T, ab *aclBroker) {
				if u := ab.kafkaUser(t, "quser"); u != nil {
					t.Errorf("the refused AlterClientQuotas wrote KafkaUser quser: %+v", u.Spec)
				}
			}},
		{name: "DescribeUserScramCredentials needs DESCRIBE on the cluster", key: 50, needs: clusterRule(acl.OpDescribe), refused: clusterAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				resp := ab.request(t, latest(kmsg.NewPtrDescribeUserSCRAMCredentialsRequest())).(*kmsg.DescribeUserSCRAMCredentialsResponse)
				if resp.ErrorCode == clusterAuth && len(resp.Results) != 0 {
					t.Errorf("refused answer lists %d users", len(resp.Results))
				}
				return resp.ErrorCode
			}},
		{name: "AlterUserScramCredentials needs ALTER on the cluster", key: 51, needs: clusterRule(acl.OpAlter), refused: clusterAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				return alterScram(t, ab, "sam", "sam-password", 4096).Results[0].ErrorCode
			},
			unchanged: func(t *testing.T, ab *aclBroker) {
				if u := ab.kafkaUser(t, "sam"); u != nil {
					t.Errorf("the refused AlterUserScramCredentials wrote KafkaUser sam: %+v", u.Spec)
				}
			}},
		{name: "CreatePartitions needs ALTER on the topic", key: 37, needs: topicRule(acl.OpAlter), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrCreatePartitionsRequest())
				req.TimeoutMillis = 100
				rt := kmsg.NewCreatePartitionsRequestTopic()
				rt.Topic, rt.Count = "t", 2
				req.Topics = append(req.Topics, rt)
				return ab.request(t, req).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode
			},
			unchanged: func(t *testing.T, ab *aclBroker) {
				if kt := ab.kafkaTopic(t, "c.t"); kt == nil || kt.Spec.Partitions != 1 {
					t.Errorf("the refused CreatePartitions changed the KafkaTopic: %+v", kt)
				}
			}},
		{name: "DeleteGroups needs DELETE on the group", key: 42, needs: groupRule("gd", acl.OpDelete), refused: groupAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				ab.asSuper(func() { ab.commit(t, "gd") })
				req := latest(kmsg.NewPtrDeleteGroupsRequest())
				req.Groups = []string{"gd"}
				return ab.request(t, req).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
			},
			unchanged: func(t *testing.T, ab *aclBroker) {
				if off := ab.committed(t, "gd"); off != 1 {
					t.Errorf("the refused DeleteGroups deleted the group's offsets (offset %d)", off)
				}
			}},
		{name: "IncrementalAlterConfigs of a topic needs ALTER_CONFIGS on it", key: 44, needs: topicRule(acl.OpAlterConfigs), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrIncrementalAlterConfigsRequest())
				r := kmsg.NewIncrementalAlterConfigsRequestResource()
				r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Value = "retention.ms", strptr("2000")
				r.Configs = append(r.Configs, c)
				req.Resources = append(req.Resources, r)
				return ab.request(t, req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
			},
			unchanged: unchangedConfig("2000")},
		{name: "OffsetDelete needs DELETE on the group", key: 47, base: topicRule(acl.OpRead), needs: groupRule("od1", acl.OpDelete), refused: groupAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return offsetDelete(t, ab, "od1", true) },
			unchanged: func(t *testing.T, ab *aclBroker) {
				if off := ab.committed(t, "od1"); off != 1 {
					t.Errorf("the refused OffsetDelete deleted the offset (offset %d)", off)
				}
			}},
		{name: "OffsetDelete needs READ on the topic", key: 47, base: groupRule("od2", acl.OpDelete), needs: topicRule(acl.OpRead), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return offsetDelete(t, ab, "od2", false) },
			unchanged: func(t *testing.T, ab *aclBroker) {
				if off := ab.committed(t, "od2"); off != 1 {
					t.Errorf("the refused OffsetDelete deleted the offset (offset %d)", off)
				}
			}},
		{name: "ConsumerGroupHeartbeat needs READ on the group", key: 68, base: topicRule(acl.OpDescribe), needs: groupRule("cg", acl.OpRead), refused: groupAuth,
			send: consumerHeartbeat},
		{name: "ConsumerGroupHeartbeat needs DESCRIBE on the subscribed topics", key: 68, base: groupRule("cg", acl.OpRead), needs: topicRule(acl.OpDescribe), refused: topicAuth,
			send: consumerHeartbeat},
		{name: "ConsumerGroupDescribe needs DESCRIBE on the group", key: 69, needs: groupRule("warmup", acl.OpDescribe), refused: groupAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrConsumerGroupDescribeRequest())
				req.Groups = []string{"warmup"}
				return ab.request(t, req).(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode
			}},
		{name: "DescribeTopicPartitions of a named topic needs DESCRIBE on it", key: 75, needs: topicRule(acl.OpDescribe), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrDescribeTopicPartitionsRequest())
				req.ResponsePartitionLimit = 100
				rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
				rt.Topic = "t"
				req.Topics = append(req.Topics, rt)
				return ab.request(t, req).(*kmsg.DescribeTopicPartitionsResponse).Topics[0].ErrorCode
			}},
		{name: "AddPartitionsToTxn v0-3 needs WRITE on the transactional id", key: 24, base: topicRule(acl.OpWrite),
			needs: []v1alpha1.ACLRule{allow(v1alpha1.ACLTransactionalID, "tx", acl.OpWrite)}, refused: txnAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return addPartitionsToTxn(t, ab, 3) }},
		{name: "AddPartitionsToTxn v0-3 needs WRITE on the topic", key: 24, base: []v1alpha1.ACLRule{allow(v1alpha1.ACLTransactionalID, "tx", acl.OpWrite)},
			needs: topicRule(acl.OpWrite), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return addPartitionsToTxn(t, ab, 3) }},
		{name: "AddPartitionsToTxn v4 needs CLUSTER_ACTION", key: 24, needs: clusterRule(acl.OpClusterAction), refused: clusterAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return addPartitionsToTxn(t, ab, 4) }},
		{name: "AddOffsetsToTxn needs WRITE on the transactional id", key: 25, base: groupRule("g", acl.OpRead),
			needs: []v1alpha1.ACLRule{allow(v1alpha1.ACLTransactionalID, "tx", acl.OpWrite)}, refused: txnAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return addOffsetsToTxn(t, ab) }},
		{name: "AddOffsetsToTxn needs READ on the group", key: 25, base: []v1alpha1.ACLRule{allow(v1alpha1.ACLTransactionalID, "tx", acl.OpWrite)},
			needs: groupRule("g", acl.OpRead), refused: groupAuth,
			send: func(t *testing.T, ab *aclBroker) int16 { return addOffsetsToTxn(t, ab) }},
		{name: "EndTxn needs WRITE on the transactional id", key: 26, needs: []v1alpha1.ACLRule{allow(v1alpha1.ACLTransactionalID, "tx", acl.OpWrite)}, refused: txnAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrEndTxnRequest())
				req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "tx", 1, 0, true
				return ab.request(t, req).(*kmsg.EndTxnResponse).ErrorCode
			}},
		{name: "WriteTxnMarkers needs CLUSTER_ACTION", key: 27, needs: clusterRule(acl.OpClusterAction), refused: clusterAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				_, markerEndBefore = ab.endOffsets(t)
				req := latest(kmsg.NewPtrWriteTxnMarkersRequest())
				m := kmsg.NewWriteTxnMarkersRequestMarker()
				m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = 424242, 0, false, 1
				mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				mt.Topic, mt.Partitions = "t", []int32{0}
				m.Topics = append(m.Topics, mt)
				req.Markers = append(req.Markers, m)
				return ab.request(t, req).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
			},
			unchanged: func(t *testing.T, ab *aclBroker) {
				if _, end := ab.endOffsets(t); end != markerEndBefore {
					t.Errorf("the refused marker was written: t/0 ends at %d, was %d", end, markerEndBefore)
				}
			}},
		{name: "DescribeProducers needs READ on the topic", key: 61, needs: topicRule(acl.OpRead), refused: topicAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrDescribeProducersRequest())
				rt := kmsg.NewDescribeProducersRequestTopic()
				rt.Topic, rt.Partitions = "t", []int32{0}
				req.Topics = append(req.Topics, rt)
				return ab.request(t, req).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
			}},
		{name: "DescribeTransactions needs DESCRIBE on the transactional id", key: 65, needs: []v1alpha1.ACLRule{allow(v1alpha1.ACLTransactionalID, "tx", acl.OpDescribe)}, refused: txnAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				req := latest(kmsg.NewPtrDescribeTransactionsRequest())
				req.TransactionalIDs = []string{"tx"}
				return ab.request(t, req).(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
			}},
		{name: "ListTransactions lists only ids with DESCRIBE", key: 66, needs: []v1alpha1.ACLRule{allow(v1alpha1.ACLTransactionalID, "listed", acl.OpDescribe)}, refused: txnAuth,
			send: func(t *testing.T, ab *aclBroker) int16 {
				ab.asSuper(func() {
					if code := initProducerID(t, ab, strptr("listed")); code != 0 {
						t.Fatalf("InitProducerId for listed: %d", code)
					}
				})
				req := latest(kmsg.NewPtrListTransactionsRequest())
				resp := ab.request(t, req).(*kmsg.ListTransactionsResponse)
				for _, st := range resp.TransactionStates {
					if st.TransactionalID == "listed" {
						return resp.ErrorCode
					}
				}
				return txnAuth // left out: what the row reads as refused
			}},
	}
}

// markerEndBefore is t/0's end offset before the WriteTxnMarkers row sends its marker.
var markerEndBefore int64

// addPartitionsToTxn asks to add t/0 to transactional id "tx" (producer 1 epoch 0) at
// version v (4: the brokers' batched form); the partition's code.
func addPartitionsToTxn(t *testing.T, ab *aclBroker, v int16) int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = v
	if v < 4 {
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = "tx", 1, 0
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = "t", []int32{0}
		req.Topics = append(req.Topics, rt)
		return ab.request(t, req).(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode
	}
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "tx", 1, 0, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = "t", []int32{0}
	tx.Topics = append(tx.Topics, tt)
	req.Transactions = append(req.Transactions, tx)
	return ab.request(t, req).(*kmsg.AddPartitionsToTxnResponse).ErrorCode
}

func addOffsetsToTxn(t *testing.T, ab *aclBroker) int16 {
	req := latest(kmsg.NewPtrAddOffsetsToTxnRequest())
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = "tx", 1, 0, "g"
	return ab.request(t, req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
}

// needNothing are the keys Apache serves to any principal; the matrix test asks each with no
// ACL at all.
var needNothing = map[int16]func(t *testing.T, ab *aclBroker) int16{
	17: func(t *testing.T, ab *aclBroker) int16 {
		req := latest(kmsg.NewPtrSASLHandshakeRequest())
		req.Mechanism = "PLAIN"
		return ab.request(t, req).(*kmsg.SASLHandshakeResponse).ErrorCode
	},
	18: func(t *testing.T, ab *aclBroker) int16 {
		return ab.request(t, latest(kmsg.NewPtrApiVersionsRequest())).(*kmsg.ApiVersionsResponse).ErrorCode
	},
	36: func(t *testing.T, ab *aclBroker) int16 {
		resp, err := tryRoundTrip(dialKafka(t, ab.addr), latest(kmsg.NewPtrSASLAuthenticateRequest()), 7)
		if err != nil {
			return 0 // closed: not an authorization refusal (no SASL on this listener)
		}
		return resp.(*kmsg.SASLAuthenticateResponse).ErrorCode
	},
	60: func(t *testing.T, ab *aclBroker) int16 {
		return ab.request(t, latest(kmsg.NewPtrDescribeClusterRequest())).(*kmsg.DescribeClusterResponse).ErrorCode
	},
}

func offsetFetch(t *testing.T, ab *aclBroker, group string, groupLevel bool) int16 {
	req := latest(kmsg.NewPtrOffsetFetchRequest())
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.Partitions = "t", []int32{0}
	g.Topics = append(g.Topics, gt)
	req.Groups = append(req.Groups, g)
	rg := ab.request(t, req).(*kmsg.OffsetFetchResponse).Groups[0]
	if groupLevel || rg.ErrorCode != 0 {
		return rg.ErrorCode
	}
	p := rg.Topics[0].Partitions[0]
	if p.ErrorCode == topicAuth && p.Offset != -1 {
		t.Errorf("refused partition discloses offset %d", p.Offset)
	}
	return p.ErrorCode
}

func groupListed(t *testing.T, ab *aclBroker, group string) bool {
	resp := ab.request(t, latest(kmsg.NewPtrListGroupsRequest())).(*kmsg.ListGroupsResponse)
	return slices.ContainsFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return g.Group == group })
}

func createTopic(t *testing.T, ab *aclBroker, name string) int16 {
	req := latest(kmsg.NewPtrCreateTopicsRequest())
	req.TimeoutMillis = 100
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
	req.Topics = append(req.Topics, rt)
	return ab.request(t, req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
}

func initProducerID(t *testing.T, ab *aclBroker, txn *string) int16 {
	req := latest(kmsg.NewPtrInitProducerIDRequest())
	req.TransactionalID, req.TransactionTimeoutMillis = txn, 60000
	resp := ab.request(t, req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 && resp.ProducerID != -1 {
		t.Errorf("refused InitProducerId handed out producer id %d", resp.ProducerID)
	}
	return resp.ErrorCode
}

func describeConfigs(t *testing.T, ab *aclBroker, typ kmsg.ConfigResourceType, name string) int16 {
	req := latest(kmsg.NewPtrDescribeConfigsRequest())
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	req.Resources = append(req.Resources, r)
	res := ab.request(t, req).(*kmsg.DescribeConfigsResponse).Resources[0]
	if res.ErrorCode != 0 && len(res.Configs) != 0 {
		t.Errorf("refused resource lists %d configs", len(res.Configs))
	}
	return res.ErrorCode
}

// unchangedConfig checks that t's KafkaTopic does not carry the retention.ms a refused alter
// asked for.
func unchangedConfig(value string) func(t *testing.T, ab *aclBroker) {
	return func(t *testing.T, ab *aclBroker) {
		if kt := ab.kafkaTopic(t, "c.t"); kt == nil || kt.Spec.Config["retention.ms"] == value {
			t.Errorf("the refused alter changed the KafkaTopic's config: %+v", kt)
		}
	}
}

func offsetDelete(t *testing.T, ab *aclBroker, group string, groupLevel bool) int16 {
	ab.asSuper(func() { ab.commit(t, group) })
	req := latest(kmsg.NewPtrOffsetDeleteRequest())
	req.Group = group
	rt := kmsg.NewOffsetDeleteRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetDeleteRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := ab.request(t, req).(*kmsg.OffsetDeleteResponse)
	if groupLevel || resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func consumerHeartbeat(t *testing.T, ab *aclBroker) int16 {
	req := latest(kmsg.NewPtrConsumerGroupHeartbeatRequest())
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "cg", "m-0000000000000000000", 0, 10000
	req.SubscribedTopicNames = []string{"t"}
	return ab.request(t, req).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode
}

// TestEveryAPIChecksApachesACL is the authorization matrix: for every key the broker serves,
// a principal without the ACL the key needs is refused with Apache's code where Apache puts
// it and changes nothing, and with the ACL it is not refused.
func TestEveryAPIChecksApachesACL(t *testing.T) {
	ab := startACLBroker(t, true)
	covered := map[int16]bool{}
	for _, c := range aclMatrix() {
		covered[c.key] = true
		t.Run(c.name, func(t *testing.T) {
			ab.grant(c.base...)
			if got := c.send(t, ab); got != c.refused {
				t.Fatalf("without the ACL: code %d, want %d", got, c.refused)
			}
			if c.unchanged != nil {
				c.unchanged(t, ab)
			}
			ab.grant(append(slices.Clone(c.base), c.needs...)...)
			defer ab.grant()
			if got := c.send(t, ab); isAuthorizationError(got) {
				t.Fatalf("with the ACL: code %d, an authorization failure", got)
			}
		})
	}
	for key, send := range needNothing {
		covered[key] = true
		t.Run(kmsg.NameForKey(key)+" needs no ACL", func(t *testing.T) {
			ab.grant()
			if got := send(t, ab); isAuthorizationError(got) {
				t.Fatalf("code %d, an authorization failure", got)
			}
		})
	}
	for key := range apis {
		if !covered[key] {
			t.Errorf("%s (key %d) is served but has no row in the ACL matrix", kmsg.NameForKey(key), key)
		}
	}
}

// TestWithoutAuthorizationEveryoneMayDoEverything runs the matrix's requests against a
// cluster without spec.authorization and no ACL at all: none is refused, and the ACL APIs
// (DescribeAcls, CreateAcls, DeleteAcls) answer SECURITY_DISABLED.
func TestWithoutAuthorizationEveryoneMayDoEverything(t *testing.T) {
	ab := startACLBroker(t, false)
	for _, c := range aclMatrix() {
		t.Run(c.name, func(t *testing.T) {
			got := c.send(t, ab)
			if c.key == 29 || c.key == 30 || c.key == 31 { // the ACL APIs
				if got != kerr.SecurityDisabled.Code {
					t.Fatalf("%s code %d, want SECURITY_DISABLED", kmsg.NameForKey(c.key), got)
				}
				return
			}
			if isAuthorizationError(got) {
				t.Fatalf("code %d, an authorization failure", got)
			}
		})
	}
}

func isAuthorizationError(code int16) bool {
	return code == topicAuth || code == groupAuth || code == clusterAuth || code == txnAuth
}

// regexHeartbeat sends a consumer member's full heartbeat subscribing to regex in group and
// returns its code and the topic ids of its assignment (nil when the answer carries none).
func regexHeartbeat(t *testing.T, ab *aclBroker, group, member string, epoch int32, regex string) (int16, [][16]byte) {
	t.Helper()
	req := latest(kmsg.NewPtrConsumerGroupHeartbeatRequest())
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = group, member, epoch, 10000
	req.SubscribedTopicRegex = &regex
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp := ab.request(t, req).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.Assignment == nil {
		return resp.ErrorCode, nil
	}
	ids := [][16]byte{}
	for _, tp := range resp.Assignment.Topics {
		ids = append(ids, tp.TopicID)
	}
	return resp.ErrorCode, ids
}

// regexAssignment heartbeats a new member of group subscribing to regex until its answer
// carries an assignment that is not empty, and returns that assignment's topic ids, sorted.
func regexAssignment(t *testing.T, ab *aclBroker, group, regex string) [][16]byte {
	t.Helper()
	member := "m-" + group + "-000000000000000"
	code, ids := regexHeartbeat(t, ab, group, member, 0, regex)
	if code != 0 {
		t.Fatalf("joining %s: code %d", group, code)
	}
	testkit.Eventually(t, "an assignment for "+group, func() bool {
		if len(ids) > 0 {
			return true
		}
		code, ids = regexHeartbeat(t, ab, group, member, 1, regex)
		return code == 0 && len(ids) > 0
	})
	slices.SortFunc(ids, func(a, b [16]byte) int { return slices.Compare(a[:], b[:]) })
	return ids
}

// With authorization on, a KIP-848 member's regular expression resolves only over the topics
// its principal may DESCRIBE (Apache 4.0, KAFKA-18813): "d" matches but is not described to
// it, so it is not assigned; the same expression with DESCRIBE on both assigns both.
func TestARegexSubscriptionResolvesOnlyOverTopicsThePrincipalMayDescribe(t *testing.T) {
	ab := startACLBroker(t, true)
	ab.grant(allow(v1alpha1.ACLGroup, "*", acl.OpRead), allow(v1alpha1.ACLTopic, "t", acl.OpDescribe))
	if got := regexAssignment(t, ab, "rx-some", "[dt]"); !slices.Equal(got, [][16]byte{aclTopicT.ID}) {
		t.Fatalf("assigned topics %v, want only t's %v", got, aclTopicT.ID)
	}
	ab.grant(allow(v1alpha1.ACLGroup, "*", acl.OpRead), allow(v1alpha1.ACLTopic, "*", acl.OpDescribe))
	if got := regexAssignment(t, ab, "rx-all", "[dt]"); !slices.Equal(got, [][16]byte{aclTopicT.ID, aclTopicD.ID}) {
		t.Fatalf("assigned topics %v, want t's and d's", got)
	}
}
