package broker

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/acl"
	"github.com/paddock-dev/paddock/internal/testkit"
)

func (ab *aclBroker) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(ab.addr), kgo.RequestRetries(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestAProducerWithWriteOnItsTopicProducesThereAndIsRefusedElsewhere(t *testing.T) {
	ab := startACLBroker(t, true)
	ab.grant(allow(v1alpha1.ACLTopic, "t", acl.OpWrite))
	cl := ab.client(t)
	ctx := testkit.Context(t)
	// The idempotent producer's InitProducerId passes on WRITE on some topic.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatalf("produce to t: %v", err)
	}
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "d", Value: []byte("no")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to d: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if _, end := ab.endOffsets(t); end != 1 {
		t.Fatalf("t's end offset %d, want the one record", end)
	}
}

func TestMetadataAndDescribeTopicPartitionsHideTopicsItMayNotDescribe(t *testing.T) {
	ab := startACLBroker(t, true)
	ab.grant(allow(v1alpha1.ACLTopic, "t", acl.OpRead))
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 10 // the last with cluster authorized operations
	md.IncludeTopicAuthorizedOperations, md.IncludeClusterAuthorizedOperations = true, true
	resp := ab.request(t, md).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "t" {
		t.Fatalf("all-topics Metadata lists %d topics (%+v), want t alone", len(resp.Topics), resp.Topics)
	}
	if got, want := resp.Topics[0].AuthorizedOperations, int32(1<<3|1<<8); got != want {
		t.Errorf("t's authorized operations %b, want READ and DESCRIBE %b", got, want)
	}
	if resp.AuthorizedOperations != 0 {
		t.Errorf("cluster authorized operations %b without DESCRIBE on it, want 0", resp.AuthorizedOperations)
	}
	dtp := latest(kmsg.NewPtrDescribeTopicPartitionsRequest())
	dtp.ResponsePartitionLimit = 100
	got := ab.request(t, dtp).(*kmsg.DescribeTopicPartitionsResponse)
	if len(got.Topics) != 1 || *got.Topics[0].Topic != "t" {
		t.Fatalf("all-topics DescribeTopicPartitions lists %+v, want t alone", got.Topics)
	}
	ab.grant(allow(v1alpha1.ACLTopic, "t", acl.OpRead), allow(v1alpha1.ACLCluster, "", acl.OpDescribe))
	if ops := ab.request(t, md).(*kmsg.MetadataResponse).AuthorizedOperations; ops != 1<<8 {
		t.Errorf("cluster authorized operations %b with DESCRIBE on it, want DESCRIBE alone", ops)
	}
}

func TestDescribeAclsAnswersTheKafkaUsersRulesThroughKadm(t *testing.T) {
	ab := startACLBroker(t, true)
	ab.sec.Set(cluster.SecuritySnapshot{Users: map[string]cluster.User{
		anonymous: {Principal: anonymous, ACLs: []v1alpha1.ACLRule{allow(v1alpha1.ACLCluster, "", acl.OpDescribe)}},
		"User:alice": {Principal: "User:alice", ACLs: []v1alpha1.ACLRule{
			allow(v1alpha1.ACLTopic, "orders", acl.OpRead, acl.OpWrite),
			{Type: v1alpha1.ACLDeny, Resource: v1alpha1.ACLResource{Type: v1alpha1.ACLGroup, Name: "team-", PatternType: v1alpha1.ACLPrefix}, Operations: []v1alpha1.ACLOperation{acl.OpAll}, Host: "10.0.0.1"},
		}},
	}})
	adm := kadm.NewClient(ab.client(t))
	ctx := testkit.Context(t)
	results, err := adm.DescribeACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	var ops []kmsg.ACLOperation
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("describe: %v", r.Err)
		}
		for _, d := range r.Described {
			if d.Principal != "User:alice" || d.Name != "orders" || d.Host != "*" || d.Permission != kmsg.ACLPermissionTypeAllow {
				t.Errorf("described %+v", d)
			}
			ops = append(ops, d.Operation)
		}
	}
	slices.Sort(ops)
	if !slices.Equal(ops, []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationWrite}) {
		t.Fatalf("alice's orders ACLs %v, want READ and WRITE", ops)
	}
	req := latest(kmsg.NewPtrDescribeACLsRequest())
	req.ResourceType, req.ResourcePatternType, req.Operation, req.PermissionType = kmsg.ACLResourceTypeGroup, 2, 1, 1 // MATCH
	req.ResourceName = strptr("team-a")
	resp := ab.request(t, req).(*kmsg.DescribeACLsResponse)
	if resp.ErrorCode != 0 || len(resp.Resources) != 1 || resp.Resources[0].ResourceName != "team-" || resp.Resources[0].ResourcePatternType != 4 ||
		len(resp.Resources[0].ACLs) != 1 || resp.Resources[0].ACLs[0].PermissionType != kmsg.ACLPermissionTypeDeny || resp.Resources[0].ACLs[0].Host != "10.0.0.1" {
		t.Fatalf("MATCH team-a answered %+v, want alice's prefix deny", resp)
	}
	bad := latest(kmsg.NewPtrDescribeACLsRequest())
	if code := ab.request(t, bad).(*kmsg.DescribeACLsResponse).ErrorCode; code != kerr.InvalidRequest.Code {
		t.Fatalf("a filter of UNKNOWN elements answered %d, want INVALID_REQUEST", code)
	}
}

