package broker

import (
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// A broker without an address on a listener is left out of that listener's answers (and
// only those), does not announce it, and is not ready; once the Service and Node say, it
// appears there at its node's address and own nodePort.
func TestBrokerWithoutAnExternalAddressLeavesItselfOutOfThatListenerOnly(t *testing.T) {
	internal, external := testkit.Listen(t), testkit.Listen(t)
	internalPort := int32(internal.Addr().(*net.TCPAddr).Port)
	cfg := Config{
		Cluster: "c",
		Listeners: []cluster.ListenerSpec{
			{Name: "kafka", Port: internalPort, Type: v1alpha1.ListenerInternal, Mode: v1alpha1.AdvertisePodIP, Host: "127.0.0.1"},
			{Name: "external", Port: 9094, Type: v1alpha1.ListenerNodePort},
		},
		Identity: cluster.Identity{ID: 0, Pod: "c-broker-0", Namespace: "kafka", Node: "n1"},
	}
	peer := v1alpha1.BrokerRow{ID: 1, State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive,
		Listeners: []v1alpha1.ListenerAddress{{Name: "kafka", Host: "10.1.0.8", Port: 9092}, {Name: "external", Host: "203.0.113.2", Port: 31095}}}
	view := cluster.NewMemoryView(cluster.Snapshot{ClusterID: testClusterID, Brokers: []v1alpha1.BrokerRow{
		{ID: 0, State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive}, peer,
	}})
	b := NewBroker(cfg, view, testr.New(t))
	srv := newTestServer(t, &Handler{View: view, Self: 0, Log: testr.New(t)})
	go func() { _ = srv.Serve(AdvertiseFrom(internal, "kafka", b.Addresses)) }() // ErrServerClosed at cleanup
	go func() { _ = srv.Serve(AdvertiseFrom(external, "external", b.Addresses)) }()

	metadata := func(ln net.Listener) []string {
		c := dialKafka(t, ln.Addr().String())
		defer func() { _ = c.Close() }()
		resp := roundTrip(t, c, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
		var out []string
		for _, br := range resp.Brokers {
			out = append(out, strconv.Itoa(int(br.NodeID))+"@"+net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port))))
		}
		return out
	}
	if got, want := metadata(internal), []string{"0@127.0.0.1:" + strconv.Itoa(int(internalPort)), "1@10.1.0.8:9092"}; !slices.Equal(got, want) {
		t.Errorf("internal listener lists %v, want %v", got, want)
	}
	if got, want := metadata(external), []string{"1@203.0.113.2:31095"}; !slices.Equal(got, want) {
		t.Errorf("external listener, no address yet: lists %v, want only the peer %v", got, want)
	}
	if got := b.Addresses.Known(); len(got) != 1 || got[0].Name != "kafka" {
		t.Errorf("announced %+v, want only the internal listener", got)
	}
	b.listenersBound.Store(true)
	rec := httptest.NewRecorder()
	b.healthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "external: node n1 not read yet") {
		t.Errorf("/readyz = %d %s, want 503 naming the external listener", rec.Code, rec.Body)
	}

	b.Addresses.Observe(
		&corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "external", NodePort: 31094}}}},
		&corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.1"}}}})
	if got, want := metadata(external), []string{"0@192.168.0.1:31094", "1@203.0.113.2:31095"}; !slices.Equal(got, want) {
		t.Errorf("external listener lists %v, want %v", got, want)
	}
	rec = httptest.NewRecorder()
	b.healthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("/readyz = %d %s once every listener has an address", rec.Code, rec.Body)
	}
}
