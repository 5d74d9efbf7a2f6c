package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// File is one PEM file of the TLS material: its Path, and the Setting that names it (e.g.
// "tls.cert.file"), which errors and log lines about the file quote as Setting=Path.
type File struct {
	Setting string
	Path    string // "" when not set
}

// Settings name the PEM files of a node's TLS material.
type Settings struct {
	Cert File // the node's certificate, followed by any intermediate CA certificates
	Key  File // the private key of Cert
	CA   File // the CAs that sign the certificates of clients and peers; Path "" when none are verified
}

// list returns the files in fileStamps order.
func (s Settings) list() [3]File { return [3]File{s.Cert, s.Key, s.CA} }

// material is one loaded version of the files: immutable once built.
type material struct {
	cert tls.Certificate
	leaf *x509.Certificate
	cas  *x509.CertPool // nil without a CA file
}

// fileStamps identify the version of each file that a material was read from.
type fileStamps [3]os.FileInfo

// same reports whether every file is still the one (same inode, size and modification time)
// that was read.
func (a fileStamps) same(b fileStamps) bool {
	for i := range a {
		switch {
		case a[i] == nil && b[i] == nil:
		case a[i] == nil || b[i] == nil:
			return false
		case !os.SameFile(a[i], b[i]) || a[i].Size() != b[i].Size() || !a[i].ModTime().Equal(b[i].ModTime()):
			return false
		}
	}
	return true
}

// Store serves the current TLS material of the files of its Settings and reloads it when they
// change (see the package documentation). Safe for concurrent use.
type Store struct {
	logger   *zap.Logger
	settings Settings
	metrics  *metrics
	now      func() time.Time

	mu      sync.Mutex // guards the fields below; serializes checks and reloads
	current *material  // never nil once built
	loaded  fileStamps // what current was read from
	failed  fileStamps // the last version that failed to load (not retried until it changes)
	retryAt time.Time  // when failed is a certificate not valid yet: its start, to retry then
	statErr string     // the last error checking the files (logged once)
}

// notYetValidError is a certificate whose validity starts in the future.
type notYetValidError struct {
	file      File
	notBefore time.Time
}

func (e *notYetValidError) Error() string {
	return fmt.Sprintf("%s=%s: the certificate is not valid before %s", e.file.Setting, e.file.Path,
		e.notBefore.UTC().Format(time.RFC3339))
}

// NewStore reads the files of s once and returns the Store serving them; an error names the file
// that is missing or bad. Its metrics are registered with reg (none when reg is nil); its reloads
// are logged to logger (nil: not logged).
func NewStore(logger *zap.Logger, s Settings, reg prometheus.Registerer) (*Store, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	st := &Store{logger: logger, settings: s, metrics: newMetrics(reg), now: time.Now}
	stamps, err := st.stat()
	if err != nil {
		return nil, err
	}
	m, err := load(s, st.now())
	if err != nil {
		return nil, err
	}
	st.install(m, stamps)
	return st, nil
}

// Check reads the files of s and checks them as NewStore does, without keeping them: the key
// must match the certificate, which must be valid now (clients refuse an expired or not yet valid
// one), and the CA file, when named, must hold at least one certificate.
func Check(s Settings) error {
	_, err := load(s, time.Now())
	return err
}

func (s *Store) stat() (fileStamps, error) {
	var st fileStamps
	for i, f := range s.settings.list() {
		if f.Path == "" {
			continue
		}
		fi, err := os.Stat(f.Path)
		if err != nil {
			return st, fmt.Errorf("%s=%s: %w", f.Setting, f.Path, err)
		}
		st[i] = fi
	}
	return st, nil
}

// install makes m current; s.mu is held or s is not shared yet.
func (s *Store) install(m *material, stamps fileStamps) {
	s.current = m
	s.loaded = stamps
	s.failed = fileStamps{}
	s.metrics.observe(m)
}

// material returns the material to use for a new connection, reloading it first if its files
// changed.
func (s *Store) material() *material {
	s.mu.Lock()
	defer s.mu.Unlock()
	stamps, err := s.stat()
	if err != nil {
		if msg := err.Error(); msg != s.statErr {
			s.statErr = msg
			s.metrics.reloads.WithLabelValues("failure").Inc()
			s.logger.Error("cannot check the TLS files; the loaded certificate stays in use", zap.Error(err))
		}
		return s.current
	}
	s.statErr = ""
	if stamps.same(s.loaded) || stamps.same(s.failed) && (s.retryAt.IsZero() || s.now().Before(s.retryAt)) {
		return s.current
	}
	s.reloadLocked(stamps, "the files changed")
	return s.current
}

// Reload re-reads the files now, whether or not they changed; reason (e.g. "SIGHUP") is logged
// with the outcome. A failure is logged and the loaded material stays in use.
func (s *Store) Reload(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stamps, err := s.stat()
	if err != nil {
		s.metrics.reloads.WithLabelValues("failure").Inc()
		s.logger.Error("TLS reload failed; the loaded certificate stays in use", zap.Error(err))
		return
	}
	s.reloadLocked(stamps, reason)
}

func (s *Store) reloadLocked(stamps fileStamps, why string) {
	m, err := load(s.settings, s.now())
	if err != nil {
		s.failed = stamps
		s.retryAt = time.Time{}
		if nyv := (*notYetValidError)(nil); errors.As(err, &nyv) {
			s.retryAt = nyv.notBefore
		}
		s.metrics.reloads.WithLabelValues("failure").Inc()
		if !s.retryAt.IsZero() {
			s.logger.Error("TLS reload failed; the loaded certificate stays in use until the new one becomes valid or the files change again",
				zap.String("reason", why), zap.Time("retry_at", s.retryAt), zap.Error(err))
			return
		}
		s.logger.Error("TLS reload failed; the loaded certificate stays in use until the files change again",
			zap.String("reason", why), zap.Error(err))
		return
	}
	s.install(m, stamps)
	s.metrics.reloads.WithLabelValues("success").Inc()
	s.logger.Info("TLS certificate reloaded", zap.String("reason", why),
		zap.String("subject", m.leaf.Subject.String()), zap.String("serial", m.leaf.SerialNumber.String()),
		zap.Time("not_after", m.leaf.NotAfter))
}

// load reads and checks the files of s (see Check) at time now.
func load(s Settings, now time.Time) (*material, error) {
	cert, err := tls.LoadX509KeyPair(s.Cert.Path, s.Key.Path)
	if err != nil {
		return nil, fmt.Errorf("%s=%s, %s=%s: %w", s.Cert.Setting, s.Cert.Path, s.Key.Setting, s.Key.Path, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", s.Cert.Setting, s.Cert.Path, err)
		}
	}
	switch {
	case now.After(leaf.NotAfter):
		return nil, fmt.Errorf("%s=%s: the certificate expired at %s; renew it", s.Cert.Setting, s.Cert.Path,
			leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, &notYetValidError{file: s.Cert, notBefore: leaf.NotBefore}
	}
	m := &material{cert: cert, leaf: leaf}
	if s.CA.Path != "" {
		if m.cas, err = ReadCertPool(s.CA.Path); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", s.CA.Setting, s.CA.Path, err)
		}
	}
	return m, nil
}

// ReadCertPool reads a PEM file of CA certificates; one holding none is an error.
func ReadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("the file holds no PEM certificate")
	}
	return pool, nil
}
