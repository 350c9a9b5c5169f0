package v1alpha1

import (
	"slices"
	"testing"
)

func TestListenersAnnotationRoundTrips(t *testing.T) {
	addrs := []ListenerAddress{
		{Name: "internal", Host: "demo-broker-0.demo-brokers.kafka.svc.cluster.local", Port: 9092},
		{Name: "external", Host: "10.1.2.3", Port: 9094},
		{Name: "v6", Host: "fd00::7", Port: 9095},
	}
	s := FormatListeners(addrs)
	if want := "internal=demo-broker-0.demo-brokers.kafka.svc.cluster.local:9092,external=10.1.2.3:9094,v6=[fd00::7]:9095"; s != want {
		t.Fatalf("format = %q, want %q", s, want)
	}
	if got := ParseListeners(s); !slices.Equal(got, addrs) {
		t.Fatalf("parse = %+v, want %+v", got, addrs)
	}
}

func TestParseListenersSkipsWhatIsNotAnAddress(t *testing.T) {
	got := ParseListeners("a=h:1,=h:2,b,c=h,d=:3,e=h:0,f=h:70000,g=h:x,a=other:4,ok=10.0.0.1:9092")
	want := []ListenerAddress{{Name: "a", Host: "h", Port: 1}, {Name: "ok", Host: "10.0.0.1", Port: 9092}}
	if !slices.Equal(got, want) {
		t.Fatalf("parse = %+v, want %+v", got, want)
	}
	if ParseListeners("") != nil {
		t.Fatal("an empty annotation has listeners")
	}
}
