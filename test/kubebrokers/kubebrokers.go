// Package kubebrokers is the harness the interop suites (test/topics, test/groups) share:
// paddock brokers run in-process on informer views of a real kube-apiserver (envtest), with
// the real assignment and provisioning reconcilers placing leaders, keeping the coordinator
// epoch and writing the broker Role, and the real KafkaUser reconciler issuing users'
// passwords and certificates. The brokers reach the API server as their own
// ServiceAccount (impersonated), so every write they make also proves the Role grants it. The
// registry is hand-made: each test writes the rows of its brokers (SetRows).
//
// A Cluster with Options.Security serves its listener with TLS and/or authentication: the real
// certificates reconciler issues the brokers' certificates (for the 127.0.0.1 they advertise),
// the brokers read them, the SCRAM credentials and the KafkaUsers through their own informers
// (broker/cluster.InformerSecurity, as their ServiceAccount), and the harness' own clients
// trust the cluster CA and authenticate as Security.User.
//
// It is imported by tests only.
package kubebrokers

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/groups"
	"github.com/paddock-dev/paddock/controllers/assignment"
	"github.com/paddock-dev/paddock/controllers/certificates"
	"github.com/paddock-dev/paddock/controllers/kafkacluster"
	"github.com/paddock-dev/paddock/controllers/kafkauser"
	"github.com/paddock-dev/paddock/internal/pki"
	"github.com/paddock-dev/paddock/internal/scram"
	"github.com/paddock-dev/paddock/internal/testenv"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// ClusterName is every test's KafkaCluster name (each test has its own namespace).
const ClusterName = "c"

// Env is the control plane every test of the suite shares, set by Main.
var Env *testenv.Env

// Main starts the control plane and a manager running the assignment, certificates, KafkaUser and provisioning
// reconcilers for every namespace, runs the suite's tests and stops everything; suite names
// the suite in error output. TestMain calls os.Exit(kubebrokers.Main(m, "topics")).
func Main(m *testing.M, suite string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, suite+":", err)
		return 1
	}
	var err error
	if Env, err = testenv.Start(); err != nil {
		return fail(err)
	}
	defer func() {
		if err := Env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, suite+":", err)
		}
	}()
	mgr, err := Env.NewManager()
	if err != nil {
		return fail(err)
	}
	if err := (&assignment.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("assignment")}).SetupWithManager(mgr); err != nil {
		return fail(err)
	}
	certs := &certificates.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("certificates")}
	if err := certs.SetupWithManager(mgr); err != nil {
		return fail(err)
	}
	users := &kafkauser.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("kafkauser")}
	if err := users.SetupWithManager(mgr); err != nil {
		return fail(err)
	}
	provisioning := &kafkacluster.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("kafkacluster"),
		Options: kafkacluster.Options{DefaultBrokerImage: "paddock:test"},
	}
	if err := provisioning.SetupWithManager(mgr); err != nil {
		return fail(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	stop()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, suite+": manager:", err)
	}
	return code
}

// Options configure a Cluster.
type Options struct {
	// Config is the KafkaCluster's spec.config.
	Config map[string]string
	// Limits is the KafkaCluster's spec.limits (zero: the defaults).
	Limits v1alpha1.ClusterLimits
	// Namespace prefixes the test's namespace name (default "kb").
	Namespace string
	// GroupConfig is every broker's Broker.GroupConfig.
	GroupConfig func(*groups.Config)
	// DrainTimeout is every broker's --drain-timeout (default 1 s).
	DrainTimeout time.Duration
	// Security secures the cluster's one listener; nil: plaintext, everyone User:ANONYMOUS.
	Security *Security
	// Authorization is the KafkaCluster's spec.authorization (nil: none, everyone may do
	// everything). The harness' own user needs to be one of its super users.
	Authorization *v1alpha1.Authorization
	// Certificates is the KafkaCluster's spec.certificates.
	Certificates v1alpha1.Certificates
	// Objects are created in the test's namespace before the KafkaCluster (a user CA's
	// Secret, say).
	Objects []client.Object
}

