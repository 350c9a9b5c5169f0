package interop

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/controllers/kafkauser"
	"github.com/paddock-dev/paddock/internal/testkit"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

// aclCluster is a one-broker cluster over TLS + SCRAM-SHA-512 with spec.authorization, the
// harness' admin a super user; its broker writes KafkaUsers as the broker ServiceAccount
// (the Role the provisioning reconciler grants), and the KafkaUser reconciler runs. admin is
// the harness' admin's credential.
func aclCluster(t *testing.T, ns string) (c *kubebrokers.Cluster, admin credential) {
	t.Helper()
	admin = credential{auth: v1alpha1.AuthenticationScramSHA512, user: "admin", pass: password(t)}
	c = kubebrokers.NewCluster(t, 1, kubebrokers.Options{Namespace: ns,
		Security:      &kubebrokers.Security{TLS: true, Authentication: v1alpha1.AuthenticationScramSHA512, User: admin.user, Password: admin.pass},
		Authorization: &v1alpha1.Authorization{Type: v1alpha1.AuthorizationSimple, SuperUsers: []string{"User:admin"}}})
	return c, admin
}

// described is what DescribeACLs answers for principal, as "type/name/operation/permission"
// lines, sorted.
func described(t *testing.T, adm *kadm.Client, principal string) []string {
	t.Helper()
	results, err := adm.DescribeACLs(testCtx(t), kadm.NewACLs().Allow(principal).Deny(principal).AllowHosts().DenyHosts().
		AnyResource().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("describe: %v", r.Err)
		}
		for _, d := range r.Described {
			out = append(out, d.Type.String()+"/"+d.Name+"/"+d.Operation.String()+"/"+d.Permission.String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestCreateAndDeleteAclsThroughKadmChangeTheKafkaUsers: kadm as the admin grants bob (a scram
// KafkaUser without ACLs) WRITE on a topic and carol (no KafkaUser) READ; the answer's success
// is the write's: bob's KafkaUser holds the rule at once, carol gets a KafkaUser of ACLs only
// (Ready, reason ACLsOnly), DescribeAcls lists both, and bob then produces where he was
// refused. DeleteAcls takes bob's WRITE out again (listing it), and bob is refused again.
// A principal that names no KafkaUser is refused INVALID_REQUEST, saying to declare the ACL
// on a KafkaUser (User:*: in the KafkaCluster's spec.authorization.acls), and nothing is
// written.
func TestCreateAndDeleteAclsThroughKadmChangeTheKafkaUsers(t *testing.T) {
	c, _ := aclCluster(t, "interop-aclw")
	createSecuredTopic(t, c, "aclw", 1)
	bob := credential{auth: v1alpha1.AuthenticationScramSHA512, user: "bob"}
	bob.pass = c.AddKafkaUser("bob")
	waitAdmitted(t, c, bob)
	bobs := kgoClient(t, c.Addrs, append(bob.kgo(c), kgo.ProducerLinger(0), kgo.RecordRetries(0))...)
	produce := func() error {
		ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
		defer cancel()
		return bobs.ProduceSync(ctx, &kgo.Record{Topic: "aclw", Value: []byte("v")}).FirstErr()
	}
	if err := produce(); !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob's produce before the grant: %v, want an authorization failure", err)
	}
	adm := kadm.NewClient(c.Kgo())
	ctx := testCtx(t)

	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:bob").Topics("aclw").Operations(kadm.OpWrite))
	if err != nil || len(created) != 1 || created[0].Err != nil {
		t.Fatalf("create bob's ACL: %v %+v", err, created)
	}
	created, err = adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:carol").Topics("aclw").Groups("carols").Operations(kadm.OpRead))
	if err != nil || len(created) != 2 || created[0].Err != nil || created[1].Err != nil {
		t.Fatalf("create carol's ACLs: %v %+v", err, created)
	}

	u := &v1alpha1.KafkaUser{}
	if err := kubebrokers.Env.Client.Get(ctx, client.ObjectKey{Namespace: c.NS, Name: "bob"}, u); err != nil {
		t.Fatal(err)
	}
	if u.Spec.Authorization == nil || len(u.Spec.Authorization.ACLs) != 1 || !slices.Equal(u.Spec.Authorization.ACLs[0].Operations, []v1alpha1.ACLOperation{"Write"}) ||
		u.Spec.Authentication == nil || u.Spec.Authentication.Type != v1alpha1.UserScramSHA512 {
		t.Fatalf("KafkaUser bob after CreateAcls: %+v", u.Spec)
	}
	carol := &v1alpha1.KafkaUser{}
	testkit.Eventually(t, "KafkaUser carol Ready with ACLs only", func() bool {
		if err := kubebrokers.Env.Client.Get(ctx, client.ObjectKey{Namespace: c.NS, Name: "carol"}, carol); err != nil {
			return false
		}
		ready := meta.FindStatusCondition(carol.Status.Conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.Status == "True" && ready.Reason == kafkauser.ReasonACLsOnly
	})
	if carol.Spec.Cluster != kubebrokers.ClusterName || carol.Spec.Authentication != nil || carol.Labels[v1alpha1.LabelCluster] != kubebrokers.ClusterName ||
		carol.Spec.Authorization == nil || len(carol.Spec.Authorization.ACLs) != 2 {
		t.Fatalf("KafkaUser carol made by CreateAcls: labels %v, spec %+v", carol.Labels, carol.Spec)
	}
	testkit.Eventually(t, "DescribeAcls to list carol's ACLs", func() bool {
		return slices.Equal(described(t, adm, "User:carol"), []string{"GROUP/carols/READ/ALLOW", "TOPIC/aclw/READ/ALLOW"})
	})
	testkit.Eventually(t, "bob to produce with his new ACL", func() bool { return produce() == nil })

	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow("User:bob").AllowHosts().AnyResource().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	var gone []string
	for _, r := range deleted {
		if r.Err != nil {
			t.Fatalf("delete filter: %v", r.Err)
		}
		for _, d := range r.Deleted {
			if d.Err != nil {
				t.Fatalf("delete %+v: %v", d, d.Err)
			}
			gone = append(gone, d.Principal+" "+d.Type.String()+"/"+d.Name+"/"+d.Operation.String())
		}
	}
	if !slices.Equal(gone, []string{"User:bob TOPIC/aclw/WRITE"}) {
		t.Fatalf("DeleteAcls deleted %v, want bob's WRITE on aclw", gone)
	}
	if err := kubebrokers.Env.Client.Get(ctx, client.ObjectKey{Namespace: c.NS, Name: "bob"}, u); err != nil {
		t.Fatal(err)
	}
	if u.Spec.Authorization != nil && len(u.Spec.Authorization.ACLs) != 0 {
		t.Fatalf("KafkaUser bob keeps %+v after DeleteAcls", u.Spec.Authorization.ACLs)
	}
	testkit.Eventually(t, "bob to be refused again", func() bool { return errors.Is(produce(), kerr.TopicAuthorizationFailed) })
	if got := described(t, adm, "User:carol"); len(got) != 2 {
		t.Fatalf("carol's ACLs after deleting bob's: %v", got)
	}

	for _, principal := range []string{"User:*", "Group:ops", "User:CN=dave,O=paddock.dev", "User:Dave"} {
		where := "declare the ACL on a KafkaUser"
		if principal == "User:*" {
			where = "the KafkaCluster's spec.authorization.acls" // everyone's rules live there
		}
		res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow(principal).Topics("aclw").Operations(kadm.OpRead))
		if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.InvalidRequest) || !strings.Contains(res[0].ErrMessage, where) {
			t.Errorf("CreateAcls for %s: %v %+v, want INVALID_REQUEST saying where to declare it (%s)", principal, err, res, where)
		}
	}
	var users v1alpha1.KafkaUserList
	if err := kubebrokers.Env.Client.List(ctx, &users, client.InNamespace(c.NS)); err != nil {
		t.Fatal(err)
	}
	if len(users.Items) != 2 {
		t.Fatalf("%d KafkaUsers after the refused creations, want bob and carol", len(users.Items))
	}
}

// TestSaramaClusterAdminCreatesAndDeletesAcls: sarama's ClusterAdmin (CreateACLs: CreateAcls
// v1; ListAcls and DeleteACL: DescribeAcls and DeleteAcls v2) grants erin (no KafkaUser) DESCRIBE on a group prefix, lists
// it, and deletes it, which DescribeAcls then no longer lists.
func TestSaramaClusterAdminCreatesAndDeletesAcls(t *testing.T) {
	c, admin := aclCluster(t, "interop-aclws")
	ca, err := sarama.NewClusterAdmin(c.Addrs, admin.sarama(c))
	if err != nil {
		t.Fatalf("sarama cluster admin: %v", err)
	}
	t.Cleanup(func() { _ = ca.Close() })
	res := sarama.Resource{ResourceType: sarama.AclResourceGroup, ResourceName: "erins-", ResourcePatternType: sarama.AclPatternPrefixed}
	acl := sarama.Acl{Principal: "User:erin", Host: "*", Operation: sarama.AclOperationDescribe, PermissionType: sarama.AclPermissionAllow}
	if err := ca.CreateACLs([]*sarama.ResourceAcls{{Resource: res, Acls: []*sarama.Acl{&acl}}}); err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	filter := sarama.AclFilter{ResourceType: sarama.AclResourceAny, ResourcePatternTypeFilter: sarama.AclPatternAny,
		Principal: strptr("User:erin"), Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}
	testkit.Eventually(t, "sarama's ListAcls to list erin's ACL", func() bool {
		listed, err := ca.ListAcls(filter)
		return err == nil && len(listed) == 1 && listed[0].ResourceName == "erins-" && listed[0].ResourcePatternType == sarama.AclPatternPrefixed &&
			len(listed[0].Acls) == 1 && listed[0].Acls[0].Operation == sarama.AclOperationDescribe
	})
	matched, err := ca.DeleteACL(filter, false)
	if err != nil || len(matched) != 1 || matched[0].Err != sarama.ErrNoError || matched[0].Principal != "User:erin" || matched[0].ResourceName != "erins-" {
		t.Fatalf("DeleteACL: %v %+v, want erin's one ACL", err, matched)
	}
	testkit.Eventually(t, "sarama's ListAcls to list nothing of erin's", func() bool {
		listed, err := ca.ListAcls(filter)
		return err == nil && len(listed) == 0
	})
}

func strptr(s string) *string { return &s }
