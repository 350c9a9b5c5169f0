package interop

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/pki"
	"github.com/paddock-dev/paddock/internal/testkit"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

// TestCertificatesRotateUnderLoadWithNothingLost: a TLS + SCRAM-SHA-512 cluster whose broker
// certificates the real certificates reconciler renews every ten seconds (validity 1h,
// renewBefore 59m50s) from a user CA, which is replaced by another CA mid-run (the clients
// trust both, as a user who distributes the new CA before switching does). Meanwhile an
// idempotent acks=all producer writes, a group consumer reads, new TLS connections are made
// every 300 ms and a new SCRAM client produces every 2 s. Every call succeeds, each broker
// presents at least three certificates and finally one of the new CA without restarting, and
// the group reads every acknowledged record exactly once, in order (docs/security.md,
// "Certificates").
func TestCertificatesRotateUnderLoadWithNothingLost(t *testing.T) {
	const day = 24 * time.Hour
	oldCA, err := pki.NewCA("corp CA 1", "corp", time.Now().Add(-time.Hour), 50*day, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	newCA, err := pki.NewCA("corp CA 2", "corp", time.Now().Add(-time.Hour), 50*day, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "corp-ca"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: oldCA.CertPEM, corev1.TLSPrivateKeyKey: oldCA.KeyPEM}}
	c := kubebrokers.NewCluster(t, 2, kubebrokers.Options{Namespace: "rotate",
		Security: &kubebrokers.Security{TLS: true, Authentication: v1alpha1.AuthenticationScramSHA512, User: "admin", Password: password(t)},
		Certificates: v1alpha1.Certificates{Validity: &metav1.Duration{Duration: time.Hour}, RenewBefore: &metav1.Duration{Duration: time.Hour - 10*time.Second},
			ClusterCA: &v1alpha1.CertificateAuthority{SecretName: "corp-ca"}},
		Objects: []client.Object{caSecret}})
	pool := x509.NewCertPool()
	pool.AddCert(oldCA.Cert)
	pool.AddCert(newCA.Cert)
	trust := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	const topic = "rotating"
	createSecuredTopic(t, c, topic, 4)

	ctx, stop := context.WithCancel(testCtx(t))
	defer stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[int32][]kgo.Record{} // by partition
	ack := func(r *kgo.Record) {
		mu.Lock()
		acked[r.Partition] = append(acked[r.Partition], *r)
		mu.Unlock()
	}
	var failures atomic.Int64
	fail := func(format string, args ...any) {
		failures.Add(1)
		t.Errorf(format, args...)
	}

	var disconnects atomic.Int64
	producer := c.Kgo(kgo.DialTLSConfig(trust.Clone()), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.WithHooks(disconnectCounter{&disconnects}))
	defer producer.Close()
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			r := &kgo.Record{Key: []byte(strconv.Itoa(i % 64)), Value: []byte(strconv.Itoa(i))}
			if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
				if ctx.Err() == nil {
					fail("produce %d: %v", i, err)
				}
				return
			}
			ack(r)
		}
	})
	wg.Go(func() { // a new SCRAM client every 2 s: a handshake and a login against the newest certificate
		for i := 0; ctx.Err() == nil; i++ {
			cl := c.Kgo(kgo.DialTLSConfig(trust.Clone()), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
			r := &kgo.Record{Key: []byte("fresh"), Value: []byte("fresh-" + strconv.Itoa(i))}
			err := cl.ProduceSync(ctx, r).FirstErr()
			cl.Close()
			switch {
			case err == nil:
				ack(r)
			case ctx.Err() == nil:
				fail("a new client's produce: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	})

	// The TLS prober: which certificate each broker presents to a new connection.
	type presented struct {
		serials map[string]bool
		newCA   bool
	}
	seen := make([]presented, len(c.Addrs))
	for i := range seen {
		seen[i].serials = map[string]bool{}
	}
	probe := func() {
		for id, addr := range c.Addrs {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, trust.Clone())
			if err != nil {
				fail("a TLS connection to broker %d: %v", id, err)
				continue
			}
			leaf := conn.ConnectionState().PeerCertificates[0]
			_ = conn.Close()
			mu.Lock()
			seen[id].serials[leaf.SerialNumber.String()] = true
			seen[id].newCA = seen[id].newCA || pki.SignedBy(leaf, newCA.Cert)
			mu.Unlock()
		}
	}
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range seen {
			if len(p.serials) < 3 || !p.newCA {
				return false
			}
		}
		return true
	}

	consumer := c.Kgo(kgo.DialTLSConfig(trust.Clone()), kgo.ConsumerGroup("rotating-readers"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer consumer.Close()
	var read []*kgo.Record
	readCtx, stopReading := context.WithCancel(testCtx(t))
	defer stopReading()
	var readers sync.WaitGroup
	readers.Go(func() {
		for readCtx.Err() == nil {
			fs := consumer.PollFetches(readCtx)
			fs.EachError(func(tp string, p int32, err error) {
				if readCtx.Err() == nil {
					fail("consume %s/%d: %v", tp, p, err)
				}
			})
			mu.Lock()
			read = append(read, fs.Records()...)
			mu.Unlock()
		}
	})

	start := time.Now()
	swapped := false
	for deadline := start.Add(3 * time.Minute); !done(); time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %s each broker presented %+v; want three certificates and one of the new CA each", time.Since(start), seen)
		}
		probe()
		if !swapped && time.Since(start) > 12*time.Second {
			// The user replaces the CA: the reconciler issues every certificate from it at its
			// next look.
			caSecret.Data = map[string][]byte{corev1.TLSCertKey: newCA.CertPEM, corev1.TLSPrivateKeyKey: newCA.KeyPEM}
			if err := kubebrokers.Env.Client.Update(ctx, caSecret); err != nil {
				t.Fatal(err)
			}
			swapped = true
		}
	}
	took := time.Since(start)
	stop()
	wg.Wait()

	// Every acknowledged record is read by the group, once and in order.
	want := 0
	mu.Lock()
	for _, rs := range acked {
		want += len(rs)
	}
	mu.Unlock()
	testkit.Eventually(t, fmt.Sprintf("the group to read all %d acknowledged records", want), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(read) >= want
	})
	stopReading()
	readers.Wait()
	byPartition := map[int32][]*kgo.Record{}
	for _, r := range read {
		byPartition[r.Partition] = append(byPartition[r.Partition], r)
	}
	for p, rs := range acked {
		// Two producers acknowledge concurrently: their callbacks may run out of offset order.
		slices.SortFunc(rs, func(a, b kgo.Record) int { return cmp.Compare(a.Offset, b.Offset) })
		got := byPartition[p]
		if len(got) != len(rs) {
			t.Fatalf("partition %d: read %d records, %d were acknowledged", p, len(got), len(rs))
		}
		for i := range rs {
			if got[i].Offset != rs[i].Offset || string(got[i].Value) != string(rs[i].Value) {
				t.Fatalf("partition %d: record %d read as offset %d %q, acknowledged at %d %q", p, i, got[i].Offset, got[i].Value, rs[i].Offset, rs[i].Value)
			}
		}
	}
	for id := range c.Addrs {
		if c.Exited(int32(id)) {
			t.Fatalf("broker %d exited during the rotation", id)
		}
	}
	if failures.Load() > 0 {
		t.Fatalf("%d client calls failed during the rotation", failures.Load())
	}
	t.Logf("rotation under load: %s; certificates presented per broker: %d and %d, the last of the new CA; %d records acknowledged and read once; "+
		"the producer's connections closed %d times", took.Round(time.Second), len(seen[0].serials), len(seen[1].serials), want, disconnects.Load())
}

// disconnectCounter counts a client's closed broker connections.
type disconnectCounter struct{ n *atomic.Int64 }

func (d disconnectCounter) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { d.n.Add(1) }