// Security is the listener's tls and authentication (spec.listeners[].tls, .authentication)
// and the SCRAM user the harness' clients (Kgo, MetadataOn) authenticate as.
type Security struct {
	TLS            bool
	Authentication v1alpha1.ListenerAuthenticationType
	// User and Password: the harness' own user. With SCRAM or PLAIN its credentials are
	// written (AddScramUser) before the brokers start; with mutual TLS it is a tls KafkaUser
	// whose certificate the KafkaUser reconciler issues from the clients CA (AddTLSUser).
	User, Password string
}

// Cluster is one test's KafkaCluster ClusterName in its own namespace, with in-process
// brokers sharing one data directory (the shared volume).
type Cluster struct {
	T  *testing.T
	NS string
	// Addrs[i] is broker i's Kafka address, HealthAddrs[i] its /metrics, /healthz, /readyz.
	Addrs, HealthAddrs []string
	DataDir            string
	// Rows are the registry rows SetRows writes.
	Rows []v1alpha1.BrokerRow

	// CAFile is the cluster CA bundle (Secret c-cluster-ca-cert, ca.crt) written to a file,
	// and TLS a client configuration trusting it; empty and nil without Security.TLS.
	CAFile string
	TLS    *tls.Config
	// ClientsCA is the clients CA (Secret c-clients-ca) with a mutual-TLS listener; nil
	// otherwise.
	ClientsCA *pki.CA

	opts     Options
	identity *rest.Config
	kube     client.Client
	stops    []func() // stops[i] ends broker i's process and waits for it
	procs    []*process
}

// process is one running broker process.
type process struct {
	signals chan os.Signal
	exited  chan struct{}
	err     error // Run's result, once exited is closed
}

// NewCluster creates the cluster with spec.config, waits for the provisioning reconciler to
// write the broker Role and RoleBinding, and starts n brokers that reach the API server as the
// broker ServiceAccount; their registry rows say Serving and Alive.
func NewCluster(t *testing.T, n int, opts Options) *Cluster {
	t.Helper()
	ctx := testkit.Context(t)
	prefix := opts.Namespace
	if prefix == "" {
		prefix = "kb"
	}
	ns, err := testenv.NewNamespace(ctx, Env.Client, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = Env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) // best effort; envtest stops anyway
	})
	for _, o := range opts.Objects {
		o.SetNamespace(ns)
		if err := Env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	kc := &v1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: ClusterName, Namespace: ns},
		Spec: v1alpha1.KafkaClusterSpec{Replicas: int32(n), Config: opts.Config, Limits: opts.Limits, Authorization: opts.Authorization,
			Certificates: opts.Certificates}}
	if sec := opts.Security; sec != nil {
		l := v1alpha1.Listener{Name: "kafka", Port: 9092, TLS: sec.TLS}
		if sec.Authentication != "" {
			l.Authentication = &v1alpha1.ListenerAuthentication{Type: sec.Authentication}
		}
		kc.Spec.Listeners = []v1alpha1.Listener{l}
	}
	if err := Env.Client.Create(ctx, kc); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the broker RoleBinding", func() bool {
		return Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.StatefulSetName(ClusterName)}, &rbacv1.RoleBinding{}) == nil
	})

	c := &Cluster{T: t, NS: ns, DataDir: t.TempDir(), opts: opts, identity: brokerIdentity(ns)}
	if c.kube, err = client.New(c.identity, client.Options{Scheme: Env.Scheme}); err != nil {
		t.Fatal(err)
	}
	if sec := opts.Security; sec != nil && sec.User != "" && sec.Authentication != v1alpha1.AuthenticationTLS {
		c.AddScramUser(sec.User, sec.Password)
	}
	for i := range int32(n) {
		addr, health, stop, p := c.startBroker(t, i)
		c.Addrs = append(c.Addrs, addr)
		c.HealthAddrs = append(c.HealthAddrs, health)
		c.stops = append(c.stops, stop)
		c.procs = append(c.procs, p)
		c.Rows = append(c.Rows, v1alpha1.BrokerRow{ID: i, State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive, Epoch: 1})
		c.setAddress(i, addr)
	}
	c.SetRows()
	if opts.Security != nil && opts.Security.TLS {
		c.trustClusterCA()
	}
	// Until a broker's informer has seen the admin KafkaUser (mutual TLS) it refuses the
	// connection: that is retried here, not fatal.
	for id := range n {
		testkit.Eventually(t, fmt.Sprintf("broker %d to list every broker", id), func() bool {
			md, err := c.tryMetadataOn(ctx, id)
			return err == nil && len(md.Brokers) == n
		})
	}
	return c
}

