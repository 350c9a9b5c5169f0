package interop

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	kgplain "github.com/segmentio/kafka-go/sasl/plain"
	kgscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	ksasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/pki"
	"github.com/paddock-dev/paddock/internal/testkit"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

// TestClientsOverSecuredListeners: for each listener security — TLS with SCRAM-SHA-512,
// SCRAM-SHA-256, PLAIN, and mutual TLS — a two-broker cluster whose certificates the real
// certificates reconciler issues and whose brokers read them, the credentials and the
// KafkaUsers through their own informers. franz-go (produce, consume in a group), sarama
// (sync producer, partition consumers) and kcat (librdkafka: its own TLS with host-name
// checks, its own SCRAM) each work as alice; each is refused with bad credentials (a wrong
// password and an unknown user; a certificate of a foreign CA and one of no KafkaUser), and
// nothing they tried to write lands. A plaintext client and a client that does not trust
// the cluster CA get no answer. alice is a real KafkaUser: the KafkaUser reconciler generates her
// password (or issues her certificate), and deleting her KafkaUser refuses her open connection
// at its next request (the time is logged).
func TestClientsOverSecuredListeners(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed: run `make kcat` (hack/install-kcat.sh)")
	}
	for _, auth := range []v1alpha1.ListenerAuthenticationType{v1alpha1.AuthenticationScramSHA512, v1alpha1.AuthenticationScramSHA256,
		v1alpha1.AuthenticationPlain, v1alpha1.AuthenticationTLS} {
		t.Run(string(auth), func(t *testing.T) { testSecuredListener(t, auth) })
	}
}

