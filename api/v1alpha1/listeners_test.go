package v1alpha1

import (
	"slices"
	"strings"
	"testing"
)

func TestReadListenersBelievesOnlyAWellFormedAnnouncementOfTheClustersListeners(t *testing.T) {
	known := []string{"internal", "external", "v6"}
	good := []ListenerAddress{
		{Name: "internal", Host: "demo-broker-0.demo-brokers.kafka.svc.cluster.local", Port: 9092},
		{Name: "external", Host: "Broker-0.Example.COM", Port: 30094},
		{Name: "v6", Host: "fd00::7", Port: 9095},
	}
	got, err := ReadListeners(FormatListeners(good), known)
	if err != nil || !slices.Equal(got, good) {
		t.Fatalf("ReadListeners(FormatListeners(good)) = %+v, %v; want good back", got, err)
	}
	if got, err := ReadListeners("", known); err != nil || got == nil || len(got) != 0 {
		t.Fatalf(`ReadListeners("") = %#v, %v; want an empty, non-nil announcement`, got, err)
	}
	for _, tc := range []struct{ value, why string }{
		{"bogus=h:1", "is not one of the cluster's"},
		{"internal=h:1,internal=g:2", "announced twice"},
		{"internal=" + strings.Repeat("a", 254) + ":9092", "more than 253"},
		{"internal=" + strings.Repeat("a", 64) + ".example.com:9092", "neither an IP address nor a DNS name"},
		{"internal=evil_host:9092", "neither an IP address nor a DNS name"},
		{"internal=:9092", "empty host"},
		{"internal=h:0", "not in 1..65535"},
		{"internal=h:70000", "not in 1..65535"},
		{"internal=h:+9092", "not in 1..65535"},
		{"internal=h:09092", "not in 1..65535"},
		{"internal=h", "not host:port"},
		{"internal", "not name=host:port"},
		{"internal=h:1,external=g:2,v6=f:3,x=y:4", `listener "x" is not one of the cluster's`},
		{"internal=good:9092,external=bad host:1", "neither an IP address nor a DNS name"},
	} {
		got, err := ReadListeners(tc.value, known)
		if err == nil || !strings.Contains(err.Error(), tc.why) || got != nil {
			t.Errorf("ReadListeners(%.50q) = %+v, %v; want nothing and an error saying %q", tc.value, got, err, tc.why)
		}
	}
}