func TestTheAuthorizerIsBuiltOncePerSnapshotWithTheImplicitSuperUsers(t *testing.T) {
	view := cluster.NewMemoryView(cluster.Snapshot{Authorization: true, SuperUsers: []string{"User:admin"}})
	sec := &cluster.MemorySecurity{}
	sec.Set(cluster.SecuritySnapshot{Users: map[string]cluster.User{"User:alice": {ACLs: []v1alpha1.ACLRule{allow(v1alpha1.ACLTopic, "t", acl.OpRead)}}}})
	h := &Handler{View: view, Security: sec, Cluster: "c"}
	z := h.authorizer(view.Snapshot())
	if h.authorizer(view.Snapshot()) != z {
		t.Error("the Authorizer was built again for the same snapshots")
	}
	for _, su := range []string{"User:admin", "User:CN=c-broker,O=paddock.dev", "User:CN=paddock-operator,O=paddock.dev"} {
		if !z.Allowed(acl.Action{Principal: su, Type: v1alpha1.ACLCluster, Name: acl.ClusterName, Operation: acl.OpAlter}) {
			t.Errorf("%s is no super user", su)
		}
	}
	if !z.Allowed(acl.Action{Principal: "User:alice", Type: v1alpha1.ACLTopic, Name: "t", Operation: acl.OpRead}) {
		t.Error("alice's KafkaUser rule does not apply")
	}
	sec.Set(cluster.SecuritySnapshot{})
	if z2 := h.authorizer(view.Snapshot()); z2 == z || z2.Allowed(acl.Action{Principal: "User:alice", Type: v1alpha1.ACLTopic, Name: "t", Operation: acl.OpRead}) {
		t.Error("a new security snapshot did not rebuild the Authorizer without alice's rules")
	}
}

// The KafkaCluster's spec.authorization.acls are User:*'s (Apache's wildcard principal): they
// apply to every principal — an allow lets a principal without rules of its own in, a deny
// beats its own allow — DescribeAcls lists them under User:*, and DeleteAcls lists the ones it
// selects with INVALID_REQUEST and leaves them (no broker writes the KafkaCluster).
func TestTheClustersACLsAreUserStarsAndApplyToEveryone(t *testing.T) {
	ab := startACLBroker(t, true)
	cl := ab.client(t, kgo.DisableIdempotentWrite())
	ctx := testkit.Context(t)
	produce := func() error { return cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}).FirstErr() }
	if err := produce(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce with no rule: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	ab.everyone(allow(v1alpha1.ACLTopic, "t", acl.OpWrite))
	testkit.Eventually(t, "User:*'s WRITE on t to let ANONYMOUS produce", func() bool { return produce() == nil })

	ab.grant(allow(v1alpha1.ACLCluster, "", acl.OpDescribe, acl.OpAlter))
	adm := kadm.NewClient(ab.client(t))
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().Allow(acl.WildcardPrincipal).AllowHosts().Topics("t").Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, r := range described {
		if r.Err != nil {
			t.Fatalf("describe: %v", r.Err)
		}
		for _, d := range r.Described {
			found = append(found, d.Principal+" "+d.Name+" "+d.Operation.String())
		}
	}
	if !slices.Equal(found, []string{"User:* t WRITE"}) {
		t.Fatalf("DescribeAcls for User:* lists %v, want the cluster's one rule", found)
	}

	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow(acl.WildcardPrincipal).AllowHosts().Topics("t").Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	var refused int
	for _, r := range deleted {
		for _, d := range r.Deleted {
			if !errors.Is(d.Err, kerr.InvalidRequest) || d.Principal != acl.WildcardPrincipal {
				t.Fatalf("DeleteAcls answered %+v for a User:* ACL, want INVALID_REQUEST", d)
			}
			refused++
		}
	}
	if refused != 1 {
		t.Fatalf("DeleteAcls listed %d User:* ACLs, want the one it selects", refused)
	}
	if err := produce(); err != nil {
		t.Fatalf("produce after the refused DeleteAcls: %v", err)
	}

	ab.grant(allow(v1alpha1.ACLTopic, "t", acl.OpWrite))
	ab.everyone(v1alpha1.ACLRule{Type: v1alpha1.ACLDeny, Resource: v1alpha1.ACLResource{Type: v1alpha1.ACLTopic, Name: "t"},
		Operations: []v1alpha1.ACLOperation{acl.OpWrite}})
	testkit.Eventually(t, "User:*'s deny to beat ANONYMOUS's own allow", func() bool {
		return errors.Is(produce(), kerr.TopicAuthorizationFailed)
	})
}