func testSecuredListener(t *testing.T, auth v1alpha1.ListenerAuthenticationType) {
	c := kubebrokers.NewCluster(t, 2, kubebrokers.Options{Namespace: "interop-sec",
		Security: &kubebrokers.Security{TLS: true, Authentication: auth, User: "admin", Password: password(t)}})
	alice := credential{auth: auth, user: "alice"}
	var refusals map[string]credential
	if auth == v1alpha1.AuthenticationTLS {
		cert, certFile, keyFile := c.AddTLSUser("alice")
		alice.cert, alice.certFile, alice.keyFile = &cert, certFile, keyFile
		refusals = map[string]credential{"a certificate of a foreign CA": foreignCertificate(t), "a certificate of no KafkaUser": noUserCertificate(t, c),
			"alice's certificate expired": expiredCertificate(t, c)}
	} else {
		alice.pass = c.AddKafkaUser("alice")
		refusals = map[string]credential{"a wrong password": {auth: auth, user: "alice", pass: "not-" + alice.pass},
			"an unknown user": {auth: auth, user: "mallory", pass: alice.pass}}
	}
	topics := []string{"secured-kgo", "secured-sarama", "secured-kcat", "secured-kafka-go"}
	for _, topic := range topics {
		createSecuredTopic(t, c, topic, 2)
	}
	waitAdmitted(t, c, alice)

	// Successes first: the failures below count against 127.0.0.1's authentication rate
	// limit (docs/security.md), which would then refuse good credentials too.
	t.Run("franz-go produces and consumes in a group", func(t *testing.T) {
		topic := "secured-kgo"
		recs := testRecords("kgo", 30, true)
		cl := kgoClient(t, c.Addrs, append(alice.kgo(c),
			kgo.ConsumerGroup("kgo-secured"), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		for i := range recs {
			r := kgoRecord(topic, recs[i])
			if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", recs[i].Key, err)
			}
			recs[i].Partition, recs[i].Offset = r.Partition, r.Offset
		}
		var read []record
		ctx := testCtx(t)
		for len(read) < len(recs) && ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("poll: %v", err)
			}
			fs.EachRecord(func(r *kgo.Record) { read = append(read, fromKgo(r)) })
		}
		checkReadBack(t, recs, read)
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Errorf("commit the group's offsets: %v", err)
		}
	})
	t.Run("sarama produces and consumes", func(t *testing.T) {
		topic := "secured-sarama"
		p, err := sarama.NewSyncProducer(c.Addrs, alice.sarama(c))
		if err != nil {
			t.Fatalf("sarama sync producer: %v", err)
		}
		defer func() { _ = p.Close() }()
		recs := testRecords("sarama", 30, true)
		for i := range recs {
			partition, offset, err := p.SendMessage(saramaMessage(topic, recs[i]))
			if err != nil {
				t.Fatalf("send %s: %v", recs[i].Key, err)
			}
			recs[i].Partition, recs[i].Offset = partition, offset
		}
		checkReadBack(t, recs, saramaConsume(t, c.Addrs, alice.sarama(c), topic, recs))
	})
	t.Run("kcat produces and consumes", func(t *testing.T) {
		topic := "secured-kcat"
		var lines bytes.Buffer
		var recs []record
		for i := range 20 {
			r := record{Partition: 0, Offset: -1, Key: fmt.Appendf(nil, "kcat-%d", i), Value: fmt.Appendf(nil, "value %d over TLS", i)}
			recs = append(recs, r)
			fmt.Fprintf(&lines, "%s\t%s\n", r.Key, r.Value)
		}
		if out, err := kcatAs(t, c, alice, &lines, "-P", "-t", topic, "-p", "0", "-K", "\t"); err != nil {
			t.Fatalf("kcat -P: %v\n%s", err, out)
		}
		out, err := kcatAs(t, c, alice, nil, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", kcatConsumeFormat)
		if err != nil {
			t.Fatalf("kcat -C: %v\n%s", err, out)
		}
		read, err := parseKcat(out)
		if err != nil {
			t.Fatalf("kcat -C output: %v", err)
		}
		checkReadBack(t, recs, read)
	})
	t.Run("kafka-go writes and reads back", func(t *testing.T) {
		transport, dialer := alice.kafkaGo(t, c)
		checkKafkaGo(t, c.Addrs, "secured-kafka-go", 2, transport, dialer)
	})
	t.Run("kafkajs creates a topic, produces and consumes in a group", func(t *testing.T) {
		checkKafkajs(t, c.Addrs, "secured-kafkajs", "kafkajs-secured", alice.kafkajs(t, c))
	})
	if t.Failed() {
		return
	}

	before := endOffsets(t, c, topics...)
	const topic = "secured-kgo"
	for _, why := range slices.Sorted(maps.Keys(refusals)) {
		bad := refusals[why]
		t.Run("franz-go is refused with "+why, func(t *testing.T) {
			cl := kgoClient(t, c.Addrs, append(bad.kgo(c), kgo.RequestRetries(0))...)
			err := cl.Ping(testCtx(t))
			if err == nil || bad.sasl() && !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("ping with %s: %v, want a refusal (SASL_AUTHENTICATION_FAILED with SASL)", why, err)
			}
			ctx, cancel := context.WithTimeout(testCtx(t), 3*time.Second)
			defer cancel()
			if err := cl.ProduceSync(ctx, kgoRecord(topic, record{Key: []byte("refused"), Value: []byte("kgo")})).FirstErr(); err == nil {
				t.Fatalf("produce with %s succeeded", why)
			}
		})
		t.Run("sarama is refused with "+why, func(t *testing.T) {
			cfg := bad.sarama(c)
			cfg.Metadata.Retry.Max = 0
			p, err := sarama.NewSyncProducer(c.Addrs, cfg)
			if err == nil {
				_ = p.Close()
				t.Fatal("sarama connected")
			}
			if bad.sasl() && !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
				t.Fatalf("sarama: %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		})
		// kafka-go and kafkajs connect from sources of their own (127.0.0.2, .3): the
		// failures above already use most of 127.0.0.1's budget.
		t.Run("kafka-go is refused with "+why, func(t *testing.T) {
			_, dialer := bad.kafkaGo(t, c)
			dialer.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
			ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
			defer cancel()
			conn, err := dialer.DialContext(ctx, "tcp", c.Addrs[0])
			if err == nil {
				// With mutual TLS a TLS 1.3 client finishes its handshake before the broker
				// has checked its certificate: the refusal comes at the first request.
				_, err = conn.ApiVersions()
				_ = conn.Close()
			}
			if err == nil {
				t.Fatalf("kafka-go was answered with %s", why)
			}
			if bad.sasl() && !errors.Is(err, kafka.SASLAuthenticationFailed) {
				t.Fatalf("kafka-go with %s: %v, want SASL_AUTHENTICATION_FAILED", why, err)
			}
		})
		t.Run("kafkajs is refused with "+why, func(t *testing.T) {
			name, msg := kafkajsRefused(t, c.Addrs, topic, bad.kafkajs(t, c), "127.0.0.3")
			if bad.sasl() && name != "KafkaJSSASLAuthenticationError" {
				t.Fatalf("kafkajs with %s: %s %q, want KafkaJSSASLAuthenticationError", why, name, msg)
			}
		})
		t.Run("kcat is refused with "+why, func(t *testing.T) {
			out, err := kcatAs(t, c, bad, strings.NewReader("refused\tkcat\n"), "-P", "-t", topic, "-K", "\t",
				"-X", "message.timeout.ms=3000", "-X", "reconnect.backoff.ms=1000")
			if err == nil {
				t.Fatalf("kcat -P with %s succeeded:\n%s", why, out)
			}
			if bad.sasl() && !strings.Contains(string(out), "Authentication failed") {
				t.Fatalf("kcat -P with %s: %v, output says no authentication failure:\n%s", why, err, out)
			}
		})
	}
	t.Run("a plaintext client gets no answer", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.RequestRetries(0), kgo.DialTimeout(3*time.Second),
			kgo.SASL(kscram.Auth{User: "alice", Pass: alice.pass}.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.Ping(ctx); err == nil {
			t.Fatal("a plaintext client reached the TLS listener")
		}
	})
	t.Run("a client that does not trust the cluster CA gets no answer", func(t *testing.T) {
		opts := alice.kgo(c)
		opts = append(opts[1:], kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12, Certificates: c.TLS.Certificates}), kgo.RequestRetries(0))
		cl := kgoClient(t, c.Addrs, opts...)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := cl.Ping(ctx)
		var unknown x509.UnknownAuthorityError
		if err == nil || !errors.As(err, &unknown) {
			t.Fatalf("ping with the system roots: %v, want an unknown-authority error", err)
		}
	})
	if after := endOffsets(t, c, topics...); !maps.Equal(before, after) {
		t.Errorf("refused clients wrote: end offsets %v before, %v after", before, after)
	}
	t.Run("deleting the KafkaUser refuses its open connections", func(t *testing.T) {
		cl := kgoClient(t, c.Addrs, append(alice.kgo(c), kgo.RequestRetries(0))...)
		if err := cl.Ping(testCtx(t)); err != nil {
			t.Fatalf("alice before the deletion: %v", err)
		}
		user := &v1alpha1.KafkaUser{ObjectMeta: metav1.ObjectMeta{Namespace: c.NS, Name: "alice"}}
		if err := kubebrokers.Env.Client.Delete(testCtx(t), user); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		testkit.Eventually(t, "alice's connections refused", func() bool { return cl.Ping(testCtx(t)) != nil })
		t.Logf("alice's requests refused %v after her KafkaUser was deleted", time.Since(deleted).Round(time.Millisecond))
	})
}