// brokerIdentity is a rest config that acts as the brokers' ServiceAccount c-broker.
func brokerIdentity(ns string) *rest.Config {
	cfg := rest.CopyConfig(Env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", ns, v1alpha1.StatefulSetName(ClusterName)),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	return cfg
}

// setAddress points broker id's row at addr.
func (c *Cluster) setAddress(id int32, addr string) {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	r := &c.Rows[id]
	r.Host, r.Port = host, int32(p)
	r.Listeners = []v1alpha1.ListenerAddress{{Name: "kafka", Host: host, Port: int32(p)}}
}

// RestartBroker plays a broker process restarting before the registry declared it dead
// (kill -9, then the container restarts): broker id's process stops at once — no drain,
// its group fences and partition claims left as they were — and a new process with the same
// id starts on the same data directory, on new ports; its registry row stays Alive with the
// next epoch (the Lease's leaseTransitions) and the new address.
func (c *Cluster) RestartBroker(id int32) {
	c.T.Helper()
	c.stops[id]()
	addr, health, stop, p := c.startBroker(c.T, id)
	c.Addrs[id], c.HealthAddrs[id], c.stops[id], c.procs[id] = addr, health, stop, p
	c.Rows[id].Epoch++
	c.setAddress(id, addr)
	c.SetRows()
}

// Drain plays a SIGTERM and the registry's answer to its draining beat: broker id gets
// SIGTERM and its row turns Draining (it leaves the alive set), so the assignment reconciler
// moves its partitions and bumps the coordinator epoch. It does not wait (WaitExit does).
func (c *Cluster) Drain(id int32) {
	c.T.Helper()
	c.procs[id].signals <- syscall.SIGTERM
	c.Rows[id].Health = v1alpha1.BrokerDraining
	c.SetRows()
}

// WaitExit waits up to testkit.Deadline for broker id's process to end and gives Run's result.
func (c *Cluster) WaitExit(id int32) (err error, exited bool) {
	p := c.procs[id]
	select {
	case <-p.exited:
		return p.err, true
	case <-time.After(testkit.Deadline):
		return nil, false
	}
}

// Exited reports whether broker id's process has ended.
func (c *Cluster) Exited(id int32) bool {
	select {
	case <-c.procs[id].exited:
		return true
	default:
		return false
	}
}

// startBroker runs broker id in-process until the test ends (or stop) and returns its
// Kafka and health addresses.
func (c *Cluster) startBroker(t *testing.T, id int32) (kafkaAddr, healthAddr string, stop func(), p *process) {
	t.Helper()
	view, err := cluster.NewInformerView(c.identity, Env.Scheme, c.NS, ClusterName, testr.New(t).WithName("view"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := view.Start(ctx); err != nil {
		cancel()
		t.Fatalf("start the view of broker %d: %v", id, err)
	}
	bc := broker.Config{
		Cluster:     ClusterName,
		Listeners:   []cluster.ListenerSpec{{Name: "kafka", Port: int32(testkit.FreePort(t)), Host: "127.0.0.1"}},
		HealthPort:  testkit.FreePort(t),
		BindAddress: "127.0.0.1", DrainTimeout: cmp.Or(c.opts.DrainTimeout, time.Second), HeartbeatInterval: 100 * time.Millisecond,
		DataDir:  c.DataDir,
		Identity: cluster.Identity{ID: id, Pod: fmt.Sprintf("c-broker-%d", id), Namespace: c.NS},
	}
	if sec := c.opts.Security; sec != nil {
		bc.Listeners[0].TLS, bc.Listeners[0].Authentication = sec.TLS, sec.Authentication
	}
	b := broker.NewBroker(bc, view, testr.New(t).WithValues("broker", id))
	if bc.Secured() {
		sec, err := cluster.NewInformerSecurity(c.identity, Env.Scheme, c.NS, ClusterName, id, testr.New(t).WithName("security"))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if err := sec.Start(ctx); err != nil {
			cancel()
			t.Fatalf("start the security informers of broker %d: %v", id, err)
		}
		b.Security = sec
	}
	b.Admin = &cluster.Admin{Client: c.kube, Namespace: c.NS, Cluster: ClusterName}
	b.GroupConfig = c.opts.GroupConfig
	type addrs struct{ kafka, health string }
	listening := make(chan addrs, 1)
	b.OnListening = func(kafka []net.Addr, health net.Addr) { listening <- addrs{kafka[0].String(), health.String()} }
	p = &process{signals: make(chan os.Signal, 2), exited: make(chan struct{})}
	go func() {
		p.err = b.Run(ctx, p.signals)
		close(p.exited)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-p.exited
			if p.err != nil && !errors.Is(p.err, context.Canceled) {
				t.Errorf("broker %d stopped: %v", id, p.err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case a := <-listening:
		return a.kafka, a.health, stop, p
	case <-p.exited:
		t.Fatalf("broker %d stopped at start: %v", id, p.err)
	}
	return "", "", nil, nil
}

// SetRows writes the cluster's registry rows (status.brokers and counts), standing in for
// the registry reconciler.
func (c *Cluster) SetRows() {
	c.T.Helper()
	counts := v1alpha1.BrokerCounts{Registered: int32(len(c.Rows))}
	for _, r := range c.Rows {
		if r.Health == v1alpha1.BrokerAlive {
			counts.Alive++
		} else {
			counts.Dead++
		}
		if r.State == v1alpha1.BrokerServing {
			counts.Serving++
		} else {
			counts.Fenced++
		}
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"brokers": c.Rows, "counts": counts}})
	if err != nil {
		c.T.Fatal(err)
	}
	kc := &v1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.NS, Name: ClusterName}}
	if err := Env.Client.Status().Patch(context.Background(), kc, client.RawPatch(types.MergePatchType, body)); err != nil {
		c.T.Fatalf("write registry rows: %v", err)
	}
}

// Kgo is a client seeded with every broker, closed when the test ends. On a secured cluster
// it trusts the cluster CA and authenticates as Security.User (opts may override both).
func (c *Cluster) Kgo(opts ...kgo.Opt) *kgo.Client {
	c.T.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs...)}, c.clientSecurity()...), opts...)...)
	if err != nil {
		c.T.Fatal(err)
	}
	c.T.Cleanup(cl.Close)
	return cl
}

