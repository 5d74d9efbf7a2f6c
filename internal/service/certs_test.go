package service

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"

	"github.com/coordinatord/coordinatord/internal/testcert"
)

// testCA is a certificate authority made up for one test: a testcert.CA under the names this
// package's tests use.
type testCA struct {
	ca   *testcert.CA
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	ca := testcert.NewCA(t, name)
	return &testCA{ca: ca, pool: ca.Pool}
}

// issue returns a certificate for subject signed by ca: a server certificate for 127.0.0.1 and
// localhost, or a client certificate.
func (ca *testCA) issue(t *testing.T, subject pkix.Name, server bool) tls.Certificate {
	t.Helper()
	return ca.ca.Issue(t, subject, server)
}