// credential is how a client proves who it is on the listener under test: a user name and
// password (SCRAM, PLAIN) or a client certificate (mutual TLS).
type credential struct {
	auth              v1alpha1.ListenerAuthenticationType
	user, pass        string
	cert              *tls.Certificate
	certFile, keyFile string
}

func (cr credential) sasl() bool { return cr.auth != v1alpha1.AuthenticationTLS }

// tls is the client TLS configuration: trusting the cluster CA, presenting cr's certificate.
func (cr credential) tls(c *kubebrokers.Cluster) *tls.Config {
	cfg := c.TLS.Clone()
	cfg.Certificates = nil
	if cr.cert != nil {
		cfg.Certificates = []tls.Certificate{*cr.cert}
	}
	return cfg
}

// kgo are franz-go's options for cr; the first is the TLS dialer.
func (cr credential) kgo(c *kubebrokers.Cluster) []kgo.Opt {
	opts := []kgo.Opt{kgo.DialTLSConfig(cr.tls(c))}
	switch cr.auth {
	case v1alpha1.AuthenticationScramSHA512:
		opts = append(opts, kgo.SASL(kscram.Auth{User: cr.user, Pass: cr.pass}.AsSha512Mechanism()))
	case v1alpha1.AuthenticationScramSHA256:
		opts = append(opts, kgo.SASL(kscram.Auth{User: cr.user, Pass: cr.pass}.AsSha256Mechanism()))
	case v1alpha1.AuthenticationPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: cr.user, Pass: cr.pass}.AsMechanism()))
	}
	return opts
}