// MetadataOn asks broker id alone (a raw request to its address, not routed by a client) for
// the Metadata of topics (nil: all). Admin requests go to the controller, broker 0, and wait
// for its view; the other brokers' views follow a moment later, as in Kafka.
func (c *Cluster) MetadataOn(ctx context.Context, id int, topics ...string) *kmsg.MetadataResponse {
	c.T.Helper()
	resp, err := c.tryMetadataOn(ctx, id, topics...)
	if err != nil {
		c.T.Fatal(err)
	}
	return resp
}

// tryMetadataOn is MetadataOn returning its error.
func (c *Cluster) tryMetadataOn(ctx context.Context, id int, topics ...string) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs[id])}, c.clientSecurity()...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("metadata from broker %d: %w", id, err)
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// ClusterID is the cluster's status.clusterID, once the provisioning reconciler minted it.
func (c *Cluster) ClusterID() string {
	c.T.Helper()
	var id string
	testkit.Eventually(c.T, "the cluster id", func() bool {
		kc := &v1alpha1.KafkaCluster{}
		if err := Env.Client.Get(context.Background(), client.ObjectKey{Namespace: c.NS, Name: ClusterName}, kc); err != nil {
			return false
		}
		id = kc.Status.ClusterID
		return id != ""
	})
	return id
}

