package broker

import (
	"crypto/x509/pkix"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/pki"
)

// The alert PaddockCertificateExpiringSoon reads when each TLS listener's certificate
// expires: no series before the operator issued one, the issued one's NotAfter on every TLS
// listener and none on a plaintext one, and a renewed certificate's from the next scrape on.
func TestMetricsShowWhenEachTLSListenersCertificateExpires(t *testing.T) {
	f := newPKI(t)
	sb := startSecuredBroker(t, secureState(f, nil),
		cluster.ListenerSpec{Name: "tls", TLS: true}, cluster.ListenerSpec{Name: "plain"}, cluster.ListenerSpec{Name: "mtls", TLS: true, Authentication: "tls"})
	series := regexp.MustCompile(`(?m)^paddock_tls_certificate_expiry_timestamp_seconds\{listener="([^"]+)"\} (\S+)$`)
	expiries := func() map[string]int64 {
		t.Helper()
		resp, err := http.Get("http://" + net.JoinHostPort("127.0.0.1", fmt.Sprint(sb.b.Config.HealthPort)) + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		if series.Match(body) && !strings.Contains(string(body), "# TYPE paddock_tls_certificate_expiry_timestamp_seconds gauge\n") {
			t.Fatal("paddock_tls_certificate_expiry_timestamp_seconds is served, but not as a gauge")
		}
		for _, m := range series.FindAllStringSubmatch(string(body), -1) {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			out[m[1]] = int64(v)
		}
		return out
	}
	if got := expiries(); len(got) != 0 {
		t.Fatalf("before any certificate was issued: %v, want no series", got)
	}

	leaf := pki.Leaf{Subject: pkix.Name{CommonName: "c-broker"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true, Client: true}
	issued := issue(t, f.clusterCA, leaf, time.Hour)
	sb.update(func(s *cluster.SecuritySnapshot) { s.Certificate = issued })
	want := issued.Leaf.NotAfter.Unix()
	if got := expiries(); len(got) != 2 || got["tls"] != want || got["mtls"] != want {
		t.Fatalf("issued: %v, want tls and mtls at %d (NotAfter %s), plain absent", got, want, issued.Leaf.NotAfter)
	}

	renewed := issue(t, f.clusterCA, leaf, 3*time.Hour)
	sb.update(func(s *cluster.SecuritySnapshot) { s.Certificate = renewed })
	want = renewed.Leaf.NotAfter.Unix()
	if got := expiries(); got["tls"] != want || got["mtls"] != want {
		t.Fatalf("renewed: %v, want tls and mtls at %d", got, want)
	}
}
