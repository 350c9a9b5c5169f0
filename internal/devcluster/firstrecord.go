package devcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// The end of paddock dev's bring-up: the sample's brokers Serving, then one record written
// and read back the way a person's first client would — from the host's network, through the
// external listener's bootstrap nodePort — so "it is up" means a record went through.

// welcomeTopic is the topic of paddock dev's first record.
const welcomeTopic = "welcome"

// waitServing waits up to three minutes until brokers brokers of namespace/name are
// registered and Serving.
func waitServing(ctx context.Context, env *Env, namespace, name string, brokers int32) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		var kc kafkav1alpha1.KafkaCluster
		err := env.Client().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &kc)
		if err == nil && kc.Status.Counts.Serving == brokers {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d brokers of %s/%s not Serving: %d serving, %d registered (kubectl describe brokers; logs in %s): %w",
				brokers, namespace, name, kc.Status.Counts.Serving, kc.Status.Counts.Registered, filepath.Join(env.Dir(), "logs", "pods"), errors.Join(err, ctx.Err()))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// firstRecord creates the topic welcome (one partition; it may exist with --keep), produces
// one record to it with acks=all through bootstrap from the host's network and consumes it
// back, within two minutes.
func firstRecord(ctx context.Context, bootstrap string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.Dialer(HostDial),
		kgo.ConsumeTopics(welcomeTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := createWelcomeTopic(ctx, kadm.NewClient(cl)); err != nil {
		return err
	}
	value := "hello from paddock dev at " + time.Now().Format(time.RFC3339Nano)
	if err := produceOnce(ctx, cl, value); err != nil {
		return err
	}
	return consumeUntil(ctx, cl, value)
}

// createWelcomeTopic creates the topic, trying again while the brokers cannot yet.
func createWelcomeTopic(ctx context.Context, adm *kadm.Client) error {
	return retryEvery(ctx, "create topic "+welcomeTopic, func() error {
		_, err := adm.CreateTopic(ctx, 1, 1, nil, welcomeTopic)
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return err
	})
}

// produceOnce produces value, trying again while its partition has no leader yet.
func produceOnce(ctx context.Context, cl *kgo.Client, value string) error {
	return retryEvery(ctx, "produce the first record to "+welcomeTopic, func() error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: welcomeTopic, Value: []byte(value)}).FirstErr()
	})
}

// retryEvery calls try every 500 ms until it succeeds, or until ctx ends: then it fails with
// try's last error.
func retryEvery(ctx context.Context, what string, try func() error) error {
	for {
		err := try()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// consumeUntil reads the topic from its start until it sees value.
func consumeUntil(ctx context.Context, cl *kgo.Client, value string) error {
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("consume the first record from %s: %w", welcomeTopic, ctx.Err())
		}
		found := false
		fetches.EachRecord(func(r *kgo.Record) { found = found || string(r.Value) == value })
		if found {
			return nil
		}
	}
}

// secureRecord proves the sample's secure listener the way its printed kcat line uses it:
// it waits until KafkaUser SampleUser is Ready, writes the cluster CA bundle to caFile (the
// file the line names), then produces one record to the welcome topic and consumes it back
// through bootstrap from the host's network, over TLS verified against that bundle (the
// host address is in every broker certificate) and authenticated with SCRAM-SHA-512 as the
// user, with the password the operator generated. Within two minutes.
func secureRecord(ctx context.Context, env *Env, namespace, cluster, bootstrap, caFile string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var password string
	var bundle []byte
	err := retryEvery(ctx, "KafkaUser "+SampleUser+" Ready and the cluster CA bundle published", func() error {
		var u kafkav1alpha1.KafkaUser
		if err := env.Client().Get(ctx, client.ObjectKey{Namespace: namespace, Name: SampleUser}, &u); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(u.Status.Conditions, kafkav1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("KafkaUser %s is not Ready (kubectl describe kafkauser %s)", SampleUser, SampleUser)
		}
		var own, trust corev1.Secret
		if err := env.Client().Get(ctx, client.ObjectKey{Namespace: namespace, Name: u.Status.Secret}, &own); err != nil {
			return err
		}
		if err := env.Client().Get(ctx, client.ObjectKey{Namespace: namespace, Name: kafkav1alpha1.ClusterCACertSecretName(cluster)}, &trust); err != nil {
			return err
		}
		password, bundle = string(own.Data[kafkav1alpha1.SecretKeyPassword]), trust.Data[kafkav1alpha1.SecretKeyCACert]
		if password == "" || len(bundle) == 0 {
			return errors.New("the user's password or the CA bundle is empty")
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(caFile, bundle, 0o644); err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return fmt.Errorf("secret %s holds no certificate", kafkav1alpha1.ClusterCACertSecretName(cluster))
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := HostDial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		host, _, _ := net.SplitHostPort(addr)
		conn := tls.Client(raw, &tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS12})
		if err := conn.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, err
		}
		return conn, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.Dialer(dial),
		kgo.SASL(scram.Auth{User: SampleUser, Pass: password}.AsSha512Mechanism()),
		kgo.ConsumeTopics(welcomeTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	value := "hello over TLS and SCRAM-SHA-512 at " + time.Now().Format(time.RFC3339Nano)
	if err := produceOnce(ctx, cl, value); err != nil {
		return err
	}
	return consumeUntil(ctx, cl, value)
}
