package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made up for one test.
type CA struct {
	Cert *x509.Certificate
	Pool *x509.CertPool // holds Cert only: what a peer trusting the CA uses
	key  *ecdsa.PrivateKey
}

// NewCA returns a self-signed CA whose common name is name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	setValidity(tmpl)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Pool: pool, key: key}
}

// Issue returns a certificate for subject signed by ca: a server certificate for 127.0.0.1 and
// localhost, or a client certificate.
func (ca *CA) Issue(t testing.TB, subject pkix.Name, server bool) tls.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{Subject: subject, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	}
	return ca.sign(t, tmpl)
}

// IssuePeer returns a certificate for subject signed by ca that serves and connects, as a
// cluster node's does on the replication port: for 127.0.0.1, localhost and ips.
func (ca *CA) IssuePeer(t testing.TB, subject pkix.Name, ips ...net.IP) tls.Certificate {
	t.Helper()
	return ca.sign(t, &x509.Certificate{
		Subject:     subject,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...),
		DNSNames:    []string{"localhost"},
	})
}

// IssueExpired returns a server certificate for 127.0.0.1 and localhost, signed by ca, whose
// validity ended a day ago.
func (ca *CA) IssueExpired(t testing.TB, subject pkix.Name) tls.Certificate {
	t.Helper()
	return ca.sign(t, &x509.Certificate{
		Subject: subject, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour),
	})
}

// IssueValidFrom returns a server certificate for 127.0.0.1 and localhost, signed by ca, valid
// from start for a day.
func (ca *CA) IssueValidFrom(t testing.TB, subject pkix.Name, start time.Time) tls.Certificate {
	t.Helper()
	return ca.sign(t, &x509.Certificate{
		Subject: subject, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		NotBefore: start, NotAfter: start.Add(24 * time.Hour),
	})
}

// IssueRaw returns a client certificate whose subject is the DER-encoded rawSubject as it is.
func (ca *CA) IssueRaw(t testing.TB, rawSubject []byte) tls.Certificate {
	t.Helper()
	return ca.sign(t, &x509.Certificate{RawSubject: rawSubject, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// sign completes tmpl (serial, validity unless set, key usage, a new key) and signs it with ca.
func (ca *CA) sign(t testing.TB, tmpl *x509.Certificate) tls.Certificate {
	t.Helper()
	key := newKey(t)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	if tmpl.NotAfter.IsZero() {
		setValidity(tmpl)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// CertPEM returns the CA certificate as PEM.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// KeyPairPEM returns cert's certificate and its private key (PKCS #8) as PEM.
func KeyPairPEM(t testing.TB, cert tls.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func setValidity(tmpl *x509.Certificate) {
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
}

// WriteCAFile writes the CA certificate as PEM to dir/name and returns the path.
func WriteCAFile(t testing.TB, ca *CA, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	WriteAtomically(t, path, ca.CertPEM())
	return path
}

// WriteKeyPair writes cert and its key as PEM files, each replaced atomically (write a temporary
// file, rename it over the old one), as certificate managers and Kubernetes secret updates do.
func WriteKeyPair(t testing.TB, cert tls.Certificate, certPath, keyPath string) {
	t.Helper()
	certPEM, keyPEM := KeyPairPEM(t, cert)
	WriteAtomically(t, keyPath, keyPEM)
	WriteAtomically(t, certPath, certPEM)
}

// WriteAtomically replaces the file at path with data: it writes path+".tmp" and renames it over
// path, so that a reader sees the old file or the new one, never a part.
func WriteAtomically(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
