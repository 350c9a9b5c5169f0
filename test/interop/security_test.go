package interop

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/testkit"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

// TestClientsOverTLSWithScramSHA512: a two-broker cluster whose one listener is
// `tls: true, authentication: {type: scram-sha-512}`, its certificates issued by the real
// certificates reconciler, its credentials read by the brokers' own informers. franz-go
// (produce, consume in a group), sarama (sync producer, partition consumer) and kcat
// (librdkafka: its own TLS, host-name check and SCRAM) each work as user alice; each is
// refused with a wrong password and as an unknown user, and nothing they tried to write
// lands. A plaintext client and a client that does not trust the cluster CA get no answer.
func TestClientsOverTLSWithScramSHA512(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed: run `make kcat` (hack/install-kcat.sh)")
	}
	c := kubebrokers.NewCluster(t, 2, kubebrokers.Options{Namespace: "interop-sec",
		Security: &kubebrokers.Security{TLS: true, Authentication: v1alpha1.AuthenticationScramSHA512, User: "admin", Password: password(t)}})
	alice := password(t)
	c.AddScramUser("alice", alice)
	topics := []string{"secured-kgo", "secured-sarama", "secured-kcat"}
	for _, topic := range topics {
		createSecuredTopic(t, c, topic, 2)
	}
	waitAdmitted(t, c, "alice", alice)

	// Successes first: the failures below count against 127.0.0.1's authentication rate
	// limit (docs/security.md), which would then refuse good credentials too.
	t.Run("franz-go produces and consumes in a group", func(t *testing.T) {
		topic := "secured-kgo"
		recs := testRecords("kgo", 30, true)
		cl := kgoAs(t, c, "alice", alice,
			kgo.ConsumerGroup("kgo-secured"), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
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
		cfg := saramaSecured(c, "alice", alice)
		p, err := sarama.NewSyncProducer(c.Addrs, cfg)
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
		checkReadBack(t, recs, saramaConsume(t, c.Addrs, saramaSecured(c, "alice", alice), topic, recs))
	})
	t.Run("kcat produces and consumes", func(t *testing.T) {
		topic := "secured-kcat"
		var lines bytes.Buffer
		var recs []record
		for i := range 20 {
			r := record{Partition: 0, Offset: -1, Key: fmt.Appendf(nil, "kcat-%d", i), Value: fmt.Appendf(nil, "value %d over SASL_SSL", i)}
			recs = append(recs, r)
			fmt.Fprintf(&lines, "%s\t%s\n", r.Key, r.Value)
		}
		if out, err := kcatSecured(t, c, "alice", alice, &lines, "-P", "-t", topic, "-p", "0", "-K", "\t"); err != nil {
			t.Fatalf("kcat -P: %v\n%s", err, out)
		}
		out, err := kcatSecured(t, c, "alice", alice, nil, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", kcatConsumeFormat)
		if err != nil {
			t.Fatalf("kcat -C: %v\n%s", err, out)
		}
		read, err := parseKcat(out)
		if err != nil {
			t.Fatalf("kcat -C output: %v", err)
		}
		checkReadBack(t, recs, read)
	})
	if t.Failed() {
		return
	}

	before := endOffsets(t, c, topics...)
	const topic = "secured-kgo"
	refusals := map[string][2]string{"a wrong password": {"alice", "not-" + alice}, "an unknown user": {"mallory", alice}}
	for _, why := range []string{"a wrong password", "an unknown user"} {
		user, pass := refusals[why][0], refusals[why][1]
		t.Run("franz-go is refused with "+why, func(t *testing.T) {
			cl := kgoAs(t, c, user, pass, kgo.RequestRetries(0))
			if err := cl.Ping(testCtx(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("ping as %s: %v, want SASL_AUTHENTICATION_FAILED", why, err)
			}
			ctx, cancel := context.WithTimeout(testCtx(t), 3*time.Second)
			defer cancel()
			if err := cl.ProduceSync(ctx, kgoRecord(topic, record{Key: []byte("refused"), Value: []byte("kgo")})).FirstErr(); err == nil {
				t.Fatalf("produce as %s succeeded", why)
			}
		})
		t.Run("sarama is refused with "+why, func(t *testing.T) {
			cfg := saramaSecured(c, user, pass)
			cfg.Metadata.Retry.Max = 0
			p, err := sarama.NewSyncProducer(c.Addrs, cfg)
			if err == nil {
				_ = p.Close()
				t.Fatal("sarama connected")
			}
			if !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
				t.Fatalf("sarama: %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		})
		t.Run("kcat is refused with "+why, func(t *testing.T) {
			out, err := kcatSecured(t, c, user, pass, strings.NewReader("refused\tkcat\n"), "-P", "-t", topic, "-K", "\t",
				"-X", "message.timeout.ms=3000", "-X", "reconnect.backoff.ms=1000")
			if err == nil {
				t.Fatalf("kcat -P as %s succeeded:\n%s", why, out)
			}
			if !strings.Contains(string(out), "Authentication failed") {
				t.Fatalf("kcat -P as %s: %v, output says no authentication failure:\n%s", why, err, out)
			}
		})
	}
	t.Run("a plaintext client gets no answer", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.RequestRetries(0), kgo.DialTimeout(3*time.Second),
			kgo.SASL(kscram.Auth{User: "alice", Pass: alice}.AsSha512Mechanism()))
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
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.RequestRetries(0), kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}),
			kgo.SASL(kscram.Auth{User: "alice", Pass: alice}.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = cl.Ping(ctx)
		var unknown x509.UnknownAuthorityError
		if err == nil || !errors.As(err, &unknown) {
			t.Fatalf("ping with the system roots: %v, want an unknown-authority error", err)
		}
	})
	if after := endOffsets(t, c, topics...); !maps.Equal(before, after) {
		t.Errorf("refused clients wrote: end offsets %v before, %v after", before, after)
	}
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

// waitAdmitted waits until every broker admits user (its informer read the credential).
func waitAdmitted(t *testing.T, c *kubebrokers.Cluster, user, pass string) {
	t.Helper()
	for _, addr := range c.Addrs {
		testkit.Eventually(t, fmt.Sprintf("%s to admit %s", addr, user), func() bool {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(c.TLS.Clone()), kgo.RequestRetries(0),
				kgo.SASL(kscram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
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

// kgoAs is a franz-go client of c over TLS trusting the cluster CA, authenticating with
// SCRAM-SHA-512 as user.
func kgoAs(t *testing.T, c *kubebrokers.Cluster, user, pass string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return kgoClient(t, c.Addrs, append([]kgo.Opt{kgo.DialTLSConfig(c.TLS.Clone()),
		kgo.SASL(kscram.Auth{User: user, Pass: pass}.AsSha512Mechanism())}, opts...)...)
}

// saramaSecured is saramaConfig over TLS trusting the cluster CA, authenticating with
// SCRAM-SHA-512 as user (SaslHandshake v1, then SaslAuthenticate).
func saramaSecured(c *kubebrokers.Cluster, user, pass string) *sarama.Config {
	cfg := saramaConfig()
	cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, c.TLS.Clone()
	cfg.Net.SASL.Enable, cfg.Net.SASL.Handshake, cfg.Net.SASL.Version = true, true, sarama.SASLHandshakeV1
	cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
	cfg.Net.SASL.User, cfg.Net.SASL.Password = user, pass
	cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{} }
	return cfg
}

// saramaSCRAM is sarama's SCRAM client hook (sarama ships none) over franz-go's SCRAM-SHA-512
// client, which also checks the server's signature: sarama still does its own framing,
// versions and error handling.
type saramaSCRAM struct {
	mech sasl.Mechanism
	sess sasl.Session
	done bool
}

func (s *saramaSCRAM) Begin(user, pass, _ string) error {
	s.mech = kscram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
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

// kcatSecured runs kcat against broker 0 over SASL_SSL with SCRAM-SHA-512 as user, trusting
// the cluster CA (librdkafka checks the broker's host name against its certificate), with
// stdin and args; it returns stdout and stderr together on failure, stdout alone on success.
func kcatSecured(t *testing.T, c *kubebrokers.Cluster, user, pass string, stdin io.Reader, args ...string) ([]byte, error) {
	t.Helper()
	base := []string{"-b", c.Addrs[0], "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=" + user, "-X", "sasl.password=" + pass, "-X", "ssl.ca.location=" + c.CAFile,
		"-X", "ssl.endpoint.identification.algorithm=https"}
	cmd := exec.CommandContext(testCtx(t), "kcat", append(base, args...)...)
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
