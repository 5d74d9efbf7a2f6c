package service

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// PrincipalPrefix starts every principal name, as in Kafka ("User:").
const PrincipalPrefix = "User:"

// CertificatePrincipal returns the principal a client certificate authenticates: "User:" followed
// by the certificate's subject distinguished name in RFC 2253 form, most specific attribute first
// (e.g. "User:CN=broker-1,OU=brokers,O=Acme,C=US"), as Kafka's default SSL principal builder
// names it. The name is built from the subject exactly as encoded in the certificate (attribute
// order and multi-valued RDNs kept, special characters escaped per RFC 2253); attribute types
// without a short name are written as dotted OIDs with a hex value ("2.5.4.97=#1303..."). A
// certificate with an empty subject yields "User:".
func CertificatePrincipal(cert *x509.Certificate) string {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &rdns); err != nil || len(rest) > 0 {
		// crypto/x509 parsed this subject already; fall back to its normalized form.
		return PrincipalPrefix + cert.Subject.String()
	}
	return PrincipalPrefix + rdns.String()
}

// PrincipalFromContext returns the principal of the client of the call in ctx: the
// CertificatePrincipal of the certificate it presented during the TLS handshake, when that
// certificate was verified against the client CA. ok is false for a plaintext connection or a
// client without a verified certificate.
func PrincipalFromContext(ctx context.Context) (principal string, ok bool) {
	p, found := peer.FromContext(ctx)
	if !found || p.AuthInfo == nil {
		return "", false
	}
	info, isTLS := p.AuthInfo.(credentials.TLSInfo)
	if !isTLS || len(info.State.VerifiedChains) == 0 || len(info.State.PeerCertificates) == 0 {
		return "", false
	}
	return CertificatePrincipal(info.State.PeerCertificates[0]), true
}