// clientSecurity is what the harness' kgo clients need to reach the listener: the cluster CA
// and Security.User's SCRAM mechanism.
func (c *Cluster) clientSecurity() []kgo.Opt {
	sec := c.opts.Security
	if sec == nil {
		return nil
	}
	var opts []kgo.Opt
	if c.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(c.TLS.Clone()))
	}
	auth := kscram.Auth{User: sec.User, Pass: sec.Password}
	switch sec.Authentication {
	case v1alpha1.AuthenticationPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: sec.User, Pass: sec.Password}.AsMechanism()))
	case v1alpha1.AuthenticationScramSHA512:
		opts = append(opts, kgo.SASL(auth.AsSha512Mechanism()))
	case v1alpha1.AuthenticationScramSHA256:
		opts = append(opts, kgo.SASL(auth.AsSha256Mechanism()))
	}
	return opts
}

// trustClusterCA waits for the certificates reconciler's cluster CA bundle and sets CAFile
// and TLS from it.
func (c *Cluster) trustClusterCA() {
	c.T.Helper()
	var bundle []byte
	testkit.Eventually(c.T, "the cluster CA bundle", func() bool {
		sec := &corev1.Secret{}
		err := Env.Client.Get(context.Background(), client.ObjectKey{Namespace: c.NS, Name: v1alpha1.ClusterCACertSecretName(ClusterName)}, sec)
		bundle = sec.Data[v1alpha1.SecretKeyCACert]
		return err == nil && len(bundle) > 0
	})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		c.T.Fatalf("secret %s: ca.crt holds no certificate", v1alpha1.ClusterCACertSecretName(ClusterName))
	}
	c.CAFile = filepath.Join(c.T.TempDir(), "ca.crt")
	if err := os.WriteFile(c.CAFile, bundle, 0o600); err != nil {
		c.T.Fatal(err)
	}
	c.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if sec := c.opts.Security; sec.Authentication == v1alpha1.AuthenticationTLS {
		c.ClientsCA = c.readClientsCA()
		cert, _, _ := c.AddTLSUser(sec.User)
		c.TLS.Certificates = []tls.Certificate{cert}
	}
	// A broker's first certificate may predate its registry row (it then names no
	// 127.0.0.1); the reconciler re-issues it once the row advertises the address.
	for id, addr := range c.Addrs {
		testkit.Eventually(c.T, fmt.Sprintf("broker %d to present a certificate for %s", id, addr), func() bool {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, c.TLS.Clone())
			if err != nil {
				return false
			}
			_ = conn.Close()
			return true
		})
	}
}

// readClientsCA waits for the certificates reconciler's clients CA and parses it.
func (c *Cluster) readClientsCA() *pki.CA {
	c.T.Helper()
	var ca *pki.CA
	testkit.Eventually(c.T, "the clients CA", func() bool {
		sec := &corev1.Secret{}
		if err := Env.Client.Get(context.Background(), client.ObjectKey{Namespace: c.NS, Name: v1alpha1.ClientsCASecretName(ClusterName)}, sec); err != nil {
			return false
		}
		var err error
		ca, err = pki.ParseCA(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
		return err == nil
	})
	return ca
}

// AddTLSUser creates the tls KafkaUser name (principal User:CN=<name>) and waits for the
// KafkaUser reconciler to issue its client certificate from the clients CA into Secret
// <name> (docs/security.md, "KafkaUser"); it returns the certificate and the files holding
// it and its key.
func (c *Cluster) AddTLSUser(name string) (cert tls.Certificate, certFile, keyFile string) {
	c.T.Helper()
	if c.ClientsCA == nil {
		c.T.Fatal("AddTLSUser: the cluster has no mutual-TLS listener")
	}
	sec := c.createUser(name, v1alpha1.UserTLS)
	certPEM, keyPEM := sec.Data[v1alpha1.SecretKeyUserCert], sec.Data[v1alpha1.SecretKeyUserKey]
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		c.T.Fatalf("secret %s: %v", name, err)
	}
	dir := c.T.TempDir()
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	for path, data := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			c.T.Fatal(err)
		}
	}
	return cert, certFile, keyFile
}

