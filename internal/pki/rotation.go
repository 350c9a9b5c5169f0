package pki

import (
	"crypto/x509"
	"io"
	"net"
	"time"
)

// CASet is one CA of a cluster through its renewals (docs/security.md, "Certificates"):
// Signing issues certificates; Next, made when Signing became due for renewal, is already
// trusted (in the bundle) but signs only once it has been trusted for half the renewal
// window, so every client had time to pick up the bundle; Previous, the CA Signing replaced,
// stays trusted until it expires, since certificates it signed are still being replaced.
type CASet struct {
	Signing  *CA
	Next     *CA
	Previous *x509.Certificate
}

// CAPolicy says what a CA is called and how long it and its certificates live.
type CAPolicy struct {
	CommonName, Organization string
	Validity, RenewBefore    time.Duration
}

// Step is the CA set at now: a CA made when there is none, a next CA made once the signing one
// is due for renewal, the next one promoted once it has been trusted for RenewBefore/2, the
// previous one dropped once expired. changed says whether anything did. A user-supplied CA
// (managed=false) is taken as it is: never made, never renewed.
func (p CAPolicy) Step(set CASet, now time.Time, managed bool, random io.Reader) (CASet, bool, error) {
	if !managed {
		return set, false, nil
	}
	changed := false
	if set.Signing == nil {
		ca, err := NewCA(p.CommonName, p.Organization, now, p.Validity, random)
		if err != nil {
			return set, false, err
		}
		set.Signing, set.Next, changed = ca, nil, true
	}
	if set.Previous != nil && now.After(set.Previous.NotAfter) {
		set.Previous, changed = nil, true
	}
	if set.Next == nil && DueForRenewal(set.Signing.Cert, now, p.RenewBefore) {
		ca, err := NewCA(p.CommonName, p.Organization, now, p.Validity, random)
		if err != nil {
			return set, false, err
		}
		set.Next, changed = ca, true
	}
	if set.Next != nil && !now.Before(p.promoteAt(set.Next)) {
		set.Previous, set.Signing, set.Next, changed = set.Signing.Cert, set.Next, nil, true
	}
	return set, changed, nil
}

// promoteAt is when next starts signing: half the renewal window after it was made.
func (p CAPolicy) promoteAt(next *CA) time.Time {
	return next.Cert.NotBefore.Add(backdate + p.RenewBefore/2)
}

// NextChange is the earliest time Step would change set (a renewal, a promotion, an expiry),
// for a reconciler to come back then; zero when set is unmanaged or empty.
func (p CAPolicy) NextChange(set CASet, managed bool) time.Time {
	if !managed || set.Signing == nil {
		return time.Time{}
	}
	t := RenewalTime(set.Signing.Cert, p.RenewBefore)
	if set.Next != nil {
		t = p.promoteAt(set.Next)
	}
	if set.Previous != nil && set.Previous.NotAfter.Before(t) {
		t = set.Previous.NotAfter.Add(time.Second)
	}
	return t
}

// Trusted is the set's trust bundle at now: signing, next and previous, the expired left out.
func (set CASet) Trusted(now time.Time) []byte {
	certs := []*x509.Certificate{}
	if set.Signing != nil {
		certs = append(certs, set.Signing.Cert)
	}
	if set.Next != nil {
		certs = append(certs, set.Next.Cert)
	}
	return Bundle(now, append(certs, set.Previous)...)
}

// LeafVerdict says why a certificate must be issued anew, or "" when it may stay.
func LeafVerdict(cert *x509.Certificate, signing *CA, dnsNames []string, ips []net.IP, now time.Time, renewBefore time.Duration) string {
	switch {
	case cert == nil:
		return "Missing"
	case !SignedBy(cert, signing.Cert):
		return "NewCertificateAuthority"
	case SANsDiffer(cert, dnsNames, ips):
		return "NamesChanged"
	case DueForRenewal(cert, now, renewBefore) && cert.NotAfter.Before(signing.Cert.NotAfter):
		// A certificate that already lives as long as its CA gains nothing from a re-issue by
		// the same CA; it is replaced when the next CA starts signing.
		return "Renewal"
	}
	return ""
}
