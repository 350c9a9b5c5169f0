package broker

import (
	"crypto/tls"
	"crypto/x509"

	"github.com/prometheus/client_golang/prometheus"
)

// descCertificateExpiry is the serving certificate's NotAfter, per TLS listener: the alert
// PaddockCertificateExpiringSoon reads it (config/monitoring).
var descCertificateExpiry = prometheus.NewDesc("paddock_tls_certificate_expiry_timestamp_seconds",
	"When the certificate a TLS listener serves expires (its NotAfter, Unix seconds); absent while the operator has issued none.",
	[]string{"listener"}, nil)

// collectCertificates sends each TLS listener's certificate expiry: the broker's current
// certificate, which every TLS listener serves from the next handshake on (tlsConfig). No
// series before the operator issued one: the broker is not ready then, and a made-up value
// would fire or silence the alert.
func (c stateCollector) collectCertificates(ch chan<- prometheus.Metric) {
	if c.b.Security == nil {
		return
	}
	leaf := certificateLeaf(c.b.Security.Security().Certificate)
	if leaf == nil {
		return
	}
	for _, l := range c.b.Config.Listeners {
		if l.TLS {
			ch <- prometheus.MustNewConstMetric(descCertificateExpiry, prometheus.GaugeValue, float64(leaf.NotAfter.Unix()), l.Name)
		}
	}
}

// certificateLeaf is cert's own certificate, parsed if tls.X509KeyPair left Leaf empty; nil
// without a certificate or when it does not parse.
func certificateLeaf(cert *tls.Certificate) *x509.Certificate {
	if cert == nil || len(cert.Certificate) == 0 {
		return nil
	}
	if cert.Leaf != nil {
		return cert.Leaf
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}
