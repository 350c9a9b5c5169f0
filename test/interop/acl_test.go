package interop

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

// TestAKafkaUsersACLsLetItProduceToItsTopicOnly: a cluster with spec.authorization (the
// harness' admin a super user) and a real KafkaUser bob whose acls allow Write on topic
// acl-mine. franz-go as bob produces there (its idempotent InitProducerId passes on that
// Write) and is refused TOPIC_AUTHORIZATION_FAILED on acl-other, where nothing lands.
func TestAKafkaUsersACLsLetItProduceToItsTopicOnly(t *testing.T) {
	c := kubebrokers.NewCluster(t, 1, kubebrokers.Options{Namespace: "interop-acl",
		Security:      &kubebrokers.Security{TLS: true, Authentication: v1alpha1.AuthenticationScramSHA512, User: "admin", Password: password(t)},
		Authorization: &v1alpha1.Authorization{Type: v1alpha1.AuthorizationSimple, SuperUsers: []string{"User:admin"}}})
	createSecuredTopic(t, c, "acl-mine", 1)
	createSecuredTopic(t, c, "acl-other", 1)
	bob := credential{auth: v1alpha1.AuthenticationScramSHA512, user: "bob"}
	bob.pass = c.AddKafkaUser("bob", v1alpha1.ACLRule{Type: v1alpha1.ACLAllow,
		Resource:   v1alpha1.ACLResource{Type: v1alpha1.ACLTopic, Name: "acl-mine", PatternType: v1alpha1.ACLLiteral},
		Operations: []v1alpha1.ACLOperation{"Write"}, Host: "*"})
	waitAdmitted(t, c, bob)

	cl := kgoClient(t, c.Addrs, bob.kgo(c)...)
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "acl-mine", Value: []byte("allowed")}).FirstErr(); err != nil {
		t.Fatalf("produce to acl-mine: %v", err)
	}
	err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "acl-other", Value: []byte("refused")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to acl-other: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	admin := c.Kgo()
	for topic, want := range map[string]int64{"acl-mine": 1, "acl-other": 0} {
		ends, err := kadm.NewClient(admin).ListEndOffsets(testCtx(t), topic)
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := ends.Lookup(topic, 0); o.Err != nil || o.Offset != want {
			t.Errorf("%s end offset %d (%v), want %d", topic, o.Offset, o.Err, want)
		}
	}
}
