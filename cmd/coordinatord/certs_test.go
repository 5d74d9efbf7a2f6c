package main

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"github.com/coordinatord/coordinatord/internal/testcert"
)

// writeCAFile writes the CA certificate as PEM to dir/name and returns the path.
func writeCAFile(t *testing.T, ca *testcert.CA, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	writeAtomically(t, path, ca.CertPEM())
	return path
}

// writeKeyPair writes cert and its key as PEM files, each replaced atomically (write a temporary
// file, rename it over the old one), as certificate managers and Kubernetes secret updates do.
func writeKeyPair(t *testing.T, cert tls.Certificate, certPath, keyPath string) {
	t.Helper()
	certPEM, keyPEM := testcert.KeyPairPEM(t, cert)
	writeAtomically(t, keyPath, keyPEM)
	writeAtomically(t, certPath, certPEM)
}

func writeAtomically(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