// AddKafkaUser creates the scram-sha-512 KafkaUser name (with acls) and returns the password the
// KafkaUser reconciler generated into Secret <name>, once the user is Ready.
func (c *Cluster) AddKafkaUser(name string, acls ...v1alpha1.ACLRule) (password string) {
	c.T.Helper()
	return string(c.createUser(name, v1alpha1.UserScramSHA512, acls...).Data[v1alpha1.SecretKeyPassword])
}

// createUser creates KafkaUser name of auth with acls and returns its Secret once it is Ready.
func (c *Cluster) createUser(name string, auth v1alpha1.UserAuthenticationType, acls ...v1alpha1.ACLRule) *corev1.Secret {
	c.T.Helper()
	ctx := context.Background()
	u := &v1alpha1.KafkaUser{ObjectMeta: metav1.ObjectMeta{Namespace: c.NS, Name: name}, Spec: v1alpha1.KafkaUserSpec{
		Cluster: ClusterName, Authentication: &v1alpha1.UserAuthentication{Type: auth}}}
	if len(acls) > 0 {
		u.Spec.Authorization = &v1alpha1.UserAuthorization{ACLs: acls}
	}
	if err := Env.Client.Create(ctx, u); err != nil {
		c.T.Fatalf("create kafkauser %s: %v", name, err)
	}
	testkit.Eventually(c.T, "KafkaUser "+name+" Ready", func() bool {
		if err := Env.Client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return false
		}
		return meta.IsStatusConditionTrue(u.Status.Conditions, v1alpha1.ConditionReady)
	})
	sec := &corev1.Secret{}
	if err := Env.Client.Get(ctx, client.ObjectKey{Namespace: c.NS, Name: u.Status.Secret}, sec); err != nil {
		c.T.Fatalf("the Secret of KafkaUser %s: %v", name, err)
	}
	return sec
}

// AddScramUser gives user the SCRAM-SHA-256 and SCRAM-SHA-512 credentials of password
// (4096 iterations, a random salt) in the cluster's credentials Secret, as the operator writes
// a scram KafkaUser's (docs/security.md, "Secrets and who reads them"); the brokers admit the
// user once their informers read it.
func (c *Cluster) AddScramUser(user, password string) {
	c.T.Helper()
	stored := scram.Stored{}
	for _, m := range scram.Mechanisms {
		salt := make([]byte, 16)
		if _, err := rand.Read(salt); err != nil {
			c.T.Fatal(err)
		}
		cred, err := m.Salt(password, salt, scram.MinIterations)
		if err != nil {
			c.T.Fatal(err)
		}
		stored[m.Name] = cred
	}
	ctx := context.Background()
	key := client.ObjectKey{Namespace: c.NS, Name: v1alpha1.ScramCredentialsSecretName(ClusterName)}
	sec := &corev1.Secret{}
	switch err := Env.Client.Get(ctx, key, sec); {
	case apierrors.IsNotFound(err):
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Data: map[string][]byte{user: stored.Encode()}}
		err = Env.Client.Create(ctx, sec)
		if err != nil {
			c.T.Fatalf("create secret %s: %v", key.Name, err)
		}
	case err != nil:
		c.T.Fatalf("get secret %s: %v", key.Name, err)
	default:
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data[user] = stored.Encode()
		if err := Env.Client.Update(ctx, sec); err != nil {
			c.T.Fatalf("update secret %s: %v", key.Name, err)
		}
	}
}
