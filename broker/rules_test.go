package broker

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/storage"
)

func TestDrainedOnlyWhenTheViewGivesNoPartitionAndNoGroup(t *testing.T) {
	alive := v1alpha1.BrokerRow{ID: 3, Health: v1alpha1.BrokerAlive}
	draining := v1alpha1.BrokerRow{ID: 3, Health: v1alpha1.BrokerDraining}
	ledHere := []cluster.Topic{{Name: "t", Partitions: []cluster.Partition{{Index: 0, Leader: 1}, {Index: 1, Leader: 3}}}}
	ledElsewhere := []cluster.Topic{{Name: "t", Partitions: []cluster.Partition{{Index: 0, Leader: 1}, {Index: 1, Leader: -1}}}}
	for _, tt := range []struct {
		name string
		s    cluster.Snapshot
		want bool
	}{
		{"alive in the registry still coordinates groups", cluster.Snapshot{Brokers: []v1alpha1.BrokerRow{alive}, Topics: ledElsewhere}, false},
		{"draining but still leading a partition", cluster.Snapshot{Brokers: []v1alpha1.BrokerRow{draining}, Topics: ledHere}, false},
		{"draining and leading nothing", cluster.Snapshot{Brokers: []v1alpha1.BrokerRow{draining}, Topics: ledElsewhere}, true},
		{"not registered and leading nothing", cluster.Snapshot{Topics: ledElsewhere}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := cluster.NewMemoryView(tt.s)
			if got := drained(v.Snapshot(), 3); got != tt.want {
				t.Fatalf("drained = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestConfigFromFlagsAndEnvironment(t *testing.T) {
	env := map[string]string{
		"POD_NAME": "prod-broker-12", "POD_NAMESPACE": "kafka", "POD_UID": "u", "POD_IP": "10.1.2.3",
		"PADDOCK_CLUSTER": "prod", "PADDOCK_DRAIN_TIMEOUT": "90s", "PADDOCK_HEALTH_PORT": "9000",
	}
	getenv := func(k string) string { return env[k] }
	parse := func(args ...string) (Config, error) {
		var cfg Config
		var lists listFlags
		fs, envErrs := newFlagSet(&cfg, &lists, getenv)
		fs.SetOutput(&strings.Builder{})
		if err := fs.Parse(args); err != nil {
			return cfg, err
		}
		return cfg, parseConfig(&cfg, lists, *envErrs, getenv)
	}

	cfg, err := parse("--listeners=internal:9092:PodDNS,external:9094:PodIP", "--health-port=9644", "--cluster-domain=example.org")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Identity.ID != 12 || cfg.Cluster != "prod" || cfg.DrainTimeout != 90*time.Second || cfg.HealthPort != 9644 {
		t.Fatalf("config %+v: want id 12 from POD_NAME, cluster and drain timeout from env, flag health port", cfg)
	}
	wantListeners := []cluster.ListenerSpec{
		{Name: "internal", Port: 9092, Type: v1alpha1.ListenerInternal, Mode: v1alpha1.AdvertisePodDNS, Host: "prod-broker-12.prod-brokers.kafka.svc.example.org"},
		{Name: "external", Port: 9094, Type: v1alpha1.ListenerInternal, Mode: v1alpha1.AdvertisePodIP, Host: "10.1.2.3"},
	}
	if !slices.Equal(cfg.Listeners, wantListeners) {
		t.Fatalf("listeners %+v, want %+v", cfg.Listeners, wantListeners)
	}
	if cfg.Identity.HolderIdentity() != "prod-broker-12_u" {
		t.Fatalf("holder %q", cfg.Identity.HolderIdentity())
	}

	if cfg.Bounds.MaxConnections != DefaultBounds().MaxConnections {
		t.Fatalf("max connections %d without a flag, want the default %d", cfg.Bounds.MaxConnections, DefaultBounds().MaxConnections)
	}
	env["PADDOCK_CONNECTIONS_MAX_IDLE_MS"] = "60000"
	cfg, err = parse("--max-connections=5", "--max-connections-per-ip-overrides=10.0.0.1:2")
	delete(env, "PADDOCK_CONNECTIONS_MAX_IDLE_MS")
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Bounds; b.MaxConnections != 5 || b.ConnectionsMaxIdle != time.Minute || b.MaxConnectionsPerIPOverrides[netip.MustParseAddr("10.0.0.1")] != 2 {
		t.Fatalf("bounds %+v: want max connections 5 and the override from flags, the idle timeout from PADDOCK_CONNECTIONS_MAX_IDLE_MS", b)
	}

	for _, bad := range [][]string{
		{"--listeners=kafka:0:PodDNS"},
		{"--listeners=kafka:9092:Public"},
		{"--listeners=a:1,a:2"},
		{"--session-timeout=1500ms"},
		{"--heartbeat-interval=10s"},
		{"--socket-request-max-bytes=4"},
		{"--max-connections-per-ip-overrides=somehost:3"},
		{"--queued-max-request-bytes=-2"},
	} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	env["POD_NAME"] = "no-ordinal"
	if _, err := parse(); err == nil {
		t.Error("a pod name without an ordinal was accepted")
	}
}

// The broker takes its id by the registry's own rule (internal/registry.Ordinal), so it can
// never claim an id the registry refuses to register.
func TestBrokerIDIsTheRegistrysOrdinal(t *testing.T) {
	for _, tc := range []struct {
		pod    string
		id     int32
		wantOK bool
	}{
		{"prod-broker-0", 0, true},
		{"prod-broker-12", 12, true},
		{"prod-broker-012", 0, false},       // zero-padded: the registry ignores it
		{"other-broker-3", 0, false},        // another cluster's StatefulSet
		{"prod-broker-1-debug-7", 0, false}, // a trailing number is not enough
		{"prod-7", 0, false},
		{"prod-broker-2147483648", 0, false},
	} {
		env := map[string]string{"POD_NAME": tc.pod, "POD_NAMESPACE": "kafka"}
		var cfg Config
		var lists listFlags
		fs, envErrs := newFlagSet(&cfg, &lists, func(k string) string { return env[k] })
		fs.SetOutput(&strings.Builder{})
		if err := fs.Parse([]string{"--cluster=prod"}); err != nil {
			t.Fatal(err)
		}
		err := parseConfig(&cfg, lists, *envErrs, func(k string) string { return env[k] })
		if ok := err == nil; ok != tc.wantOK || (ok && cfg.Identity.ID != tc.id) {
			t.Errorf("POD_NAME=%s: id %d, err %v; want id %d accepted=%v", tc.pod, cfg.Identity.ID, err, tc.id, tc.wantOK)
		}
	}
}

// --listeners gives an external listener's type in place of the mode, and
// --advertised-host-templates its host template, expanded with the pod identity except for
// {nodeAddress}, which only the node answers.
func TestListenerFlagsCarryTheTypeAndTheTemplate(t *testing.T) {
	env := map[string]string{"POD_NAME": "c-broker-3", "POD_NAMESPACE": "kafka", "POD_IP": "10.1.2.3", "NODE_NAME": "n7"}
	parse := func(args ...string) (Config, error) {
		var cfg Config
		var lists listFlags
		fs, envErrs := newFlagSet(&cfg, &lists, func(k string) string { return env[k] })
		fs.SetOutput(&strings.Builder{})
		if err := fs.Parse(append([]string{"--cluster=c"}, args...)); err != nil {
			return cfg, err
		}
		return cfg, parseConfig(&cfg, lists, *envErrs, func(k string) string { return env[k] })
	}
	cfg, err := parse("--listeners=kafka:9092:PodIP,np:9094:NodePort,lb:9095:LoadBalancer",
		"--advertised-host-templates=np={nodeAddress}.{namespace}.example.com,lb=kafka-{id}.{node}.example.com")
	if err != nil {
		t.Fatal(err)
	}
	want := []cluster.ListenerSpec{
		{Name: "kafka", Port: 9092, Type: v1alpha1.ListenerInternal, Mode: v1alpha1.AdvertisePodIP, Host: "10.1.2.3"},
		{Name: "np", Port: 9094, Type: v1alpha1.ListenerNodePort, Template: "{nodeAddress}.{namespace}.example.com", Host: "{nodeAddress}.kafka.example.com"},
		{Name: "lb", Port: 9095, Type: v1alpha1.ListenerLoadBalancer, Template: "kafka-{id}.{node}.example.com", Host: "kafka-3.n7.example.com"},
	}
	if !slices.Equal(cfg.Listeners, want) {
		t.Fatalf("listeners %+v, want %+v", cfg.Listeners, want)
	}
	if !cfg.Listeners[1].NeedsNodeAddress() || cfg.Listeners[2].NeedsNodeAddress() || !cfg.Listeners[0].Static() || cfg.Listeners[2].Static() {
		t.Error("only the {nodeAddress} listener needs the node; only the internal one is static")
	}
	for _, bad := range [][]string{
		{"--listeners=kafka:9092:NodePorts"},
		{"--advertised-host-templates=nope=x"},
		{"--advertised-host-templates=kafka"},
		{"--advertised-host-templates=kafka=a,kafka=b"},
	} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// --listener-security gives each listener its TLS and authentication, as the operator writes
// them (builders.go listenerSecurity); PLAIN and mutual TLS without TLS are refused.
func TestListenerSecurityFlag(t *testing.T) {
	env := map[string]string{"POD_NAME": "c-broker-0", "POD_NAMESPACE": "kafka"}
	parse := func(security string) ([]cluster.ListenerSpec, error) {
		var cfg Config
		var lists listFlags
		fs, envErrs := newFlagSet(&cfg, &lists, func(k string) string { return env[k] })
		fs.SetOutput(&strings.Builder{})
		if err := fs.Parse([]string{"--cluster=c", "--listeners=a:9092,b:9093,c:9094,d:9095", "--listener-security=" + security}); err != nil {
			return nil, err
		}
		err := parseConfig(&cfg, lists, *envErrs, func(k string) string { return env[k] })
		return cfg.Listeners, err
	}
	ls, err := parse("b=tls,c=tls+scram-sha-512,d=scram-sha-256")
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, l := range ls {
		got = append(got, fmt.Sprintf("%s:%v:%s", l.Name, l.TLS, l.Authentication))
	}
	if want := []string{"a:false:", "b:true:", "c:true:scram-sha-512", "d:false:scram-sha-256"}; !slices.Equal(got, want) {
		t.Fatalf("listeners %v, want %v", got, want)
	}
	for _, bad := range []string{"a=plain", "a=tls+tls+tls", "a=tls,a=tls", "z=tls", "a=", "a=kerberos", "a=scram-sha-512+tls", "a=tls+plain+tls"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if ls, err := parse("a=tls+tls"); err != nil || ls[0].Authentication != v1alpha1.AuthenticationTLS {
		t.Fatalf("mutual TLS: %v %v", ls, err)
	}
}

// broker/storage cannot import api/ (it holds no Kubernetes code, and api/ imports
// apimachinery), so it spells the topic id in a partition's directory name on its own. This
// pins that it spells it as status.topicID does (v1alpha1.KafkaUUID), so the id kubectl shows
// finds the topic's data, for ids of every alphabet character.
func TestPartitionDirectoriesSpellTheTopicIDAsTheAPIDoes(t *testing.T) {
	for _, s := range []string{"-_v7-_v7-_v7-_v7-_v7-w", "AAECAwQFBgcICQoLDA0ODw", "zZ9yXw0aB1cD2eF3gH4iJA"} {
		id, err := v1alpha1.ParseKafkaUUID(s)
		if err != nil {
			t.Fatal(err)
		}
		got := storage.PartitionDir("/data", "cid", "orders", id, 3)
		if want := filepath.Join("/data", "cid", "topics", "orders-"+s, "3"); got != want {
			t.Errorf("partition directory %s, want %s", got, want)
		}
	}
}

// `paddock broker --help` lists every API key the broker serves with the versions ApiVersions
// advertises (the group APIs included), because it is written from the handler table.
func TestHelpListsEveryServedAPIWithItsVersions(t *testing.T) {
	var out strings.Builder
	if code := run([]string{"--help"}, func(string) string { return "" }, &out, nil); code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	help := strings.Join(strings.Fields(out.String()), " ") // the list wraps
	for key, a := range apis {
		want := fmt.Sprintf("%s %d-%d", kmsg.NameForKey(key), a.min, a.max)
		if a.min == a.max {
			want = fmt.Sprintf("%s %d", kmsg.NameForKey(key), a.min)
		}
		if !strings.Contains(help, want+",") && !strings.HasSuffix(strings.Split(help, " Environment")[0], want) {
			t.Errorf("--help does not list %q", want)
		}
	}
	for _, group := range []string{"JoinGroup 0-9", "SyncGroup 0-5", "OffsetCommit 0-9", "OffsetFetch 0-9"} {
		if !strings.Contains(help, group) {
			t.Errorf("--help does not list the group API %q", group)
		}
	}
}
