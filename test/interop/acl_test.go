package interop

import (
	"errors"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

// TestAKafkaUsersACLsLetItProduceToItsTopicOnly: a cluster with spec.authorization (the
// harness' admin a super user) and a real KafkaUser bob whose acls allow Write on topic
// acl-mine. franz-go as bob produces there (its idempotent InitProducerId passes on that
// Write) and is refused TOPIC_AUTHORIZATION_FAILED on acl-other, and so are sarama, kafka-go,
// kcat (librdkafka) and kafkajs as bob; nothing lands on acl-other, one record of each client
// on acl-mine.
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
	const allowed, refused = "acl-mine", "acl-other"
	t.Run("sarama", func(t *testing.T) {
		cfg := bob.sarama(c)
		cfg.Producer.RequiredAcks, cfg.Producer.Retry.Max, cfg.Metadata.Retry.Max = sarama.WaitForAll, 1, 0
		p, err := sarama.NewSyncProducer(c.Addrs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.Close() }()
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: allowed, Value: sarama.StringEncoder("allowed")}); err != nil {
			t.Fatalf("produce to %s: %v", allowed, err)
		}
		_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: refused, Value: sarama.StringEncoder("refused")})
		if !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
			t.Fatalf("produce to %s: %v, want TOPIC_AUTHORIZATION_FAILED", refused, err)
		}
	})
	t.Run("kafka-go", func(t *testing.T) {
		transport, _ := bob.kafkaGo(t, c)
		w := &kafka.Writer{Addr: kafka.TCP(c.Addrs...), Transport: transport, RequiredAcks: kafka.RequireAll, MaxAttempts: 1}
		defer func() { _ = w.Close() }()
		if err := w.WriteMessages(testCtx(t), kafka.Message{Topic: allowed, Value: []byte("allowed")}); err != nil {
			t.Fatalf("write to %s: %v", allowed, err)
		}
		// kafka-go's Writer routes by the cluster's whole Metadata, from which a topic bob may
		// not DESCRIBE is left out (as Apache leaves it out): it reports the topic unknown
		// and sends no Produce.
		err := w.WriteMessages(testCtx(t), kafka.Message{Topic: refused, Value: []byte("refused")})
		if !errors.Is(err, kafka.TopicAuthorizationFailed) && !errors.Is(err, kafka.UnknownTopicOrPartition) {
			t.Fatalf("write to %s: %v, want TOPIC_AUTHORIZATION_FAILED or the topic hidden", refused, err)
		}
	})
	t.Run("kcat", func(t *testing.T) {
		if out, err := kcatAs(t, c, bob, strings.NewReader("allowed\n"), "-P", "-t", allowed, "-X", "message.timeout.ms=10000"); err != nil {
			t.Fatalf("kcat -P to %s: %v\n%s", allowed, err, out)
		}
		out, err := kcatAs(t, c, bob, strings.NewReader("refused\n"), "-P", "-t", refused, "-X", "message.timeout.ms=3000")
		if err == nil || !strings.Contains(strings.ToLower(string(out)), "topic authorization failed") {
			t.Fatalf("kcat -P to %s: %v, want a topic authorization failure:\n%s", refused, err, out)
		}
	})
	t.Run("kafkajs", func(t *testing.T) {
		if acked, name, _, msg := kafkajsProduceOne(t, c.Addrs, allowed, bob.kafkajs(t, c), ""); !acked {
			t.Fatalf("kafkajs to %s: %s %q", allowed, name, msg)
		}
		if acked, name, typ, msg := kafkajsProduceOne(t, c.Addrs, refused, bob.kafkajs(t, c), ""); acked || typ != "TOPIC_AUTHORIZATION_FAILED" {
			t.Fatalf("kafkajs to %s: acknowledged %v, %s %s %q; want TOPIC_AUTHORIZATION_FAILED", refused, acked, name, typ, msg)
		}
	})

	admin := c.Kgo()
	for topic, want := range map[string]int64{allowed: 5, refused: 0} { // one record of each client
		ends, err := kadm.NewClient(admin).ListEndOffsets(testCtx(t), topic)
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := ends.Lookup(topic, 0); o.Err != nil || o.Offset != want {
			t.Errorf("%s end offset %d (%v), want %d", topic, o.Offset, o.Err, want)
		}
	}
}