// sarama is saramaConfig over TLS for cr (SaslHandshake v1, then SaslAuthenticate).
func (cr credential) sarama(c *kubebrokers.Cluster) *sarama.Config {
	cfg := saramaConfig()
	cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, cr.tls(c)
	if !cr.sasl() {
		return cfg
	}
	cfg.Net.SASL.Enable, cfg.Net.SASL.Handshake, cfg.Net.SASL.Version = true, true, sarama.SASLHandshakeV1
	cfg.Net.SASL.User, cfg.Net.SASL.Password = cr.user, cr.pass
	switch cr.auth {
	case v1alpha1.AuthenticationScramSHA512:
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{sha512: true} }
	case v1alpha1.AuthenticationScramSHA256:
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{} }
	case v1alpha1.AuthenticationPlain:
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	}
	return cfg
}

// kafkaGo are kafka-go's Writer transport and Reader dialer for cr: TLS trusting the cluster
// CA (kafka-go checks the host name), and its own SCRAM or PLAIN mechanism.
func (cr credential) kafkaGo(t *testing.T, c *kubebrokers.Cluster) (*kafka.Transport, *kafka.Dialer) {
	t.Helper()
	var mech sasl.Mechanism
	var err error
	switch cr.auth {
	case v1alpha1.AuthenticationScramSHA512:
		mech, err = kgscram.Mechanism(kgscram.SHA512, cr.user, cr.pass)
	case v1alpha1.AuthenticationScramSHA256:
		mech, err = kgscram.Mechanism(kgscram.SHA256, cr.user, cr.pass)
	case v1alpha1.AuthenticationPlain:
		mech = kgplain.Mechanism{Username: cr.user, Password: cr.pass}
	}
	if err != nil {
		t.Fatal(err)
	}
	return &kafka.Transport{TLS: cr.tls(c), SASL: mech},
		&kafka.Dialer{Timeout: 10 * time.Second, TLS: cr.tls(c), SASLMechanism: mech}
}

