package principal

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/coordinatord/coordinatord/internal/testcert"
)

func TestFromCertificate(t *testing.T) {
	ca := testcert.NewCA(t, "ca")
	oid := func(ints ...int) asn1.ObjectIdentifier { return asn1.ObjectIdentifier(ints) }
	cases := []struct {
		name    string
		subject pkix.RDNSequence
		want    string
	}{
		{"usual order", pkix.RDNSequence{
			{{Type: oid(2, 5, 4, 6), Value: "US"}},
			{{Type: oid(2, 5, 4, 10), Value: "Acme"}},
			{{Type: oid(2, 5, 4, 11), Value: "brokers"}},
			{{Type: oid(2, 5, 4, 3), Value: "broker-1"}},
		}, "User:CN=broker-1,OU=brokers,O=Acme,C=US"},
		{"encoded order kept", pkix.RDNSequence{
			{{Type: oid(2, 5, 4, 3), Value: "first"}},
			{{Type: oid(2, 5, 4, 10), Value: "Acme"}},
		}, "User:O=Acme,CN=first"},
		{"escaping", pkix.RDNSequence{
			{{Type: oid(2, 5, 4, 3), Value: `a,b+c"d\e<f>;g`}},
		}, `User:CN=a\,b\+c\"d\\e\<f\>\;g`},
		{"multi-valued RDN", pkix.RDNSequence{
			{{Type: oid(2, 5, 4, 10), Value: "Acme"}},
			{{Type: oid(2, 5, 4, 3), Value: "x"}, {Type: oid(2, 5, 4, 11), Value: "y"}},
		}, "User:CN=x+OU=y,O=Acme"},
		{"unknown attribute as OID", pkix.RDNSequence{
			{{Type: oid(2, 5, 4, 97), Value: "VAT"}},
		}, "User:2.5.4.97=#1303564154"},
		{"empty subject", pkix.RDNSequence{}, "User:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rawSubject, err := asn1.Marshal(tc.subject)
			if err != nil {
				t.Fatal(err)
			}
			cert := ca.IssueRaw(t, rawSubject)
			if got := FromCertificate(cert.Leaf); got != tc.want {
				t.Fatalf("principal = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFromContext: only a certificate the handshake verified names a principal.
func TestFromContext(t *testing.T) {
	leaf := testcert.NewCA(t, "ca").Issue(t, pkix.Name{CommonName: "c"}, false).Leaf
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{}, AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{
		PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}}})
	if p, ok := FromContext(ctx); !ok || p != "User:CN=c" {
		t.Fatalf("principal = %q, %v", p, ok)
	}
	// An unverified certificate is no principal.
	unverified := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{
		PeerCertificates: []*x509.Certificate{leaf}}}})
	if _, ok := FromContext(unverified); ok {
		t.Error("a certificate that was not verified gave a principal")
	}
}

func TestParseList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{" ; ;", nil, true},
		{"*", []string{"*"}, true},
		{"User:CN=a,O=Acme;User:CN=b", []string{"User:CN=a,O=Acme", "User:CN=b"}, true},
		{"  User:CN=a  ;*", []string{"User:CN=a", "*"}, true},
		{"User:CN=a;CN=b", nil, false},
		{"User:  ", nil, false},
		{"user:CN=a", nil, false},
		// RFC 2253 escapes: "\;" is part of a name, "\\;" ends one; "\ " at the end is kept.
		{`User:CN=a\;b,O=Acme;User:CN=c`, []string{`User:CN=a\;b,O=Acme`, "User:CN=c"}, true},
		{`User:CN=a\\;User:CN=b`, []string{`User:CN=a\\`, "User:CN=b"}, true},
		{`User:CN=a\  ; User:CN=\ b\ `, []string{`User:CN=a\ `, `User:CN=\ b\ `}, true},
		{`User:CN=a\`, []string{`User:CN=a\`}, true},
		{`User:CN=a\;`, []string{`User:CN=a\;`}, true},
	} {
		got, err := ParseList(tc.in)
		if (err == nil) != tc.ok || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("ParseList(%q) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
