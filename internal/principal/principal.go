package principal

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// prefix starts every principal name, as in Kafka ("User:").
const prefix = "User:"

// FromCertificate returns the principal a client certificate authenticates: "User:" followed by
// the certificate's subject distinguished name in RFC 2253 form, most specific attribute first
// (e.g. "User:CN=broker-1,OU=brokers,O=Acme,C=US"), as Kafka's default SSL principal builder
// names it. The name is built from the subject exactly as encoded in the certificate (attribute
// order and multi-valued RDNs kept, special characters escaped per RFC 2253); attribute types
// without a short name are written as dotted OIDs with a hex value ("2.5.4.97=#1303..."). A
// certificate with an empty subject yields "User:".
func FromCertificate(cert *x509.Certificate) string {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &rdns); err != nil || len(rest) > 0 {
		// crypto/x509 parsed this subject already; fall back to its normalized form.
		return prefix + cert.Subject.String()
	}
	return prefix + rdns.String()
}

// FromContext returns the principal of the client of the gRPC call in ctx: the FromCertificate
// name of the certificate it presented during the TLS handshake, when that certificate was
// verified against the client CA. ok is false for a plaintext connection or a client without a
// verified certificate.
func FromContext(ctx context.Context) (principal string, ok bool) {
	p, found := peer.FromContext(ctx)
	if !found || p.AuthInfo == nil {
		return "", false
	}
	info, isTLS := p.AuthInfo.(credentials.TLSInfo)
	if !isTLS || len(info.State.VerifiedChains) == 0 || len(info.State.PeerCertificates) == 0 {
		return "", false
	}
	return FromCertificate(info.State.PeerCertificates[0]), true
}