// kafkajs is js/interop.js's INTEROP_SECURITY for cr: the CA file, the client certificate's
// files or the SASL mechanism and credentials.
func (cr credential) kafkajs(t *testing.T, c *kubebrokers.Cluster) string {
	t.Helper()
	s := map[string]any{"ca": c.CAFile}
	if cr.sasl() {
		mech := map[v1alpha1.ListenerAuthenticationType]string{v1alpha1.AuthenticationScramSHA512: "scram-sha-512",
			v1alpha1.AuthenticationScramSHA256: "scram-sha-256", v1alpha1.AuthenticationPlain: "plain"}[cr.auth]
		s["sasl"] = map[string]string{"mechanism": mech, "username": cr.user, "password": cr.pass}
	} else {
		s["cert"], s["key"] = cr.certFile, cr.keyFile
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// kcat are kcat's -X settings for cr: SASL_SSL with the mechanism, or SSL with the client
// certificate; librdkafka checks the broker's host name against its certificate.
func (cr credential) kcat(c *kubebrokers.Cluster) []string {
	args := []string{"-X", "ssl.ca.location=" + c.CAFile, "-X", "ssl.endpoint.identification.algorithm=https"}
	if !cr.sasl() {
		return append(args, "-X", "security.protocol=SSL", "-X", "ssl.certificate.location="+cr.certFile, "-X", "ssl.key.location="+cr.keyFile)
	}
	mech := map[v1alpha1.ListenerAuthenticationType]string{v1alpha1.AuthenticationScramSHA512: "SCRAM-SHA-512",
		v1alpha1.AuthenticationScramSHA256: "SCRAM-SHA-256", v1alpha1.AuthenticationPlain: "PLAIN"}[cr.auth]
	return append(args, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms="+mech,
		"-X", "sasl.username="+cr.user, "-X", "sasl.password="+cr.pass)
}

// foreignCertificate is a client certificate CN=alice from a CA the cluster does not know.
func foreignCertificate(t *testing.T) credential {
	t.Helper()
	ca, err := pki.NewCA("foreign CA", "example.com", time.Now(), time.Hour, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return certificateCredential(t, ca, "alice")
}

// noUserCertificate is a client certificate from the cluster's own clients CA for a name
// with no KafkaUser: the handshake succeeds, the first request is refused.
func noUserCertificate(t *testing.T, c *kubebrokers.Cluster) credential {
	t.Helper()
	return certificateCredential(t, c.ClientsCA, "mallory")
}

func certificateCredential(t *testing.T, ca *pki.CA, name string) credential {
	t.Helper()
	return certificateIssuedAt(t, ca, name, time.Now())
}

// expiredCertificate is alice's own certificate from the clients CA, expired an hour ago.
func expiredCertificate(t *testing.T, c *kubebrokers.Cluster) credential {
	t.Helper()
	return certificateIssuedAt(t, c.ClientsCA, "alice", time.Now().Add(-2*time.Hour))
}

// certificateIssuedAt is a client certificate for CN=name from ca, issued at issued for an hour.
func certificateIssuedAt(t *testing.T, ca *pki.CA, name string, issued time.Time) credential {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{Subject: pkix.Name{CommonName: name}, Client: true}, issued, time.Hour, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cr := credential{auth: v1alpha1.AuthenticationTLS, cert: &cert, certFile: filepath.Join(dir, "user.crt"), keyFile: filepath.Join(dir, "user.key")}
	for path, data := range map[string][]byte{cr.certFile: certPEM, cr.keyFile: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cr
}

// password is a fresh random password.
func password(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// createSecuredTopic creates topic with partitions through the harness' admin client and
// waits until every broker gives every partition a leader.
func createSecuredTopic(t *testing.T, c *kubebrokers.Cluster, topic string, partitions int32) {
	t.Helper()
	ctx := testCtx(t)
	if _, err := kadm.NewClient(c.Kgo()).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	for id := range c.Addrs {
		testkit.Eventually(t, fmt.Sprintf("broker %d to lead every partition of %s", id, topic), func() bool {
			md := c.MetadataOn(ctx, id, topic)
			if len(md.Topics) != 1 || md.Topics[0].ErrorCode != 0 || len(md.Topics[0].Partitions) != int(partitions) {
				return false
			}
			for _, p := range md.Topics[0].Partitions {
				if p.ErrorCode != 0 || p.Leader < 0 {
					return false
				}
			}
			return true
		})
	}
}

// waitAdmitted waits until every broker admits cr (its informers read the credential or
// the KafkaUser).
func waitAdmitted(t *testing.T, c *kubebrokers.Cluster, cr credential) {
	t.Helper()
	for _, addr := range c.Addrs {
		testkit.Eventually(t, fmt.Sprintf("%s to admit %s", addr, cr.user), func() bool {
			cl, err := kgo.NewClient(append(cr.kgo(c), kgo.SeedBrokers(addr), kgo.RequestRetries(0))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
			defer cancel()
			return cl.Ping(ctx) == nil
		})
	}
}

// endOffsets is every partition's end offset of topics, by "topic/partition".
func endOffsets(t *testing.T, c *kubebrokers.Cluster, topics ...string) map[string]int64 {
	t.Helper()
	ends, err := kadm.NewClient(c.Kgo()).ListEndOffsets(testCtx(t), topics...)
	if err != nil || ends.Error() != nil {
		t.Fatalf("list end offsets of %v: %v %v", topics, err, ends.Error())
	}
	out := map[string]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = o.Offset })
	return out
}

func kgoRecord(topic string, r record) *kgo.Record {
	kr := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: []byte(h.Value)})
	}
	return kr
}

func fromKgo(r *kgo.Record) record {
	out := record{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, header{Key: h.Key, Value: string(h.Value)})
	}
	return out
}

// saramaSCRAM is sarama's SCRAM client hook (sarama ships none) over franz-go's SCRAM
// client (SHA-512 when sha512, else SHA-256), which also checks the server's signature: sarama still does its own framing,
// versions and error handling.
type saramaSCRAM struct {
	sha512 bool
	mech   ksasl.Mechanism
	sess   ksasl.Session
	done   bool
}

func (s *saramaSCRAM) Begin(user, pass, _ string) error {
	s.mech = kscram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	if s.sha512 {
		s.mech = kscram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	}
	return nil
}

func (s *saramaSCRAM) Step(challenge string) (string, error) {
	if s.sess == nil {
		sess, first, err := s.mech.Authenticate(context.Background(), "")
		s.sess = sess
		return string(first), err
	}
	done, msg, err := s.sess.Challenge([]byte(challenge))
	s.done = done
	return string(msg), err
}

func (s *saramaSCRAM) Done() bool { return s.done }

// kcatAs runs kcat against broker 0 as cr (credential.kcat) with stdin and args; it returns
// stdout and stderr together on failure, stdout alone on success.
func kcatAs(t *testing.T, c *kubebrokers.Cluster, cr credential, stdin io.Reader, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.CommandContext(testCtx(t), "kcat", append(append([]string{"-b", c.Addrs[0]}, cr.kcat(c)...), args...)...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return append(stdout.Bytes(), stderr.Bytes()...), err
	}
	return stdout.Bytes(), nil
}
